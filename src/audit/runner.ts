/**
 * The audit runner: works through the audit in progress, `config.audit.concurrency` packages at
 * a time, verifying each package (verify.ts) and recording ONE `fixity check` event per package
 * through `catalog.audits.record`, which also takes the package out of the audit's to-do set and
 * bumps the counts in the same transaction. A package is recorded only once its check finished
 * (checks finishing close together share one commit), so after a crash or a stop the audit
 * resumes with what is left and nothing is counted twice.
 *
 * It reads at the pool's 'audit' priority (ingest jobs go first) and at most at
 * `config.audit.rateLimitMBps`. When an audit finishes it logs one summary line and, if
 * `config.audit.webhookUrl` is set, POSTs one JSON summary there.
 *
 * It does not decide when audits happen (POST /v1/audits and the systemd timer do) and does not
 * serve HTTP.
 */
import type { Catalog } from '../catalog/catalog.js';
import type { Audit, PreservationEvent } from '../catalog/types.js';
import type { Config } from '../config/config.js';
import { failpoint } from '../failpoints.js';
import type { Storage } from '../storage/storage.js';
import { findingsDetail, verifyPackage, type Finding, type PackageHasher } from './verify.js';
import type { Logger } from '../logger.js';

/** What the runner needs from the fixity pool (FixityPool satisfies it). */
export interface AuditHasher extends PackageHasher {
  setAuditRateLimit(bytesPerSec: number): void;
}

export interface AuditRunnerOptions {
  catalog: Catalog;
  storage: Storage;
  hasher: AuditHasher;
  config: Pick<Config, 'audit'>;
  logger: Logger;
  /** Told after each package is recorded (metrics). */
  onChecked?: (checked: PackageChecked) => void;
  /** Webhook delivery: per-attempt timeout (default 10 s) and the delays before retries (default 2 s, 10 s). */
  webhook?: { timeoutMs?: number; retryDelaysMs?: number[] };
}

export interface PackageChecked {
  auditId: number;
  bagId: string;
  outcome: 'success' | 'failure';
  bytes: number;
  findings: Finding[];
}

export interface AuditProgress {
  auditId: number;
  packages: number;
  /** Packages recorded (successes + failures). */
  done: number;
  /** Bytes verified: recorded packages plus files already read in packages being checked. */
  bytes: number;
  totalBytes: number;
  /** Read rate over the last half minute or so; 0 until there is something to measure. */
  rateBytesPerSec: number;
  /** null while the rate is unknown. */
  etaSeconds: number | null;
}

/** The JSON POSTed to `config.audit.webhookUrl` when an audit finishes. */
export interface AuditWebhookPayload {
  audit: {
    id: number;
    user: string;
    packages: number;
    successes: number;
    failures: number;
    started_at: string;
    finished_at: string;
    bytes: number;
  };
  failures: Array<{ bag_id: string; external_id: string | null; detail: string | null }>;
}

const WEBHOOK_TIMEOUT_MS = 10_000;
/** Delays before the 2nd and 3rd delivery attempts; then the summary is given up (and logged). */
const WEBHOOK_RETRY_DELAYS_MS = [2_000, 10_000];
const RATE_WINDOW_MS = 30_000;
/**
 * Results that finish within this window are recorded in one catalog transaction: each commit
 * is an fsync on the event-loop thread (~1–2 ms here), which otherwise starves the pool of jobs
 * when packages are small. Each package's event, count and to-do removal stay atomic; a crash
 * loses at most this window's checks, which are simply done again.
 */
const RECORD_BATCH_MS = 50;
/** After the hasher or catalog failed mid-audit, the runner looks again this much later. */
const RETRY_AFTER_FAILURE_MS = 60_000;

export class AuditRunner {
  private readonly catalog: Catalog;
  private readonly storage: Storage;
  private readonly hasher: AuditHasher;
  private readonly config: Pick<Config, 'audit'>;
  private readonly logger: Logger;
  private readonly onChecked: ((checked: PackageChecked) => void) | undefined;
  private readonly webhookTimeoutMs: number;
  private readonly webhookRetryDelaysMs: readonly number[];

