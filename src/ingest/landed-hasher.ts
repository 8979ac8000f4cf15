/**
 * Hashing an upload's files as they land: each file our rsync reports received
 * (rsync/landed-log.ts) is read once, in the fixity pool behind every ingest job, for sha256, the
 * algorithms of the upload's manifests (md5, sha1, sha256, sha512 while there is none) and the
 * CRC-32, and its identity and digests go to the catalog
 * (catalog/landed-hashes.ts). At complete the validation takes a file's digests from there if
 * the file still has that identity (known-digests.ts), so most of the bag is not read again.
 *
 * A record is only written for bytes known to be the file's: its identity is taken before the
 * read and must be the same after it, and the read starts only once the file's ctime is behind
 * the clock's coarse tick, so that any later write gives it a different ctime.
 *
 * A hashed large file is also flushed to disk (fdatasync) before it is recorded: the store at
 * complete must have every byte on disk before it says DONE, and a 1 GiB upload's writeback
 * otherwise all lands on that moment (docs/performance.md, issue 27); it skips the files still as
 * recorded. Small files are recorded unflushed: a flush each cost them five times their hashing
 * and left most of an upload's last pages unhashed at complete, where one syncfs (`takeOver`)
 * flushes them all; their writeback is started as they are recorded (`BackgroundWriteback`), so
 * that the syncfs at complete finds little left to write.
 * No read starts while a download is being answered (`holdWhile`) or an ingest runs
 * (`ingestsRunning`): on a machine of few cores the background hashing would otherwise slow them,
 * and what is not hashed by complete is read then.
 */
import { join } from 'node:path';
import pLimit from 'p-limit';
import type { Catalog } from '../catalog/catalog.js';
import type { FileIdentity, LandedHash } from '../catalog/landed-hashes.js';
import type { Package } from '../catalog/types.js';
import type { FileDigests, FixityPool } from '../fixity/index.js';
import type { Logger } from '../logger.js';
import { identityOf, sameIdentity } from './file-identity.js';
import { BackgroundWriteback, flushFiles } from './flush-files.js';
import { LandedAlgorithms } from './landed-algorithms.js';
import type { LandingZone } from './landing.js';
import { LandedJobs, type Job } from './landed-jobs.js';
import type { LandedFile } from './rsync/index.js';

/** What the landed hasher needs of the fixity pool. */
export type LandedPool = Pick<FixityPool, 'hashFile' | 'hashFiles'>;

/** Files below this go to the pool in batches (one job, one commit). */
const SMALL = 1024 * 1024;
const BATCH_FILES = 256;
const BATCH_BYTES = 8 * 1024 * 1024;
/** Pool jobs of ours at once: few, so that what complete claims has mostly not started. */
const IN_POOL = 2;
/**
 * How far a file's ctime must be behind the clock before it is read: more than twice the
 * kernel's coarse timestamp tick (at most 10 ms, at HZ=100; a ctime lags the clock by up to one),
 * so that any later write gets another ctime; 2 s where the filesystem keeps whole seconds only.
 * A reported file is first looked at this long after its report (it landed just before).
 */
const SETTLE_MS = 20;
const SETTLE_COARSE_MS = 2_100;
/** While held (a download or an ingest under way), looks again this often. */
const HOLD_MS = 100;
/**
 * Flushes at once: few, as each holds one of libuv's four threads, which downloads read with;
 * TAKEN_OVER_FLUSHING while complete waits for a job under way (`hurry`).
 */
const FLUSHING = 2;
/**
 * Flushes at once of the files taken over at complete: the store's number (storage/assembly.ts),
 * whose flush they replace; 2 at a time left the store waiting (docs/performance.md).
 */
const TAKEN_OVER_FLUSHING = 16;
/** rsync logs a file just before renaming it into place: looks again this often, then gives up. */
const RETRY_MS = [100, 400, 1_000, 3_000];

