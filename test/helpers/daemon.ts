/**
 * Starts the real daemon (`node dist/src/cli.js serve`) as a child process on free loopback
 * ports with a temporary data directory, and talks to it the way clients do: HTTP, rsync and the
 * `preservd` command.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { node } from './node.js';
import { boundByPermissions, checkoutOwner } from './unprivileged.js';

/** The repository root (tests run from dist/test/...). */
export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
export const cliPath = join(repoRoot, 'dist/src/cli.js');
/**
 * The Node options the daemon is deployed with (the `preservd` command's first line, `npm start`,
 * systemd/preservd.service; test/service/node-options.test.ts holds them to this): tests' and
 * benches' daemons run as a deployment's do.
 */
export const DAEMON_NODE_OPTIONS = ['--max-semi-space-size=4'];

/**
 * A port free on 127.0.0.1 now, from 10000–19999: below Linux's ephemeral range (32768 up), so
 * that no outgoing connection or `listen(0)` takes it before the daemon binds it, and apart from
 * the Ceph clusters' blocks (20000–31999, ceph.ts). Tests' own picks may still meet: a daemon
 * that finds its port taken is started again (`TestDaemon.start`).
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = 10000 + Math.floor(Math.random() * 10000);
    if (await portFree(port)) return port;
  }
  throw new Error('no free port found in 10000–19999 on 127.0.0.1');
}

/** Whether `port` can be listened on at 127.0.0.1 now. */
export function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

export interface Teardown {
  teardown(fn: () => unknown): void;
}

export interface HttpResult {
  status: number;
  headers: Headers;
  text: string;
  /** The parsed JSON body, or undefined when the body is not JSON. */
  json: any;
}

export interface RequestOptions {
  token?: string | null | undefined;
  json?: unknown;
  form?: Record<string, string>;
  body?: string | Uint8Array;
  headers?: Record<string, string>;
}

export interface StartOptions {
  /** Reuse a data directory (restart after a crash). */
  dataDir?: string;
  /** Merged into the generated config file. */
  config?: Record<string, unknown>;
  env?: Record<string, string>;
  /** Keep the data directory after the test (e.g. to restart on it). */
  keepDataDir?: boolean;
  /**
   * Run the daemon (and `cli()`) as this user and group instead of the test's own, e.g. so that
   * file permissions bind it when the tests run as root. A new data directory is given to them.
   * That user must be able to read the checkout; `boundByPermissions` works wherever it lives.
   */
  uid?: number;
  gid?: number;
  /**
   * Run the daemon (and `cli()`) so that file permissions bind it even when the tests run as
   * root (test/helpers/unprivileged.ts). A new data directory is given to it.
   */
  boundByPermissions?: boolean;
}

export class TestDaemon {
  private exited: Promise<number | null>;
  output = '';

  private constructor(
    readonly proc: ChildProcess,
    readonly dataDir: string,
    readonly httpPort: number,
    readonly rsyncPort: number,
    readonly env: NodeJS.ProcessEnv,
    private readonly identity: { uid?: number; gid?: number } = {},
    private readonly bound = false,
  ) {
    this.exited = new Promise((ok) => proc.once('exit', (code) => ok(code)));
    proc.stdout?.on('data', (d: Buffer) => (this.output += d.toString()));
    proc.stderr?.on('data', (d: Buffer) => (this.output += d.toString()));
  }