  private running = false;
  private loop: Promise<void> | undefined;
  private wakeAgain = false;
  private abort = new AbortController();
  private readonly deliveries = new Set<Promise<void>>();

  /** The audit being worked on and what this process has seen of it. */
  private current: Audit | undefined;
  /** Bytes read in packages not yet recorded, per bag. */
  private readonly partial = new Map<string, number>();
  /** (time, bytes verified) samples for the rate. */
  private samples: Array<[number, number]> = [];
  /** Checks finished but not yet recorded (see RECORD_BATCH_MS). */
  private unrecorded: PackageChecked[] = [];
  private recordTimer: NodeJS.Timeout | undefined;
  /** Set when recording failed: the audit pauses. */
  private recordFailure: { reason: unknown } | undefined;

  constructor(opts: AuditRunnerOptions) {
    this.catalog = opts.catalog;
    this.storage = opts.storage;
    this.hasher = opts.hasher;
    this.config = opts.config;
    this.logger = opts.logger;
    this.onChecked = opts.onChecked;
    this.webhookTimeoutMs = opts.webhook?.timeoutMs ?? WEBHOOK_TIMEOUT_MS;
    this.webhookRetryDelaysMs = opts.webhook?.retryDelaysMs ?? WEBHOOK_RETRY_DELAYS_MS;
  }

