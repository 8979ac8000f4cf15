/**
 * Prometheus metrics, written by prom-client: HTTP requests (counted apart, metrics-http.ts), the
 * ingest queue and durations, bytes hashed, audit progress, failures by code, rsync restarts,
 * catalog size, replica copies. Gauges are read when scraped.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { AuditRunner } from './audit/runner.js';
import type { Catalog } from './catalog/catalog.js';
import type { StoredProblem } from './catalog/types.js';
import type { IngestObserver } from './ingest/deps.js';
import { HttpMetrics } from './metrics-http.js';
import { summarizeReplicas } from './replicas/index.js';

interface PoolStats {
  stats(): { bytesHashed: number; filesHashed: number; queued: number; running: number };
}
interface RsyncStats {
  readonly restarts: number;
}

export class Metrics {
  readonly registry = new Registry();
  private readonly http = new HttpMetrics();
  private readonly ingestSeconds: Histogram<'outcome'>;
  private readonly ingestBytes: Counter;
  private readonly failures: Counter<'code'>;
  private readonly replicaBytes: Counter<'replica'>;
  private rsyncRestarts: () => number = () => 0;

  constructor(private readonly catalog: Catalog) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry, prefix: 'preservd_' });
    this.http.register(this.registry);
    this.ingestSeconds = new Histogram({
      name: 'preservd_ingest_duration_seconds',
      help: 'Time from the start of an ingest to DONE or FAILED',
      labelNames: ['outcome'],
      buckets: [0.1, 0.5, 1, 5, 15, 60, 300, 1800, 7200],
      registers,
    });
    this.ingestBytes = new Counter({
      name: 'preservd_ingest_bytes_total',
      help: 'Bytes of bags stored',
      registers,
    });
    this.replicaBytes = new Counter({
      name: 'preservd_replica_bytes_copied_total',
      help: 'Bytes of files written (or found) and verified on a replica',
      labelNames: ['replica'],
      registers,
    });
    this.failures = new Counter({
      name: 'preservd_ingest_failures_total',
      help: 'Problems that failed ingests, by code',
      labelNames: ['code'],
      registers,
    });
    new Gauge({
      name: 'preservd_ingest_queue_depth',
      help: 'PENDING queue items',
      registers,
      collect() {
        this.set(catalog.queue.depth());
      },
    });
    // The latest audit as the catalog records it: progress survives the audit's end and restarts.
    new Gauge({
      name: 'preservd_audit_last_packages',
      help: 'Packages of the latest audit: total, and checked so far by outcome',
      labelNames: ['state'],
      registers,
      collect() {
        const last = catalog.audits.latest();
        this.set({ state: 'total' }, last?.packages ?? 0);
        this.set({ state: 'success' }, last?.successes ?? 0);
        this.set({ state: 'failure' }, last?.failures ?? 0);
      },
    });
    new Gauge({
      name: 'preservd_audit_last_finished_timestamp_seconds',
      help: 'When the latest finished audit finished (0: none yet)',
      registers,
      collect() {
        this.set((catalog.audits.latestFinished()?.finishedAt ?? 0) / 1000);
      },
    });
    counterOf('preservd_rsync_restarts_total', 'Times the rsync daemon child was restarted', registers, () =>
      this.rsyncRestarts(),
    );
    new Gauge({
      name: 'preservd_catalog_size_bytes',
      help: 'Size of the LMDB catalog',
      registers,
      collect() {
        this.set(catalog.sizeBytes());
      },
    });
  }

  watchPool(pool: PoolStats): void {
    const registers = [this.registry];
    counterOf(
      'preservd_fixity_bytes_hashed_total',
      'Bytes read and hashed by the fixity pool (ingests and audits)',
      registers,
      () => pool.stats().bytesHashed,
    );
    counterOf(
      'preservd_fixity_files_hashed_total',
      'Files hashed by the fixity pool',
      registers,
      () => pool.stats().filesHashed,
    );
    new Gauge({
      name: 'preservd_fixity_jobs_queued',
      help: 'Files waiting for a hashing worker',
      registers,
      collect() {
        this.set(pool.stats().queued);
      },
    });
  }

  /** Files hashed as our rsync received them, and at complete: taken from those, read again, read for the first time. */
  watchLanded(stats: { hashed: number; known: number; rehashed: number; unreported: number }): void {
    const registers = [this.registry];
    counterOf(
      'preservd_upload_files_hashed_on_arrival_total',
      'Files hashed in the background as our rsync received them',
      registers,
      () => stats.hashed,
    );
    counterOf(
      'preservd_ingest_files_known_total',
      'Files whose digests the validation at complete took from the hash made on arrival (not read again)',
      registers,
      () => stats.known,
    );
    counterOf(
      'preservd_ingest_files_rehashed_total',
      'Files hashed on arrival that had changed by complete (a later upload, a touch, a replacement) and were read again',
      registers,
      () => stats.rehashed,
    );
    counterOf(
      'preservd_ingest_files_unreported_total',
      'Files read at complete without a hash made on arrival (no transfer report, or not hashed yet)',
      registers,
      () => stats.unreported,
    );
  }

  /** Without an rsync daemon of our own (ssh uploads) the counter stays at 0. */
  watchRsync(rsync: RsyncStats): void {
    this.rsyncRestarts = () => rsync.restarts;
  }

  /** Walks of upload folders: a request's progress (cached), the ingest's wait, uploads being received. */
  watchLanding(watcher: { readonly scans: number }): void {
    counterOf(
      'preservd_upload_scans_total',
      'Walks of upload folders (progress of open requests, waits for quiet, uploads being received)',
      [this.registry],
      () => watcher.scans,
    );
  }

  watchAudits(audits: Pick<AuditRunner, 'progress'>): void {
    const registers = [this.registry];
    new Gauge({
      name: 'preservd_audit_packages',
      help: 'Packages of the audit in progress',
      labelNames: ['state'],
      registers,
      collect() {
        const p = audits.progress();
        this.set({ state: 'total' }, p?.packages ?? 0);
        this.set({ state: 'done' }, p?.done ?? 0);
      },
    });
    new Gauge({
      name: 'preservd_audit_bytes',
      help: 'Bytes of the audit in progress',
      labelNames: ['state'],
      registers,
      collect() {
        const p = audits.progress();
        this.set({ state: 'total' }, p?.totalBytes ?? 0);
        this.set({ state: 'done' }, p?.bytes ?? 0);
      },
    });
  }

  /** Copies per replica by status, bytes verified, and the age of the oldest copy not yet verified. */
  watchReplicas(names: readonly string[]): void {
    if (names.length === 0) return;
    const registers = [this.registry];
    const catalog = this.catalog;
    const summary = () => summarizeReplicas(catalog, names);
    new Gauge({
      name: 'preservd_replica_copies',
      help: 'Package copies on each replica, by status',
      labelNames: ['replica', 'status'],
      registers,
      collect() {
        for (const r of summary())
          for (const status of ['pending', 'verified', 'failed'] as const)
            this.set({ replica: r.name, status }, r[status]);
      },
    });
    new Gauge({
      name: 'preservd_replica_verified_bytes',
      help: 'Bytes of the packages verified on each replica',
      labelNames: ['replica'],
      registers,
      collect() {
        for (const r of summary()) this.set({ replica: r.name }, r.verifiedBytes);
      },
    });
    new Gauge({
      name: 'preservd_replica_oldest_unverified_seconds',
      help: 'Age of the oldest copy not yet verified on each replica (0: none)',
      labelNames: ['replica'],
      registers,
      collect() {
        const now = Date.now();
        for (const r of summary())
          this.set(
            { replica: r.name },
            r.oldestUnverifiedAt === undefined ? 0 : (now - r.oldestUnverifiedAt) / 1000,
          );
      },
    });
  }

  replicated(replica: string, bytes: number): void {
    this.replicaBytes.inc({ replica }, bytes);
  }

  /** With `audit.everyDays`: the stored packages last verified more than a period ago. */
  watchContinuousAudits(continuous: { readonly periodMs: number | undefined; overdue(): number }): void {
    if (continuous.periodMs === undefined) return;
    new Gauge({
      name: 'preservd_audit_overdue_packages',
      help: 'Stored packages last verified longer ago than audit.everyDays',
      registers: [this.registry],
      collect() {
        this.set(continuous.overdue());
      },
    });
  }

  ingestObserver(): IngestObserver {
    return {
      finished: (outcome: 'DONE' | 'FAILED', seconds: number, bytes: number, problems: StoredProblem[]) => {
        this.ingestSeconds.observe({ outcome }, seconds);
        if (outcome === 'DONE') this.ingestBytes.inc(bytes);
        for (const p of problems) this.failures.inc({ code: p.code });
      },
    };
  }

  observeResponse(route: string, method: string, status: number, seconds: number): void {
    this.http.record(route, method, status, seconds);
  }

  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}

/** A counter whose value is a running total kept elsewhere, read when scraped. */
function counterOf(name: string, help: string, registers: Registry[], total: () => number): void {
  let seen = 0;
  new Counter({
    name,
    help,
    registers,
    collect() {
      const now = total();
      if (now > seen) this.inc(now - seen);
      seen = Math.max(seen, now);
    },
  });
}
