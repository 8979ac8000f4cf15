/**
 * The configuration: embedded defaults, an optional JSON file (`PRESERVD_CONFIG`), then
 * environment overrides (CLI.md). Checked once at load; every problem is reported together with
 * the key it concerns, so an operator fixes the file in one go.
 */
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { dirname, isAbsolute, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkReplicas, withReplicaDefaults, type ReplicaConfig } from './replicas.js';

export interface ContentTypeConfig {
  /** A chipmunk bag-info profile (JSON), absolute or relative to the config file. */
  profile?: string;
  /** An argument vector run without a shell; `{external_id}` and `{bag}` are replaced. */
  validator?: string[];
  timeoutMs?: number;
}

export interface Config {
  dataDir: string;
  http: {
    host: string;
    port: number;
    /** Largest accepted request body, in bytes. */
    bodyLimit: number;
    /** Seconds a graceful shutdown waits for in-flight responses before closing them. */
    shutdownGraceSeconds: number;
    /** Longest a client may take to send a whole request (headers and body); slower ones get 408. */
    requestTimeoutMs: number;
    /**
     * Mark the pages' cookies `Secure` always. When false they are `Secure` on requests a trusted
     * proxy says arrived over https (`X-Forwarded-Proto`).
     */
    secureCookies: boolean;
    /**
     * Addresses or CIDR ranges of the proxies in front (e.g. `["127.0.0.1"]`). Only their
     * `X-Forwarded-For`, `X-Forwarded-Proto` and `X-Request-Id` are believed.
     */
    trustedProxies: string[];
  };
  auth: {
    /** chipmunk's rule: creating a request needs `content_manager` or `admin` on its content type. */
    requireGrants: boolean;
    /** Hours a browser session lasts after login. */
    sessionHours: number;
    /** Minutes a browser session may go unused before it is refused; 0: no idle limit. */
    sessionIdleMinutes: number;
    /** Browser sessions one user may hold at once; a login beyond it ends their oldest. */
    maxSessionsPerUser: number;
    /** Wrong tokens (API or login form) one address may send per window before it gets 429; 0: no limit. */
    maxFailedAttempts: number;
    failedAttemptsWindowSeconds: number;
  };
  upload: {
    rsync: {
      /** Run our own rsync daemon. When false, uploads arrive by `linkTemplate` (e.g. ssh). */
      enabled: boolean;
      host: string;
      port: number;
      module: string;
      binary: string;
      /** Host name put in upload links; defaults to `host`. */
      advertisedHost?: string;
      maxConnections: number;
    };
    /** Upload link when rsync is not ours, e.g. `preservd@repo.example.org:landing/{capability}/`. */
    linkTemplate?: string;
    /** An upload is quiet, and may be ingested, after this long without writes. */
    quietMs: number;
    /**
     * Longest an ingest waits (holding no slot) for a completed upload to become quiet; then the
     * item fails with `upload-still-writing` and the link opens again.
     */
    quietTimeoutMs: number;
    /** Open (not stored) requests a user may hold at once; 0: no limit. */
    openRequestsPerUser: number;
  };
  ingest: {
    /** Bags ingested at once. */
    concurrency: number;
    /**
     * Files of at least this many bytes are hashed resumably (checkpoints in the catalog, so a
     * restart goes on where it was); 0: none. hash-wasm is 2–5× slower than node:crypto here.
     */
    resumeAboveBytes: number;
  };
  fixity: {
    workers: number;
    readSize: number;
    maxOpenFiles: number;
  };
  audit: {
    /** `strongest`: verify the strongest recorded digest of each file; `all`: every one. */
    algorithms: 'strongest' | 'all';
    /** Read rate limit for audits in MB/s; 0 means unlimited. */
    rateLimitMBps: number;
    /** Packages verified at once. */
    concurrency: number;
    /** When set, a summary of each finished audit is POSTed here as JSON. */
    webhookUrl?: string;
    /** `auto`: a damaged or missing copy found by an audit is restored from a good one; `off`: reported only. */
    repair: 'off' | 'auto';
    /**
     * Continuous audits: every stored package verified at least once in this many days, a
     * steady share each day, the least recently verified first. Unset: only full audits.
     */
    everyDays?: number;
  };
  /** Copies kept besides the primary (replicas.ts). */
  replicas: ReplicaConfig[];
  download: {
    /** Hand file bodies to a front proxy instead of streaming them ourselves. */
    offload?: { header: 'X-Sendfile' | 'X-Accel-Redirect'; prefix?: string };
  };
  metrics: {
    /** `loopback`: /metrics answers loopback clients without a token; `admin`: admins only. */
    access: 'loopback' | 'admin' | 'off';
  };
  contentTypes: Record<string, ContentTypeConfig>;
  logLevel: string;
  /** `auto`: readable on a terminal, JSON lines otherwise; `json`; `pretty`. */
  logFormat: 'auto' | 'json' | 'pretty';
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  ${problems.join('\n  ')}`);
    this.name = 'ConfigError';
  }
}

/** The package's own folder (two levels above dist/src/config or src/config). */
const packageRoot = (() => {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 4; i++) {
    try {
      readFileSync(resolve(dir, 'package.json'));
      return dir;
    } catch {
      dir = dirname(dir);
    }
  }
  return process.cwd();
})();

export function defaults(): Config {
  return {
    dataDir: './var',
    http: { host: '127.0.0.1', port: 8080, bodyLimit: 64 * 1024, shutdownGraceSeconds: 10, requestTimeoutMs: 30_000, secureCookies: false, trustedProxies: [] },
    auth: { requireGrants: false, sessionHours: 12, sessionIdleMinutes: 60, maxSessionsPerUser: 20, maxFailedAttempts: 30, failedAttemptsWindowSeconds: 60 },
    upload: {
      rsync: { enabled: true, host: '127.0.0.1', port: 8873, module: 'preservd', binary: 'rsync', maxConnections: 20 },
      quietMs: 2000,
      quietTimeoutMs: 600_000,
      openRequestsPerUser: 1000,
    },
    ingest: { concurrency: 2, resumeAboveBytes: 1024 ** 3 },
    fixity: { workers: availableParallelism(), readSize: 1024 * 1024, maxOpenFiles: 64 },
    audit: { algorithms: 'strongest', rateLimitMBps: 0, concurrency: 4, repair: 'off' },
    replicas: [],
    download: {},
    metrics: { access: 'loopback' },
    contentTypes: { audio: {}, bentleyaudio: {}, video: {}, digital: {}, video_game: {} },
    logLevel: 'info',
    logFormat: 'auto',
  };
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

function isObject(v: unknown): v is Record<string, Json> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Deep merge of plain objects; arrays and scalars from `over` replace those of `base`. */
function merge(base: Record<string, unknown>, over: Record<string, Json>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(over)) {
    const current = out[key];
    out[key] = isObject(current) && isObject(value) && key !== 'contentTypes' ? merge(current, value) : value;
  }
  return out;
}

const ENV: Array<[string, string[], 'string' | 'port']> = [
  ['PRESERVD_DATA_DIR', ['dataDir'], 'string'],
  ['PRESERVD_HTTP_HOST', ['http', 'host'], 'string'],
  ['PRESERVD_HTTP_PORT', ['http', 'port'], 'port'],
  ['PRESERVD_RSYNC_PORT', ['upload', 'rsync', 'port'], 'port'],
  ['PRESERVD_LOG_LEVEL', ['logLevel'], 'string'],
  ['PRESERVD_LOG_FORMAT', ['logFormat'], 'string'],
];

/**
 * Loads the configuration. `env` and `file` are parameters so tests need not touch the process.
 * Relative paths (dataDir, profiles) are resolved against the working directory for dataDir
 * (so `npm start` keeps everything under ./var) and against the config file for profiles.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): Config {
  const problems: string[] = [];
  const file = env.PRESERVD_CONFIG ?? resolve(packageRoot, 'config/default.json');
  let fromFile: Record<string, Json> = {};
  try {
    const parsed: unknown = JSON.parse(readFileSync(file, 'utf8'));
    if (!isObject(parsed)) problems.push(`${file}: the configuration must be a JSON object`);
    else fromFile = parsed;
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code === 'ENOENT' && env.PRESERVD_CONFIG === undefined) fromFile = {};
    else problems.push(`${file}: ${e.code === 'ENOENT' ? 'no such file' : e.message}`);
  }
  const merged = merge(defaults() as unknown as Record<string, unknown>, fromFile);
  for (const [name, path, kind] of ENV) {
    const raw = env[name];
    if (raw === undefined || raw === '') continue;
    let target = merged;
    for (const key of path.slice(0, -1)) target = target[key] as Record<string, unknown>;
    if (kind === 'port') {
      const n = Number(raw);
      if (!Number.isInteger(n) || n < 0 || n > 65535) problems.push(`${name}: "${raw}" is not a port number`);
      else target[path.at(-1)!] = n;
    } else target[path.at(-1)!] = raw;
  }
  merged.replicas = withReplicaDefaults(merged.replicas);
  const config = merged as unknown as Config;
  problems.push(...checkConfig(config));
  if (problems.length > 0) throw new ConfigError(problems);
  config.dataDir = resolve(cwd, config.dataDir);
  for (const replica of config.replicas) if (replica.kind === 'dir') replica.path = resolve(cwd, replica.path);
  const configDir = dirname(file);
  for (const rules of Object.values(config.contentTypes)) {
    if (rules.profile !== undefined && !isAbsolute(rules.profile)) {
      const besideConfig = resolve(configDir, rules.profile);
      rules.profile = besideConfig;
    }
  }
  return config;
}

/** Every problem with a merged configuration, each naming its key. */
function checkConfig(c: Config): string[] {
  const p: string[] = [];
  const str = (v: unknown, key: string) => {
    if (typeof v !== 'string' || v === '') p.push(`${key}: must be a non-empty string`);
  };
  const int = (v: unknown, key: string, min: number, max = Number.MAX_SAFE_INTEGER) => {
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) p.push(`${key}: must be an integer from ${min} to ${max}`);
  };
  const num = (v: unknown, key: string, min: number) => {
    if (typeof v !== 'number' || !Number.isFinite(v) || v < min) p.push(`${key}: must be a number ≥ ${min}`);
  };
  str(c.dataDir, 'dataDir');
  if (!isObject(c.http)) p.push('http: must be an object');
  else {
    str(c.http.host, 'http.host');
    int(c.http.port, 'http.port', 0, 65535);
    int(c.http.bodyLimit, 'http.bodyLimit', 1024);
    num(c.http.shutdownGraceSeconds, 'http.shutdownGraceSeconds', 0);
    int(c.http.requestTimeoutMs, 'http.requestTimeoutMs', 100);
    if (typeof c.http.secureCookies !== 'boolean') p.push('http.secureCookies: must be true or false');
    if (!Array.isArray(c.http.trustedProxies) || !c.http.trustedProxies.every((a) => typeof a === 'string' && a !== ''))
      p.push('http.trustedProxies: must be an array of addresses or CIDR ranges');
  }
  if (!isObject(c.auth)) p.push('auth: must be an object');
  else {
    if (typeof c.auth.requireGrants !== 'boolean') p.push('auth.requireGrants: must be true or false');
    num(c.auth.sessionHours, 'auth.sessionHours', 0.0001);
    num(c.auth.sessionIdleMinutes, 'auth.sessionIdleMinutes', 0);
    int(c.auth.maxSessionsPerUser, 'auth.maxSessionsPerUser', 1, 10_000);
    int(c.auth.maxFailedAttempts, 'auth.maxFailedAttempts', 0);
    int(c.auth.failedAttemptsWindowSeconds, 'auth.failedAttemptsWindowSeconds', 1, 86_400);
  }
  if (!isObject(c.upload) || !isObject(c.upload.rsync)) p.push('upload.rsync: must be an object');
  else {
    const r = c.upload.rsync;
    if (typeof r.enabled !== 'boolean') p.push('upload.rsync.enabled: must be true or false');
    str(r.host, 'upload.rsync.host');
    int(r.port, 'upload.rsync.port', 1, 65535); // the upload link names it: no ephemeral port
    if (typeof r.module !== 'string' || !/^[A-Za-z0-9_-]+$/.test(r.module)) p.push('upload.rsync.module: letters, digits, _ and - only');
    str(r.binary, 'upload.rsync.binary');
    if (r.advertisedHost !== undefined) str(r.advertisedHost, 'upload.rsync.advertisedHost');
    int(r.maxConnections, 'upload.rsync.maxConnections', 1);
    if (c.upload.linkTemplate !== undefined && (typeof c.upload.linkTemplate !== 'string' || !c.upload.linkTemplate.includes('{capability}')))
      p.push('upload.linkTemplate: must be a string containing {capability}');
    if (!r.enabled && c.upload.linkTemplate === undefined) p.push('upload.linkTemplate: required when upload.rsync.enabled is false');
    int(c.upload.quietMs, 'upload.quietMs', 0);
    int(c.upload.quietTimeoutMs, 'upload.quietTimeoutMs', 1000);
    int(c.upload.openRequestsPerUser, 'upload.openRequestsPerUser', 0);
  }
  if (!isObject(c.ingest)) p.push('ingest: must be an object');
  else {
    int(c.ingest.concurrency, 'ingest.concurrency', 1, 64);
    int(c.ingest.resumeAboveBytes, 'ingest.resumeAboveBytes', 0);
  }
  if (!isObject(c.fixity)) p.push('fixity: must be an object');
  else {
    int(c.fixity.workers, 'fixity.workers', 1, 256);
    int(c.fixity.readSize, 'fixity.readSize', 64 * 1024, 64 * 1024 * 1024);
    int(c.fixity.maxOpenFiles, 'fixity.maxOpenFiles', 1, 4096);
  }
  if (!isObject(c.audit)) p.push('audit: must be an object');
  else {
    if (c.audit.algorithms !== 'strongest' && c.audit.algorithms !== 'all') p.push('audit.algorithms: must be "strongest" or "all"');
    num(c.audit.rateLimitMBps, 'audit.rateLimitMBps', 0);
    int(c.audit.concurrency, 'audit.concurrency', 1, 64);
    if (c.audit.repair !== 'off' && c.audit.repair !== 'auto') p.push('audit.repair: must be "off" or "auto"');
    if (c.audit.everyDays !== undefined) int(c.audit.everyDays, 'audit.everyDays', 1, 3650);
    if (c.audit.webhookUrl !== undefined) {
      try {
        const u = new URL(c.audit.webhookUrl);
        if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error();
      } catch {
        p.push('audit.webhookUrl: must be an http(s) URL');
      }
    }
  }
  const offload = isObject(c.download) ? c.download.offload : undefined;
  if (offload !== undefined && (!isObject(offload) || (offload.header !== 'X-Sendfile' && offload.header !== 'X-Accel-Redirect')))
    p.push('download.offload.header: must be "X-Sendfile" or "X-Accel-Redirect"');
  if (!isObject(c.metrics) || !['loopback', 'admin', 'off'].includes(c.metrics.access))
    p.push('metrics.access: must be "loopback", "admin" or "off"');
  if (!isObject(c.contentTypes) || Object.keys(c.contentTypes).length === 0) p.push('contentTypes: must name at least one content type');
  else {
    for (const [name, rules] of Object.entries(c.contentTypes)) {
      const key = `contentTypes.${name}`;
      if (!isObject(rules)) {
        p.push(`${key}: must be an object`);
        continue;
      }
      if (rules.profile !== undefined) str(rules.profile, `${key}.profile`);
      if (rules.validator !== undefined && (!Array.isArray(rules.validator) || rules.validator.length === 0 || !rules.validator.every((a) => typeof a === 'string')))
        p.push(`${key}.validator: must be a non-empty array of strings (an argument vector)`);
      if (rules.timeoutMs !== undefined) int(rules.timeoutMs, `${key}.timeoutMs`, 1);
    }
  }
  p.push(...checkReplicas(c.replicas));
  str(c.logLevel, 'logLevel');
  if (!['auto', 'json', 'pretty'].includes(c.logFormat)) p.push('logFormat: must be "auto", "json" or "pretty"');
  return p;
}