  /** Starts working; an audit left in progress by an earlier run resumes where it was. */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.abort = new AbortController();
    this.hasher.setAuditRateLimit(Math.max(0, this.config.audit.rateLimitMBps) * 1e6);
    this.wake();
  }

  /** Looks for work now (after POST /v1/audits created an audit). */
  wake(): void {
    if (!this.running) return;
    if (this.loop !== undefined) {
      this.wakeAgain = true;
      return;
    }
    this.loop = this.work().finally(() => {
      this.loop = undefined;
      if (this.running && this.wakeAgain) this.wake();
    });
  }

  /**
   * Stops: checks in flight are aborted and their packages stay in the to-do set for the next
   * start. Resolves once nothing runs; a webhook delivery under way gets its current attempt
   * (at most 10 s) but no retries.
   */
  async stop(): Promise<void> {
    if (!this.running && this.loop === undefined) {
      await Promise.allSettled([...this.deliveries]);
      return;
    }
    this.running = false;
    this.abort.abort(new Error('the audit runner is stopping'));
    await this.loop;
    await Promise.allSettled([...this.deliveries]);
  }

  /** Resolves when the runner has nothing left to do (the audit in progress finished, or it stopped). */
  async idle(): Promise<void> {
    while (this.loop !== undefined) await this.loop;
    await Promise.allSettled([...this.deliveries]);
  }

  /**
   * Starts an audit of every stored package (or returns the one in progress) and wakes the
   * runner. An audit of an empty repository finishes at once and is announced like any other.
   */
  startAudit(user: string): { created: Audit } | { existing: Audit } {
    const running = this.catalog.audits.inProgress();
    if (running !== undefined) return { existing: running };
    const packages = new Map<string, number>();
    for (const pkg of this.catalog.packages.list({ stored: true })) packages.set(pkg.bagId, this.catalog.packages.storedBytes(pkg.bagId));
    const result = this.catalog.audits.start(user, packages);
    if ('created' in result) {
      const audit = result.created;
      this.logger.info({ auditId: audit.id, user, packages: audit.packages, totalBytes: audit.totalBytes }, `audit ${audit.id} started by ${user}: ${audit.packages} packages, ${formatBytes(audit.totalBytes)}`);
      if (audit.finishedAt !== undefined) this.finished(audit);
      else this.wake();
    }
    return result;
  }

  /** Progress of the audit in progress, or undefined when there is none. */
  progress(): AuditProgress | undefined {
    const audit = this.current ?? this.catalog.audits.inProgress();
    if (audit === undefined || audit.finishedAt !== undefined) return undefined;
    const bytes = this.verifiedBytes(audit);
    const rate = this.rate();
    const left = Math.max(0, audit.totalBytes - bytes);
    return {
      auditId: audit.id,
      packages: audit.packages,
      done: audit.successes + audit.failures,
      bytes,
      totalBytes: audit.totalBytes,
      rateBytesPerSec: rate,
      etaSeconds: rate > 0 ? left / rate : left === 0 ? 0 : null,
    };
  }

  private verifiedBytes(audit: Audit): number {
    let bytes = audit.bytes;
    if (audit === this.current) for (const b of this.partial.values()) bytes += b;
    return bytes;
  }

  private sample(): void {
    if (this.current === undefined) return;
    const now = Date.now();
    const bytes = this.verifiedBytes(this.current);
    // Samples stay at least 250 ms apart; only the newest one moves forward in between.
    const previous = this.samples.at(-2);
    if (previous !== undefined && now - previous[0] < 250) this.samples[this.samples.length - 1] = [now, bytes];
    else this.samples.push([now, bytes]);
    while (this.samples.length > 2 && now - this.samples[0]![0] > RATE_WINDOW_MS) this.samples.shift();
  }

  private rate(): number {
    if (this.samples.length < 2) return 0;
    const [t0, b0] = this.samples[0]!;
    const [t1, b1] = this.samples.at(-1)!;
    return t1 > t0 ? ((b1 - b0) * 1000) / (t1 - t0) : 0;
  }

  private async work(): Promise<void> {
    this.wakeAgain = false;
    while (this.running) {
      const audit = this.catalog.audits.inProgress();
      if (audit === undefined) return;
      const completed = await this.runAudit(audit);
      if (!completed) return;
    }
  }

  /** Works through one audit's to-do set; false when it stopped (or cannot go on) before the end. */
  private async runAudit(audit: Audit): Promise<boolean> {
    const todo = this.catalog.audits.remaining(audit.id);
    if (todo.length === 0) {
      // Cannot happen (record() finishes the audit in the transaction that empties the set), but
      // looping on it would spin: say so and leave it for an operator.
      this.logger.error({ auditId: audit.id }, `audit ${audit.id} has no packages left to check but is not finished; the catalog is inconsistent`);
      return false;
    }
    this.current = audit;
    this.partial.clear();
    this.samples = [];
    this.sample();
    if (audit.successes + audit.failures > 0)
      this.logger.info({ auditId: audit.id, done: audit.successes + audit.failures, packages: audit.packages }, `audit ${audit.id} resumes: ${todo.length} of ${audit.packages} packages left`);

    let next = 0;
    let broken: { reason: unknown } | undefined;
    this.recordFailure = undefined;
    const signal = this.abort.signal;
    // `concurrency` lanes, each with at most two packages: the next one is listed and its files
    // queued once every file of the one before has been handed to the pool, so the hashing
    // workers do not wait between packages while its last files are still being read.
    const lane = async (): Promise<void> => {
      let previous: Promise<void> | undefined;
      while (this.running && broken === undefined && this.recordFailure === undefined && next < todo.length) {
        const item = todo[next++]!;
        let handedOver!: () => void;
        const submitted = new Promise<void>((resolve) => (handedOver = resolve));
        const done = this.checkPackage(audit.id, item.bagId, item.bytes, signal, handedOver).then(
          (checked) => {
            if (checked !== undefined) this.recordSoon(checked, audit.user);
          },
          (reason: unknown) => {
            broken ??= { reason };
          },
        );
        await Promise.race([submitted, done]);
        await previous;
        previous = done;
      }
      await previous;
    };
    const lanes = Math.max(1, Math.min(this.config.audit.concurrency, todo.length));
    await Promise.all(Array.from({ length: lanes }, lane));
    this.flushRecords(audit.user); // what finished before a stop is kept
    broken ??= this.recordFailure;
    this.partial.clear();
    this.current = undefined;
    if (broken !== undefined) {
      // Not an abort: the hasher or the catalog failed under us. The packages not recorded stay
      // in the to-do set; try again in a while rather than spin or give up.
      this.logger.error(
        { auditId: audit.id, err: messageOf(broken.reason) },
        `audit ${audit.id} paused: ${messageOf(broken.reason)}; trying again in ${RETRY_AFTER_FAILURE_MS / 1000} s`,
      );
      this.retryLater();
      return false;
    }
    return this.catalog.audits.get(audit.id)?.finishedAt !== undefined;
  }

  /** Verifies one package; undefined when the check was stopped (the package stays to do). */
  private async checkPackage(auditId: number, bagId: string, bytes: number, signal: AbortSignal, onSubmitted: () => void): Promise<PackageChecked | undefined> {
    const pkg = this.catalog.packages.get(bagId);
    if (pkg === undefined || !pkg.stored || pkg.storagePath === undefined) {
      return { auditId, bagId, bytes, outcome: 'failure', findings: [{ code: 'package-not-in-catalog' }] };
    }
    let dir: string;
    try {
      dir = this.storage.packageDir(pkg.storagePath);
    } catch {
      return { auditId, bagId, bytes, outcome: 'failure', findings: [{ code: 'package-missing' }] };
    }
    this.partial.set(bagId, 0);
    let findings: Finding[];
    try {
      findings = await verifyPackage(dir, this.catalog.packages.listFiles(bagId), this.hasher, {
        algorithms: this.config.audit.algorithms,
        signal,
        onSubmitted,
        onFileRead: (n) => {
          this.partial.set(bagId, (this.partial.get(bagId) ?? 0) + n);
          this.sample();
        },
      });
    } catch (err) {
      this.partial.delete(bagId);
      // Stopped: the package stays in the to-do set; anything else goes up to runAudit.
      if (signal.aborted) return undefined;
      throw err;
    }
    // A check cut short by a stop is never recorded, whatever it had found so far.
    if (signal.aborted) return undefined;
    return { auditId, bagId, bytes, outcome: findings.length === 0 ? 'success' : 'failure', findings };
  }

  private recordSoon(checked: PackageChecked, user: string): void {
    this.unrecorded.push(checked);
    this.recordTimer ??= setTimeout(() => this.flushRecords(user), RECORD_BATCH_MS);
  }

  /**
   * Records every finished check in one transaction: per package one `fixity check` event, its
   * count, and its removal from the to-do set (catalog.audits.record). Never throws: a failure
   * is kept in `recordFailure` and pauses the audit; those packages stay to do.
   */
  private flushRecords(user: string): void {
    clearTimeout(this.recordTimer);
    this.recordTimer = undefined;
    const batch = this.unrecorded.splice(0);
    if (batch.length === 0) return;
    let results: Array<{ checked: PackageChecked; detail: string | null; recorded: ReturnType<Catalog['audits']['record']> }>;
    try {
      results = this.catalog.transaction(() =>
        batch.map((checked) => {
          const { auditId, bagId, outcome } = checked;
          const detail = outcome === 'success' ? null : findingsDetail(checked.findings);
          const recorded = this.catalog.audits.record(auditId, bagId, (): PreservationEvent =>
            this.catalog.events.add({ bagId, type: 'fixity check', executor: user, outcome, detail, auditId }),
          );
          return { checked, detail, recorded };
        }),
      );
    } catch (reason) {
      for (const { bagId } of batch) this.partial.delete(bagId);
      this.recordFailure ??= { reason };
      return;
    }
    failpoint('audit:after-record');
    for (const { checked, detail, recorded } of results) {
      const { auditId, bagId, findings } = checked;
      this.partial.delete(bagId);
      if (recorded === undefined) continue; // another runner got there first: nothing written
      if (this.current?.id === auditId) this.current = recorded.audit;
      if (checked.outcome === 'failure')
        this.logger.warn(
          { auditId, bagId, findings: findings.length },
          `fixity check of ${bagId} failed: ${detail!.split('\n').slice(0, 3).join('; ')}${findings.length > 3 ? `; and ${findings.length - 3} more` : ''}`,
        );
      this.onChecked?.(checked);
      if (recorded.audit.finishedAt !== undefined) this.finished(recorded.audit);
    }
    this.sample();
  }

  /** Exactly one caller sees an audit finish (the record() that emptied its to-do set). */
  private finished(audit: Audit): void {
    const finishedAt = audit.finishedAt ?? Date.now();
    const seconds = Math.max(0.001, (finishedAt - audit.createdAt) / 1000);
    const mbps = audit.bytes / 1e6 / seconds;
    this.logger.info(
      { auditId: audit.id, packages: audit.packages, successes: audit.successes, failures: audit.failures, bytes: audit.bytes, seconds, mbps },
      `audit ${audit.id} finished: ${audit.packages} packages, ${audit.successes} passed, ${audit.failures} failed, ${formatBytes(audit.bytes)} in ${seconds.toFixed(1)} s (${mbps.toFixed(1)} MB/s)`,
    );
    const url = this.config.audit.webhookUrl;
    if (url === undefined || url === '') return;
    const delivery = this.deliver(url, this.webhookPayload(audit)).finally(() => this.deliveries.delete(delivery));
    this.deliveries.add(delivery);
  }

  webhookPayload(audit: Audit): AuditWebhookPayload {
    const failures: AuditWebhookPayload['failures'] = [];
    for (const event of this.catalog.events.forAudit(audit.id)) {
      if (event.outcome !== 'failure') continue;
      failures.push({ bag_id: event.bagId, external_id: this.catalog.packages.get(event.bagId)?.externalId ?? null, detail: event.detail });
    }
    const iso = (ms: number) => new Date(ms).toISOString();
    return {
      audit: {
        id: audit.id,
        user: audit.user,
        packages: audit.packages,
        successes: audit.successes,
        failures: audit.failures,
        started_at: iso(audit.createdAt),
        finished_at: iso(audit.finishedAt ?? Date.now()),
        bytes: audit.bytes,
      },
      failures,
    };
  }

  /**
   * POSTs the summary: up to three attempts (10 s each, 2 s and 10 s apart) on network errors,
   * timeouts, 429 and 5xx answers; no retry after another 4xx or once the runner stops. Failing
   * is logged, never thrown.
   */
  private async deliver(url: string, payload: AuditWebhookPayload): Promise<void> {
    const body = JSON.stringify(payload);
    const auditId = payload.audit.id;
    for (let attempt = 0; ; attempt++) {
      let problem: string;
      let retry = true;
      try {
        const res = await fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body,
          signal: AbortSignal.timeout(this.webhookTimeoutMs),
        });
        await res.arrayBuffer().catch(() => undefined);
        if (res.ok) {
          this.logger.info({ auditId, status: res.status }, `audit ${auditId} summary delivered to the webhook`);
          return;
        }
        problem = `the webhook answered ${res.status}`;
        retry = res.status >= 500 || res.status === 429;
      } catch (err) {
        problem = (err as Error).name === 'TimeoutError' ? `no answer within ${this.webhookTimeoutMs / 1000} s` : messageOf(err);
      }
      const delay = this.webhookRetryDelaysMs[attempt];
      if (!retry || delay === undefined || !this.running) {
        this.logger.error({ auditId, attempts: attempt + 1 }, `audit ${auditId} summary not delivered to the webhook: ${problem}`);
        return;
      }
      this.logger.warn({ auditId, attempt: attempt + 1 }, `audit ${auditId} summary not delivered to the webhook (${problem}); trying again in ${delay / 1000} s`);
      if (!(await this.sleepUnlessStopped(delay))) {
        this.logger.error({ auditId, attempts: attempt + 1 }, `audit ${auditId} summary not delivered to the webhook: ${problem} (stopping)`);
        return;
      }
    }
  }

  private retryLater(): void {
    void this.sleepUnlessStopped(RETRY_AFTER_FAILURE_MS).then((awake) => {
      if (awake) this.wake();
    });
  }

  /** false if the runner stopped meanwhile. */
  private sleepUnlessStopped(ms: number): Promise<boolean> {
    const signal = this.abort.signal;
    if (signal.aborted) return Promise.resolve(false);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        signal.removeEventListener('abort', onAbort);
        resolve(true);
      }, ms);
      const onAbort = () => {
        clearTimeout(timer);
        resolve(false);
      };
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }
}

function messageOf(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as { cause?: unknown }).cause;
    return cause instanceof Error ? `${err.message}: ${cause.message}` : err.message;
  }
  return String(err);
}

/** 1.07 GB, 640 MB, 12 kB: decimal units, as MB/s is. */
export function formatBytes(n: number): string {
  if (n >= 1e12) return `${(n / 1e12).toFixed(2)} TB`;
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)} GB`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)} MB`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)} kB`;
  return `${n} B`;
}