/** Counts for the metrics and the bench. */
export interface LandedStats {
  /** Files hashed as they landed and recorded. */
  hashed: number;
  /** Files at complete whose digests came from a record (not read again). */
  known: number;
  /** Files at complete hashed as they landed but changed since: read again. */
  rehashed: number;
  /** Files at complete without a usable record (no report, not hashed yet): read as before. */
  unreported: number;
}

export class LandedHasher {
  readonly stats: LandedStats = { hashed: 0, known: 0, rehashed: 0, unreported: 0 };
  private readonly jobs = new LandedJobs();
  private inPool = 0;
  private ingests = 0;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly signal = new AbortController();
  private readonly algorithms = new LandedAlgorithms();
  private readonly flushing = pLimit(FLUSHING);
  /** Of small files recorded unflushed; none while held. */
  private readonly writeback = new BackgroundWriteback(
    () => !this.stopped && this.ingests === 0 && this.o.holdWhile?.() !== true,
  );

  constructor(
    private readonly o: {
      catalog: Catalog;
      landing: LandingZone;
      pool: LandedPool;
      logger: Logger;
      /** While this says yes (a download is being answered), no new read starts either. */
      holdWhile?: () => boolean;
    },
  ) {}

  /** The landed log's listener: resolves once every file is recorded or given up on. */
  accept = async (files: LandedFile[]): Promise<void> => {
    const waits: Array<Promise<void>> = [];
    // A report's files are mostly one upload's: its package is read once, not once a file.
    const packages = new Map<string, Package | undefined>();
    for (const file of files) {
      if (!packages.has(file.capability))
        packages.set(file.capability, this.o.catalog.packages.byUploadCapability(file.capability));
      const pkg = packages.get(file.capability);
      if (pkg === undefined || pkg.stored || pkg.capability !== file.capability) continue;
      if (!this.o.catalog.landedHashes.fits(pkg.bagId, file.path)) continue;
      const key = LandedJobs.keyOf(pkg.bagId, file.path);
      const queued = this.jobs.get(key);
      if (queued !== undefined && !queued.started) {
        // Received again before it was read: one read, of the newer one.
        queued.size = file.size;
        queued.tries = 0;
        waits.push(queued.done);
        continue;
      }
      let resolve!: () => void;
      const done = new Promise<void>((r) => (resolve = r));
      const job: Job = {
        bagId: pkg.bagId,
        capability: file.capability,
        path: file.path,
        size: file.size,
        due: Date.now() + SETTLE_MS,
        tries: 0,
        started: false,
        claimed: false,
        done,
        resolve,
      };
      // A job already running for the old bytes finishes; this one waits its turn under another key.
      this.jobs.add(queued === undefined ? key : `${key}\0${Date.now()}`, job);
      waits.push(done);
    }
    this.kick();
    await Promise.all(waits);
    // Stopped before they were read: the log must be kept and read again at the next start.
    if (this.stopped) throw new Error('the landed hasher stopped before every file was read');
  };

  /**
   * At complete: what is recorded for this file, after any read of it under way has finished. A
   * queued one is dropped (the validation reads it now, at the ingest's priority).
   */
  async claim(bagId: string, path: string): Promise<LandedHash | undefined> {
    for (const [key, job] of this.jobs.ofFile(bagId, path)) {
      if (job.started) {
        this.hurry(job);
        await job.done;
      } else this.jobs.finish(key, job);
    }
    return this.o.catalog.landedHashes.get(bagId, path);
  }

  /**
   * At complete, once the upload is staged at `dir`: the bag's files still queued leave the
   * queue (the validation reads them at the ingest's priority) and are flushed to disk now, while
   * the validation runs, rather than by the store after it; with `recorded`, so are those
   * recorded or being read without a flush (small files). Resolves with the paths flushed (those
   * it could not open are left to the store).
   */
  async takeOver(
    bagId: string,
    dir: string,
    { recorded }: { recorded: boolean },
  ): Promise<ReadonlySet<string>> {
    const paths = new Set(recorded ? this.o.catalog.landedHashes.unflushed(bagId) : []);
    for (const [k, job] of this.jobs) {
      if (job.bagId !== bagId) continue;
      if (job.started) {
        this.hurry(job); // its file has left the landing folder: not looked for there again
        if (recorded && job.size < SMALL) paths.add(job.path);
        continue;
      }
      this.jobs.finish(k, job);
      paths.add(job.path);
    }
    const listed = [...paths];
    const abs = listed.map((path) => join(dir, path));
    // One that cannot be flushed now is flushed by the store, which reports why.
    const flushed = await flushFiles(abs, pLimit(TAKEN_OVER_FLUSHING)).catch(() => new Set<string>());
    return new Set(listed.filter((_, i) => flushed.has(abs[i]!)));
  }

