/**
 * The configuration's one description (CLI.md, docs/configuration.md): each key's type, limits
 * and default. ajv checks a loaded file against it and fills in the defaults (check.ts), `Config`
 * is derived from it, and test/docs/codes.test.ts walks it to find every key in the docs.
 * `problem` says what is wrong in words where the limits alone would not (check.ts).
 */
import { availableParallelism } from 'node:os';
import { Type, type Static } from '@sinclair/typebox';
import { NonEmpty, StringEnum } from '../json-schema.js';
import { ReplicasSchema } from './replicas.js';

const Port = (min: number, defaultPort: number) =>
  Type.Integer({ minimum: min, maximum: 65535, default: defaultPort });
/** A section of the configuration: absent, it is all defaults. */
const Section = <T extends Parameters<typeof Type.Object>[0]>(properties: T) =>
  Type.Object(properties, { default: {} });

const ContentTypeSchema = Type.Object({
  /** A chipmunk bag-info profile (JSON), absolute or relative to the config file. */
  profile: Type.Optional(NonEmpty()),
  /** An argument vector run without a shell; `{external_id}` and `{bag}` are replaced. */
  validator: Type.Optional(
    Type.Array(Type.String(), {
      minItems: 1,
      problem: 'must be a non-empty array of strings (an argument vector)',
    }),
  ),
  timeoutMs: Type.Optional(Type.Integer({ minimum: 1 })),
});

