/**
 * The audit runner: the public API of audits (start one, its progress, wake, stop) and the
 * scheduling of the audit in progress: `config.audit.concurrency` lanes, each verifying one
 * package after another (verify.ts), every finished check handed to the recorder (recorder.ts),
 * which writes ONE `fixity check` event per package and takes it out of the audit's to-do set in
 * the same transaction. A package is recorded only once its check finished, so after a crash or
 * a stop the audit resumes with what is left and nothing is counted twice.
 *
 * It reads at the pool's 'audit' priority (ingest jobs go first) and at most at
 * `config.audit.rateLimitMBps`. When an audit finishes it logs one summary line and, if
 * `config.audit.webhookUrl` is set, has the summary delivered (webhook.ts). Progress within
 * packages is kept by progress.ts.
 *
 * It does not decide when audits happen (POST /v1/audits and the systemd timer do) and does not
 * serve HTTP.
 */
import pLimit from 'p-limit';
import type { Catalog } from '../catalog/catalog.js';
import type { Audit } from '../catalog/types.js';
import type { Config } from '../config/config.js';
import { formatBytes } from '../format.js';
import type { Logger } from '../logger.js';
import { ServiceLoop, type Service } from '../service/service.js';
import { inSlot } from '../service/slots.js';
import type { Storage } from '../storage/storage.js';
import type { AuditedReplicas } from './copies.js';
import { ProgressTracker, type AuditProgress } from './progress.js';
import { CheckRecorder, type PackageChecked } from './recorder.js';
import type { Finding } from './findings.js';
import { storedPackageFindings, type StoredCheck } from './stored.js';
import type { PackageHasher } from './verify.js';
import {
  deliverWebhook,
  messageOf,
  webhookPayload,
  WEBHOOK_RETRY_DELAYS_MS,
  WEBHOOK_TIMEOUT_MS,
} from './webhook.js';
import { tombstoneFindings } from './tombstones.js';

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
  /**
   * The replicas whose copies every check also reads back (copies.ts), at each one's rate
   * limit; `repair` is asked to repair a package whose check failed, when `audit.repair` is auto.
   */
  replicas?: AuditedReplicas;
  /** Told when an audit found content of a deaccessioned package left (its removal recorded again). */
  onContentLeft?: () => void;
  /** Webhook delivery: per-attempt timeout (default 10 s) and the delays before retries (default 2 s, 10 s). */
  webhook?: { timeoutMs?: number; retryDelaysMs?: number[] };
}

/** After the hasher or catalog failed mid-audit, the runner looks again this much later. */
const RETRY_AFTER_FAILURE_MS = 60_000;

export class AuditRunner implements Service {
  private readonly catalog: Catalog;
  private readonly storage: Storage;
  private readonly hasher: AuditHasher;
  private readonly config: Pick<Config, 'audit'>;
  private readonly logger: Logger;
  private readonly onChecked: ((checked: PackageChecked) => void) | undefined;
  private readonly webhookTimeoutMs: number;
  private readonly webhookRetryDelaysMs: readonly number[];
  private readonly tracker = new ProgressTracker();
  private readonly recorder: CheckRecorder;
  private readonly replicas: AuditRunnerOptions['replicas'];
  /** What a package's check reads with. */
  private readonly stored: StoredCheck;
  private readonly onContentLeft: AuditRunnerOptions['onContentLeft'];
  /** One pass works through the audits in progress; webhook deliveries are held work of the run. */
  private readonly loop: ServiceLoop;

  constructor(opts: AuditRunnerOptions) {
    this.catalog = opts.catalog;
    this.storage = opts.storage;
    this.hasher = opts.hasher;
    this.config = opts.config;
    this.logger = opts.logger;
    this.onChecked = opts.onChecked;
    this.replicas = opts.replicas;
    this.onContentLeft = opts.onContentLeft;
    this.stored = {
      catalog: opts.catalog,
      storage: opts.storage,
      hasher: opts.hasher,
      replicas: opts.replicas,
    };
    this.webhookTimeoutMs = opts.webhook?.timeoutMs ?? WEBHOOK_TIMEOUT_MS;
    this.webhookRetryDelaysMs = opts.webhook?.retryDelaysMs ?? WEBHOOK_RETRY_DELAYS_MS;
    this.loop = new ServiceLoop(
      'the audit runner',
      (signal) => this.work(signal),
      (err: unknown) => this.logger.error({ err }, 'the audit runner could not look for work'),
    );
    this.recorder = new CheckRecorder({
      catalog: this.catalog,
      logger: this.logger,
      progress: this.tracker,
      onRecorded: (checked, audit) => {
        this.onChecked?.(checked);
        if (checked.outcome === 'failure' && this.config.audit.repair === 'auto')
          this.replicas?.repair(checked.bagId);
        if (audit.finishedAt !== undefined) this.finished(audit);
      },
    });
  }

