/**
 * The running daemon as the `audit` and `status` commands see it: its base URL (config
 * `http.host`/`http.port`), the admin token (`PRESERVD_TOKEN`, else `<dataDir>/admin.token`),
 * and JSON requests whose failures become one clear sentence (`DaemonError`) instead of a stack.
 */
import { readFileSync } from 'node:fs';
import type { Config } from '../config/config.js';
import type { DataLayout } from '../storage/layout.js';

/** Why a command could not talk to the daemon; `message` is meant for the operator. */
export class DaemonError extends Error {
  /** True when the daemon could not be reached at all (down, restarting). */
  readonly unreachable: boolean;
  constructor(message: string, unreachable = false) {
    super(message);
    this.name = 'DaemonError';
    this.unreachable = unreachable;
  }
}

export interface DaemonResponse {
  status: number;
  location: string | null;
  body: unknown;
}

const REQUEST_TIMEOUT_MS = 15_000;

/** `http://host:port`, with a wildcard listen address turned into loopback. */
function daemonBaseUrl(config: Pick<Config, 'http'>): string {
  let host = config.http.host;
  if (host === '0.0.0.0' || host === '') host = '127.0.0.1';
  if (host === '::') host = '::1';
  if (host.includes(':') && !host.startsWith('[')) host = `[${host}]`;
  return `http://${host}:${config.http.port}`;
}

/** The admin token, or a DaemonError saying where it was looked for. */
function adminToken(file: string, env: NodeJS.ProcessEnv): string {
  const fromEnv = env.PRESERVD_TOKEN?.trim();
  if (fromEnv) return fromEnv;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      code === 'ENOENT'
        ? 'does not exist'
        : code === 'EACCES'
          ? 'is not readable by this user'
          : `could not be read (${code})`;
    throw new DaemonError(`no admin token: PRESERVD_TOKEN is not set and ${file} ${why}`);
  }
  const token = text.split('\n')[0]?.trim() ?? '';
  if (token === '') throw new DaemonError(`no admin token: ${file} is empty`);
  return token;
}

export class DaemonClient {
  constructor(
    readonly baseUrl: string,
    private readonly token: string,
    /** Where the token came from, for the message when it is refused. */
    private readonly tokenSource: string,
  ) {}

  static fromConfig(
    config: Pick<Config, 'http'>,
    layout: Pick<DataLayout, 'adminToken'>,
    env: NodeJS.ProcessEnv,
  ): DaemonClient {
    const file = layout.adminToken;
    const source = env.PRESERVD_TOKEN?.trim() ? 'PRESERVD_TOKEN' : file;
    return new DaemonClient(daemonBaseUrl(config), adminToken(file, env), source);
  }

  get(path: string): Promise<DaemonResponse> {
    return this.request('GET', path);
  }

  post(path: string): Promise<DaemonResponse> {
    return this.request('POST', path);
  }

  /** One request; 2xx and 3xx come back, anything else is a DaemonError naming the cause. */
  async request(method: 'GET' | 'POST', path: string): Promise<DaemonResponse> {
    let res: Response;
    try {
      res = await fetch(`${this.baseUrl}${path}`, {
        method,
        headers: { authorization: `Bearer ${this.token}`, accept: 'application/json' },
        redirect: 'manual',
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
    } catch (err) {
      throw new DaemonError(
        `could not reach preservd at ${this.baseUrl} (${networkReason(err)}); is the daemon running? (preservd serve)`,
        true,
      );
    }
    const text = await res.text().catch(() => '');
    let body: unknown = undefined;
    try {
      body = text === '' ? undefined : JSON.parse(text);
    } catch {
      body = undefined;
    }
    if (res.status < 400) return { status: res.status, location: res.headers.get('location'), body };
    const said =
      typeof (body as { error?: unknown } | undefined)?.error === 'string'
        ? (body as { error: string }).error
        : text.slice(0, 200);
    if (res.status === 401)
      throw new DaemonError(
        `preservd refused the token from ${this.tokenSource} (${said || '401'}); issue a new one with \`preservd token issue admin\``,
      );
    if (res.status === 403)
      throw new DaemonError(
        `the token from ${this.tokenSource} is not an admin's; audits need an admin token (${said || '403'})`,
      );
    throw new DaemonError(
      `preservd answered ${res.status} to ${method} ${path}${said ? `: ${said}` : ''}`,
      res.status >= 500,
    );
  }
}

function networkReason(err: unknown): string {
  const e = err as { name?: string; cause?: { code?: string; message?: string }; message?: string };
  if (e.name === 'TimeoutError') return `no answer within ${REQUEST_TIMEOUT_MS / 1000} s`;
  const code = e.cause?.code;
  if (code === 'ECONNREFUSED') return 'connection refused';
  if (code !== undefined) return code;
  return e.cause?.message ?? e.message ?? String(err);
}