  static async start(t: Teardown, options: StartOptions = {}): Promise<TestDaemon> {
    const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'preservd-test-'));
    const identity = {
      ...(options.uid !== undefined ? { uid: options.uid } : {}),
      ...(options.gid !== undefined ? { gid: options.gid } : {}),
    };
    if (options.dataDir === undefined && (options.uid !== undefined || options.gid !== undefined))
      chownSync(dataDir, options.uid ?? -1, options.gid ?? -1);
    const bound = options.boundByPermissions === true;
    if (options.dataDir === undefined && bound && process.getuid?.() === 0)
      chownSync(dataDir, checkoutOwner().uid, checkoutOwner().gid);
    const configPath = join(dataDir, '..', `${dataDir.split('/').pop()}-config.json`);
    const config = { upload: { quietMs: 200 }, logLevel: 'warn', ...options.config };
    writeFileSync(configPath, JSON.stringify(config));
    let current: TestDaemon | undefined;
    t.teardown(async () => {
      await current?.stop();
      rmSync(configPath, { force: true }); // read at start-up only; a later start writes its own
      if (options.keepDataDir !== true) rmSync(dataDir, { recursive: true, force: true });
    });
    // A port found free may be taken by another test's process before the daemon binds it: then
    // the daemon stops at once (EADDRINUSE from the HTTP server, "rsync port … is already in use"
    // from the rsync listener) and is started again on other ports.
    for (let attempt = 1; ; attempt++) {
      const httpPort = await freePort();
      const rsyncPort = await freePort();
      const env = {
        ...process.env,
        PRESERVD_CONFIG: configPath,
        PRESERVD_DATA_DIR: dataDir,
        PRESERVD_HTTP_PORT: String(httpPort),
        PRESERVD_RSYNC_PORT: String(rsyncPort),
        ...options.env,
      };
      const [command, args] = TestDaemon.command([...DAEMON_NODE_OPTIONS, cliPath, 'serve'], bound);
      const proc = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'], ...identity });
      current = new TestDaemon(proc, dataDir, httpPort, rsyncPort, env, identity, bound);
      try {
        await current.waitUntilServing();
        return current;
      } catch (err) {
        if (attempt < 3 && proc.exitCode !== null && /EADDRINUSE|already in use/.test(current.output))
          continue;
        throw err;
      }
    }
  }

  /** node with `args`, bound by file permissions when asked. */
  private static command(args: string[], bound: boolean): [string, string[]] {
    return bound ? boundByPermissions(node(args).flat()) : node(args);
  }

  get url(): string {
    return `http://127.0.0.1:${this.httpPort}`;
  }

  get adminToken(): string {
    return readFileSync(join(this.dataDir, 'admin.token'), 'utf8').trim();
  }

  private async waitUntilServing(): Promise<void> {
    // A start takes about a second on a quiet machine; far longer when every core is busy.
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      if (this.proc.exitCode !== null)
        throw new Error(`the daemon exited with ${this.proc.exitCode}:\n${this.output}`);
      try {
        const res = await fetch(`${this.url}/v1/openapi.json`);
        if (res.ok) return;
      } catch {
        // not listening yet
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`the daemon did not start within 60 s:\n${this.output}`);
  }

  /** An HTTP request as the admin unless `token` says otherwise (null: no Authorization). */
  async request(method: string, path: string, options: RequestOptions = {}): Promise<HttpResult> {
    const headers: Record<string, string> = { ...options.headers };
    const token = options.token === undefined ? this.adminToken : options.token;
    if (token !== null && headers.authorization === undefined) headers.authorization = `Bearer ${token}`;
    let body: string | Uint8Array | undefined = options.body;
    if (options.json !== undefined) {
      body = JSON.stringify(options.json);
      headers['content-type'] ??= 'application/json';
    } else if (options.form !== undefined) {
      body = new URLSearchParams(options.form).toString();
      headers['content-type'] ??= 'application/x-www-form-urlencoded';
    }
    const res = await fetch(`${this.url}${path}`, {
      method,
      headers,
      body: (body as BodyInit | undefined) ?? null,
      redirect: 'manual',
    });
    const text = await res.text();
    let json: unknown;
    try {
      json = text === '' ? undefined : JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: res.status, headers: res.headers, text, json };
  }

  /** Runs `preservd ARGS` against this daemon's data directory and configuration. */
  cli(
    args: string[],
    extraEnv: Record<string, string> = {},
  ): { code: number; stdout: string; stderr: string } {
    const [command, argv] = TestDaemon.command([cliPath, ...args], this.bound);
    const r = spawnSync(command, argv, {
      env: { ...this.env, ...extraEnv },
      encoding: 'utf8',
      timeout: 120_000,
      ...this.identity,
    });
    return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
  }

  /** Creates a user with the CLI and returns its token (the last line of stdout). */
  addUser(name: string, admin = false): string {
    const r = this.cli(['user', 'add', name, ...(admin ? ['--admin'] : [])]);
    if (r.code !== 0) throw new Error(`user add failed: ${r.stderr}`);
    return r.stdout.trim().split('\n').at(-1)!;
  }

  /** Creates a request as `token` and returns its JSON. */
  async createRequest(
    token: string,
    fields: { bag_id: string; external_id: string; content_type?: string },
  ): Promise<any> {
    const res = await this.request('POST', '/v1/requests', {
      token,
      json: { content_type: 'digital', ...fields },
    });
    if (res.status !== 201) throw new Error(`create failed: ${res.status} ${res.text}`);
    return res.json;
  }

  /** Polls a queue item until it is no longer PENDING. */
  async waitForQueueItem(id: number, token?: string, timeoutMs = 60_000): Promise<any> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const res = await this.request('GET', `/v1/queue/${id}`, { token });
      if (res.status !== 200) throw new Error(`queue item ${id}: ${res.status} ${res.text}`);
      if (res.json.status !== 'PENDING') return res.json;
      if (Date.now() > deadline)
        throw new Error(`queue item ${id} still PENDING after ${timeoutMs} ms\n${this.output}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** Polls GET /v1/audits/{id} until `until` holds of it: by default, until every package was checked. */
  async waitForAudit(
    id: number,
    until: (audit: any) => boolean = (a) => a.successes.length + a.failures.length === a.packages,
    timeoutMs = 30_000,
  ): Promise<any> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const res = await this.request('GET', `/v1/audits/${id}`);
      if (res.status !== 200) throw new Error(`GET /v1/audits/${id}: ${res.status} ${res.text}`);
      if (until(res.json)) return res.json;
      if (Date.now() > deadline)
        throw new Error(`audit ${id} did not get there within ${timeoutMs} ms: ${res.text}\n${this.output}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** SIGTERM and wait; SIGKILL if it does not stop within 15 s. */
  async stop(): Promise<number | null> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return this.proc.exitCode;
    this.proc.kill('SIGTERM');
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), 15_000);
    const code = await this.exited;
    clearTimeout(timer);
    return code;
  }

  /** Resolves with the exit code (null when killed by a signal). */
  waitForExit(): Promise<number | null> {
    return this.exited;
  }

  /** Whether the daemon exits within `ms` (e.g. killed itself at a failpoint). */
  async exitsWithin(ms: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const alive = new Promise<false>((ok) => (timer = setTimeout(() => ok(false), ms)));
    const exited = await Promise.race([this.exited.then(() => true as const), alive]);
    clearTimeout(timer);
    return exited;
  }

  /**
   * kill -9: no chance to clean up. Its rsyncs (each in a process group of its own) are killed
   * too, as systemd would kill the whole cgroup.
   */
  async kill9(): Promise<void> {
    const pids = spawnSync('pgrep', ['-P', String(this.proc.pid)], { encoding: 'utf8' })
      .stdout.split('\n')
      .filter(Boolean);
    this.proc.kill('SIGKILL');
    for (const pid of pids) {
      for (const target of [-Number(pid), Number(pid)]) {
        try {
          process.kill(target, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    }
    await this.exited;
  }
}

/** chipmunk-client's rsync options. */
const CHIPMUNK_RSYNC_OPTIONS = ['-rtvzP', '--delete', '--no-group', '--no-perms', '--chmod=ugo=rwX'];

/** Uploads a bag folder the way chipmunk-client does. */
export function rsyncUpload(bagDir: string, link: string): { code: number; output: string } {
  assertLink(link);
  const r = spawnSync('rsync', [...CHIPMUNK_RSYNC_OPTIONS, `${bagDir}/`, link], {
    encoding: 'utf8',
    timeout: 120_000,
  });
  return { code: r.status ?? -1, output: `${r.stdout}${r.stderr}` };
}

/**
 * `rsyncUpload` without blocking the event loop, for tests that keep many uploads and HTTP
 * clients going at once (same arguments, same 120 s limit).
 */
export function rsyncUploadAsync(bagDir: string, link: string): Promise<{ code: number; output: string }> {
  assertLink(link);
  return new Promise((ok) => {
    const child = spawn('rsync', [...CHIPMUNK_RSYNC_OPTIONS, `${bagDir}/`, link], {
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 120_000,
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.once('error', (err) => ok({ code: -1, output: `${output}${err.message}` }));
    child.once('close', (code) => ok({ code: code ?? -1, output }));
  });
}

/** A `null` upload_link (a viewer's, a stored package's) would make rsync copy into a local folder named "null". */
function assertLink(link: unknown): asserts link is string {
  if (typeof link !== 'string' || !link.includes(':'))
    throw new Error(`not an upload link: ${JSON.stringify(link)}`);
}