  /** Starts working; an audit left in progress by an earlier run resumes where it was. */
  start(signal?: AbortSignal): void {
    if (this.loop.running) return;
    this.hasher.setAuditRateLimit(Math.max(0, this.config.audit.rateLimitMBps) * 1e6);
    this.loop.start(signal);
  }

  /** Looks for work now (after POST /v1/audits created an audit). */
  wake(): void {
    this.loop.wake();
  }

  /**
   * Stops: checks in flight are aborted and their packages stay in the to-do set for the next
   * start. Resolves once nothing runs; a webhook delivery under way gets its current attempt
   * (at most 10 s) but no retries.
   */
  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** Resolves when the runner has nothing left to do (the audit in progress finished, or it stopped). */
  idle(): Promise<void> {
    return this.loop.idle();
  }

  /**
   * Starts an audit of every stored package (or returns the one in progress) and wakes the
   * runner. An audit of an empty repository finishes at once and is announced like any other.
   */
  startAudit(user: string): { created: Audit } | { existing: Audit } {
    const running = this.catalog.audits.inProgress();
    if (running !== undefined) return { existing: running };
    const packages = new Map<string, number>();
    for (const pkg of this.catalog.packages.list({ stored: true }))
      packages.set(pkg.bagId, this.catalog.files.bytes(pkg.bagId));
    // Tombstones whose removals are done: checked for content left (tombstones.ts).
    for (const pkg of this.catalog.packages.tombstones())
      if (this.catalog.deaccessions.removalsOf(pkg.bagId).length === 0) packages.set(pkg.bagId, 0);
    const result = this.catalog.audits.start(user, packages);
    if ('created' in result) {
      const audit = result.created;
      this.logger.info(
        { auditId: audit.id, user, packages: audit.packages, totalBytes: audit.totalBytes },
        `audit ${audit.id} started by ${user}: ${audit.packages} packages, ${formatBytes(audit.totalBytes)}`,
      );
      if (audit.finishedAt !== undefined) this.finished(audit);
      else this.wake();
    }
    return result;
  }

  /** Progress of the audit in progress, or undefined when there is none. */
  progress(): AuditProgress | undefined {
    return this.tracker.of(this.tracker.current ?? this.catalog.audits.inProgress());
  }