  /** Told by the ingest worker how many ingests run: while any does, no new read starts. */
  ingestsRunning(count: number): void {
    this.ingests = count;
  }

  /** Files reported and neither recorded nor given up on yet. */
  get pending(): number {
    return this.jobs.size;
  }

  stop(): void {
    this.stopped = true;
    this.signal.abort(new Error('the landed hasher stopped'));
    clearTimeout(this.timer);
    for (const [k, job] of this.jobs) if (!job.started) this.jobs.finish(k, job);
  }

  /**
   * Complete has come for a job under way: it is not tried again, and flushes go at the store's
   * rate until no such job is left, as a claim waits for the job's flushes.
   */
  private hurry(job: Job): void {
    job.claimed = true;
    this.flushing.concurrency = TAKEN_OVER_FLUSHING;
  }

  /**
   * Starts what is due, up to IN_POOL pool jobs; wakes again when the next one is due. With the
   * pool full it looks at nothing: the end of a pool job kicks again (an upload of many small
   * files reports them faster than they are read, and each report kicks).
   */
  private kick(): void {
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.inPool >= IN_POOL) return;
    if (this.ingests > 0 || this.o.holdWhile?.() === true) {
      if (this.jobs.size > 0) this.timer = setTimeout(() => this.kick(), HOLD_MS);
      return;
    }
    const now = Date.now();
    let next = Infinity;
    const due: Array<[string, Job]> = [];
    for (const [key, job] of this.jobs) {
      if (job.started) continue;
      if (job.due <= now) due.push([key, job]);
      else next = Math.min(next, job.due);
    }
    // In the order reported: a large file alone, a small one with the small ones after it.
    for (let first = 0; this.inPool < IN_POOL; first++) {
      while (first < due.length && due[first]![1].started) first++;
      if (first === due.length) break;
      const batch = [due[first]!];
      due[first]![1].started = true;
      let bytes = due[first]![1].size;
      const alone = bytes >= SMALL;
      for (let i = first + 1; !alone && i < due.length; i++) {
        if (batch.length === BATCH_FILES || bytes >= BATCH_BYTES) break;
        const job = due[i]![1];
        if (job.started || job.size >= SMALL) continue;
        job.started = true;
        bytes += job.size;
        batch.push(due[i]!);
      }
      this.inPool++;
      void this.run(batch)
        .catch((err: unknown) =>
          this.o.logger.warn({ err }, 'hashing landed files failed; they are hashed at complete'),
        )
        .finally(() => {
          this.inPool--;
          this.kick();
        });
    }
    if (next < Infinity && this.timer === undefined && this.inPool < IN_POOL) {
      this.timer = setTimeout(() => this.kick(), Math.max(10, next - Date.now()));
    }
  }

  /**
   * One pool job: the files' identities, their digests, the same identities after, one commit.
   * A file it could not record (its read, its flush or the commit failed: the catalog refuses
   * records on a full disk) is given up, left to the validation at complete: a claim must never
   * wait for a job that no longer runs.
   */
  private async run(batch: Array<[string, Job]>): Promise<void> {
    const ready: Array<{ key: string; job: Job; abs: string; before: FileIdentity }> = [];
    for (const [key, job] of batch) {
      const abs = join(this.o.landing.path(job.capability), job.path);
      const before = identityOf(abs);
      if (before === undefined || before.size !== job.size) {
        this.again(key, job, RETRY_MS[job.tries++]);
        continue;
      }
      const behind = Date.now() - Number(BigInt(before.ctimeNs) / 1_000_000n);
      const settle = BigInt(before.ctimeNs) % 1_000_000_000n === 0n ? SETTLE_COARSE_MS : SETTLE_MS;
      if (behind < settle) {
        this.again(key, job, settle - behind);
        continue;
      }
      const recorded = this.o.catalog.landedHashes.get(job.bagId, job.path);
      if (recorded !== undefined && sameIdentity(recorded, before)) {
        this.jobs.finish(key, job); // read already (a log read again after a restart)
        continue;
      }
      ready.push({ key, job, abs, before });
    }
    if (ready.length === 0) return;
    const opts = { crc32: true, priority: 'audit' as const, signal: this.signal.signal };
    let results: Array<FileDigests | Error>;
    try {
      const algorithms = await this.algorithms.of(this.o.landing.path(ready[0]!.job.capability));
      results =
        ready.length === 1 && ready[0]!.before.size >= SMALL
          ? [await this.o.pool.hashFile(ready[0]!.abs, algorithms, opts)]
          : await this.o.pool.hashFiles(
              ready.map((r) => ({ path: r.abs, algorithms })),
              opts,
            );
    } catch (err) {
      for (const r of ready) this.jobs.finish(r.key, r.job);
      if (this.stopped) return;
      throw err;
    }
    const records: Array<{ bagId: string; path: string; hash: LandedHash }> = [];
    const finished: typeof ready = [];
    /** The large files, flushed before they are recorded; the small ones written back behind. */
    const toFlush: string[] = [];
    let unflushed: string | undefined;
    for (const [i, r] of ready.entries()) {
      const result = results[i]!;
      const after = identityOf(r.abs);
      if (
        result instanceof Error ||
        after === undefined ||
        !sameIdentity(after, r.before) ||
        result.size !== r.before.size
      ) {
        this.again(r.key, r.job, RETRY_MS[r.job.tries++]);
        continue;
      }
      const flushed = r.before.size >= SMALL;
      if (flushed) toFlush.push(r.abs);
      else unflushed = r.abs;
      records.push({
        bagId: r.job.bagId,
        path: r.job.path,
        hash: { ...r.before, crc32: result.crc32 ?? '', digests: result.digests, flushed },
      });
      finished.push(r);
    }
    // A large file is flushed before it is recorded: its record says its bytes are on disk too
    // (`onDisk`). One by one: during an upload nothing waits for them, and a syncfs's fork costs
    // this thread more than a few fdatasyncs (flush-files.ts).
    try {
      await flushFiles(toFlush, this.flushing, { syncfsFrom: Infinity });
      // Refused first on a filling disk: the files are then read at complete.
      if (records.length > 0)
        this.o.catalog.backgroundTransaction(() => this.o.catalog.landedHashes.putAll(records));
      this.stats.hashed += records.length;
      if (unflushed !== undefined) this.writeback.request(unflushed);
    } finally {
      for (const r of finished) this.jobs.finish(r.key, r.job);
    }
    if (this.flushing.concurrency !== FLUSHING && ![...this.jobs].some(([, job]) => job.claimed))
      this.flushing.concurrency = FLUSHING;
  }

  /**
   * Whether the file at `abs` (`path` in the bag) is the one hashed and flushed as it landed:
   * then the store at complete need not flush it again.
   */
  onDisk(bagId: string, path: string, abs: string): boolean {
    const record = this.o.catalog.landedHashes.get(bagId, path);
    if (record?.flushed !== true) return false;
    const now = identityOf(abs);
    return now !== undefined && sameIdentity(now, record);
  }

  /**
   * Back to the queue after `delayMs`; undefined, or a job complete has claimed: given up (the
   * file is read at complete, which must not wait out the retries).
   */
  private again(key: string, job: Job, delayMs: number | undefined): void {
    if (delayMs === undefined || this.stopped || job.claimed) return this.jobs.finish(key, job);
    job.started = false;
    job.due = Date.now() + delayMs;
  }
}