export const ConfigSchema = Type.Object({
  dataDir: NonEmpty({ default: './var' }),
  http: Section({
    host: NonEmpty({ default: '127.0.0.1' }),
    port: Port(0, 8080),
    /** Largest accepted request body, in bytes. */
    bodyLimit: Type.Integer({ minimum: 1024, default: 64 * 1024 }),
    /** Seconds a graceful shutdown waits for in-flight responses before closing them. */
    shutdownGraceSeconds: Type.Number({ minimum: 0, default: 10 }),
    /** Longest a client may take to send a whole request (headers and body); slower ones get 408. */
    requestTimeoutMs: Type.Integer({ minimum: 100, default: 30_000 }),
    /**
     * Mark the pages' cookies `Secure` always. When false they are `Secure` on requests a trusted
     * proxy says arrived over https (`X-Forwarded-Proto`).
     */
    secureCookies: Type.Boolean({ default: false }),
    /**
     * Addresses or CIDR ranges of the proxies in front (e.g. `["127.0.0.1"]`). Only their
     * `X-Forwarded-For`, `X-Forwarded-Proto` and `X-Request-Id` are believed.
     */
    trustedProxies: Type.Array(NonEmpty(), {
      default: [],
      problem: 'must be an array of addresses or CIDR ranges',
    }),
  }),
  auth: Section({
    /** chipmunk's rule: creating a request needs `content_manager` or `admin` on its content type. */
    requireGrants: Type.Boolean({ default: false }),
    /** Hours a browser session lasts after login. */
    sessionHours: Type.Number({ minimum: 0.0001, default: 12 }),
    /** Minutes a browser session may go unused before it is refused; 0: no idle limit. */
    sessionIdleMinutes: Type.Number({ minimum: 0, default: 60 }),
    /** Browser sessions one user may hold at once; a login beyond it ends their oldest. */
    maxSessionsPerUser: Type.Integer({ minimum: 1, maximum: 10_000, default: 20 }),
    /** Wrong tokens (API or login form) one address may send per window before it gets 429; 0: no limit. */
    maxFailedAttempts: Type.Integer({ minimum: 0, default: 30 }),
    failedAttemptsWindowSeconds: Type.Integer({ minimum: 1, maximum: 86_400, default: 60 }),
  }),
  upload: Section({
    rsync: Section({
      /** Run our own rsync daemon. When false, uploads arrive by `linkTemplate` (e.g. ssh). */
      enabled: Type.Boolean({ default: true }),
      host: NonEmpty({ default: '127.0.0.1' }),
      port: Port(1, 8873), // the upload link names it: no ephemeral port
      module: Type.String({
        pattern: '^[A-Za-z0-9_-]+$',
        default: 'preservd',
        problem: 'letters, digits, _ and - only',
      }),
      binary: NonEmpty({ default: 'rsync' }),
      /** Host name put in upload links; defaults to `host`. */
      advertisedHost: Type.Optional(NonEmpty()),
      maxConnections: Type.Integer({ minimum: 1, default: 20 }),
      hashOnArrival: Type.Boolean({ default: true }),
    }),
    /** Upload link when rsync is not ours, e.g. `preservd@repo.example.org:landing/{capability}/`. */
    linkTemplate: Type.Optional(
      Type.String({ pattern: '\\{capability\\}', problem: 'must be a string containing {capability}' }),
    ),
    /** An upload is quiet, and may be ingested, after this long without writes. */
    quietMs: Type.Integer({ minimum: 0, default: 2000 }),
    /**
     * Longest an ingest waits (holding no slot) for a completed upload to become quiet; then the
     * item fails with `upload-still-writing` and the upload is handed back under a new link.
     */
    quietTimeoutMs: Type.Integer({ minimum: 1000, default: 600_000 }),
    /** Open (not stored) requests a user may hold at once; 0: no limit. */
    openRequestsPerUser: Type.Integer({ minimum: 0, default: 1000 }),
  }),
  ingest: Section({
    /** Bags ingested at once. */
    concurrency: Type.Integer({ minimum: 1, maximum: 64, default: 2 }),
    /**
     * Files of at least this many bytes are hashed resumably (checkpoints in the catalog, so a
     * restart goes on where it was); 0: none. hash-wasm is 2–5× slower than node:crypto here.
     */
    resumeAboveBytes: Type.Integer({ minimum: 0, default: 1024 ** 3 }),
  }),
  fixity: Section({
    workers: Type.Integer({ minimum: 1, maximum: 256, default: availableParallelism() }),
    readSize: Type.Integer({ minimum: 64 * 1024, maximum: 64 * 1024 * 1024, default: 1024 * 1024 }),
    maxOpenFiles: Type.Integer({ minimum: 1, maximum: 4096, default: 64 }),
  }),
  audit: Section({
    /** `strongest`: verify the strongest recorded digest of each file; `all`: every one. */
    algorithms: StringEnum(['strongest', 'all'], { default: 'strongest' }),
    /** Read rate limit for audits in MB/s; 0 means unlimited. */
    rateLimitMBps: Type.Number({ minimum: 0, default: 0 }),
    /** Packages verified at once. */
    concurrency: Type.Integer({ minimum: 1, maximum: 64, default: 4 }),
    /** When set, a summary of each finished audit is POSTed here as JSON. */
    webhookUrl: Type.Optional(Type.String({ format: 'http-url' })),
    /** `auto`: a damaged or missing copy found by an audit is restored from a good one; `off`: reported only. */
    repair: StringEnum(['off', 'auto'], { default: 'off' }),
    /**
     * Continuous audits: every stored package verified at least once in this many days, a
     * steady share each day, the least recently verified first. Unset: only full audits.
     */
    everyDays: Type.Optional(Type.Integer({ minimum: 1, maximum: 3650 })),
  }),
  storage: Section({
    /** Longest a change in the catalog waits before the preservd record in storage follows it. */
    recordDelayMs: Type.Integer({ minimum: 100, maximum: 3_600_000, default: 5000 }),
  }),
  /** Copies kept besides the primary (replicas.ts). */
  replicas: ReplicasSchema,
  download: Section({
    /** Hand file bodies to a front proxy instead of streaming them ourselves. */
    offload: Type.Optional(
      Type.Object({
        header: StringEnum(['X-Sendfile', 'X-Accel-Redirect']),
        prefix: Type.Optional(Type.String()),
      }),
    ),
  }),
  metrics: Section({
    /** `loopback`: /metrics answers loopback clients without a token; `admin`: admins only. */
    access: StringEnum(['loopback', 'admin', 'off'], { default: 'loopback' }),
  }),
  /** Replaced as a whole when given, never merged with the default map. */
  contentTypes: Type.Record(Type.String(), ContentTypeSchema, {
    minProperties: 1,
    default: { audio: {}, bentleyaudio: {}, video: {}, digital: {}, video_game: {} },
    problem: 'must name at least one content type',
  }),
  logLevel: NonEmpty({ default: 'info' }),
  /** `auto`: readable on a terminal, JSON lines otherwise; `json`; `pretty`. */
  logFormat: StringEnum(['auto', 'json', 'pretty'], { default: 'auto' }),
});

export type Config = Static<typeof ConfigSchema>;
export type ContentTypeConfig = Static<typeof ContentTypeSchema>;