  private async work(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      const audit = this.catalog.audits.inProgress();
      if (audit === undefined) return;
      const completed = await this.runAudit(audit, signal);
      if (!completed) return;
    }
  }

  /** Works through one audit's to-do set; false when it stopped (or cannot go on) before the end. */
  private async runAudit(audit: Audit, signal: AbortSignal): Promise<boolean> {
    const todo = this.catalog.audits.remaining(audit.id);
    if (todo.length === 0) {
      // Cannot happen (record() finishes the audit in the transaction that empties the set), but
      // looping on it would spin: say so and leave it for an operator.
      this.logger.error(
        { auditId: audit.id },
        `audit ${audit.id} has no packages left to check but is not finished; the catalog is inconsistent`,
      );
      return false;
    }
    this.tracker.begin(audit);
    if (audit.successes + audit.failures > 0)
      this.logger.info(
        { auditId: audit.id, done: audit.successes + audit.failures, packages: audit.packages },
        `audit ${audit.id} resumes: ${todo.length} of ${audit.packages} packages left`,
      );

    let broken: { reason: unknown } | undefined;
    this.recorder.failure = undefined;
    // A package holds a handing slot until every file of it is in the pool's hands and a package
    // slot until its check ends: `concurrency` packages handing over files and as many finishing,
    // so the hashing workers do not wait between packages while the last files are still read.
    const width = Math.max(1, Math.min(this.config.audit.concurrency, todo.length));
    const handing = pLimit(width);
    const packages = pLimit(2 * width);
    const checks = new Set<Promise<void>>();
    for (const item of todo) {
      if (signal.aborted || broken !== undefined || this.recorder.failure !== undefined) break;
      const { done } = await inSlot(packages, async () => {
        let check!: Promise<void>;
        await handing(() => {
          let handedOver!: () => void;
          const submitted = new Promise<void>((resolve) => (handedOver = resolve));
          check = this.checkPackage(audit.id, item.bagId, item.bytes, signal, handedOver).then(
            (checked) => {
              if (checked !== undefined) this.recorder.recordSoon(checked, audit.user);
            },
            (reason: unknown) => {
              broken ??= { reason };
            },
          );
          return Promise.race([submitted, check]);
        });
        await check;
      });
      checks.add(done);
      void done.finally(() => checks.delete(done));
    }
    await Promise.all(checks);
    this.recorder.flush(audit.user); // what finished before a stop is kept
    broken ??= this.recorder.failure;
    this.tracker.end();
    if (broken !== undefined) {
      // Not an abort: the hasher or the catalog failed under us. The packages not recorded stay
      // in the to-do set; try again in a while rather than spin or give up.
      this.logger.error(
        { auditId: audit.id, err: messageOf(broken.reason) },
        `audit ${audit.id} paused: ${messageOf(broken.reason)}; trying again in ${RETRY_AFTER_FAILURE_MS / 1000} s`,
      );
      this.loop.wakeIn(RETRY_AFTER_FAILURE_MS);
      return false;
    }
    return this.catalog.audits.get(audit.id)?.finishedAt !== undefined;
  }

  /** Verifies one package; undefined when the check was stopped (the package stays to do). */
  private async checkPackage(
    auditId: number,
    bagId: string,
    bytes: number,
    signal: AbortSignal,
    onSubmitted: () => void,
  ): Promise<PackageChecked | undefined> {
    const pkg = this.catalog.packages.get(bagId);
    // A tombstone: its content is gone on purpose, and none may be left where its removal is done.
    if (pkg?.deaccessioned !== undefined) {
      const findings = await tombstoneFindings(this.catalog, this.storage, this.replicas, bagId, signal);
      if (findings.length > 0) this.onContentLeft?.();
      return { auditId, bagId, bytes, outcome: findings.length === 0 ? 'success' : 'failure', findings };
    }
    if (pkg === undefined || !pkg.stored || pkg.storagePath === undefined) {
      return { auditId, bagId, bytes, outcome: 'failure', findings: [{ code: 'package-not-in-catalog' }] };
    }
    this.tracker.checking(bagId);
    let findings: Finding[];
    try {
      // Walked from the catalog, not held: a package may have hundreds of thousands of files.
      findings = await storedPackageFindings(this.stored, bagId, this.catalog.files.view(bagId), {
        algorithms: this.config.audit.algorithms,
        signal,
        onSubmitted,
        onFileRead: (n) => this.tracker.read(bagId, n),
      });
    } catch (err) {
      this.tracker.forget(bagId);
      // Stopped: the package stays in the to-do set; anything else goes up to runAudit.
      if (signal.aborted) return undefined;
      throw err;
    }
    // Deaccessioned while it was read: what went missing was removed on purpose.
    if (this.catalog.packages.get(bagId)?.deaccessioned !== undefined) findings = [];
    // A check cut short by a stop is never recorded, whatever it had found so far.
    if (signal.aborted) return undefined;
    return { auditId, bagId, bytes, outcome: findings.length === 0 ? 'success' : 'failure', findings };
  }

  /** Exactly one caller sees an audit finish (the record() that emptied its to-do set). */
  private finished(audit: Audit): void {
    const finishedAt = audit.finishedAt ?? Date.now();
    const seconds = Math.max(0.001, (finishedAt - audit.createdAt) / 1000);
    const mbps = audit.bytes / 1e6 / seconds;
    this.logger.info(
      {
        auditId: audit.id,
        packages: audit.packages,
        successes: audit.successes,
        failures: audit.failures,
        bytes: audit.bytes,
        seconds,
        mbps,
      },
      `audit ${audit.id} finished: ${audit.packages} packages, ${audit.successes} passed, ${audit.failures} failed, ${formatBytes(audit.bytes)} in ${seconds.toFixed(1)} s (${mbps.toFixed(1)} MB/s)`,
    );
    const url = this.config.audit.webhookUrl;
    if (url === undefined || url === '') return;
    void this.loop.hold(
      deliverWebhook(url, webhookPayload(this.catalog, audit), {
        logger: this.logger,
        timeoutMs: this.webhookTimeoutMs,
        retryDelaysMs: this.webhookRetryDelaysMs,
        stopSignal: () => this.loop.signal,
      }),
    );
  }
}
