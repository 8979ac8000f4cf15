/**
 * FixityPool: the main-thread half of the hashing pool, and its public API. It checks what
 * callers ask for, starts the worker threads (one replaces a worker that dies, none if they
 * cannot start at all; all end after a while with nothing to do, and start again for the next
 * job: worker-options.ts), posts the jobs the scheduler hands out and settles each job's promise
 * from its worker's answer, on abort, or when the pool closes. It holds no file contents: a
 * queued job is a path and a promise.
 *
 * Besides single files it takes batches (hashFiles: many files, one message each way) and folder
 * listings (listTree), so a caller with many small files spares its own thread the per-file work.
 * Which worker runs what is scheduler.ts; checkpoints of resumable jobs are resume-relay.ts. It
 * does not compare digests or know what a bag is.
 */
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import type { Algorithm } from './algorithms.js';
import { AbortSignals } from './abort-signals.js';
import { AbortError, deserializeError, FixityError, POOL_CLOSED, WORKER_FAILED } from './errors.js';
import { batchJob, fileJob, jobMessage, listJob, type FileJob, type Job, type WorkerSlot } from './jobs.js';
import {
  CONTROL_INTS,
  MAIL,
  SHARED_BYTES,
  SHARED_INTS,
  type FromWorker,
  type JobMessage,
  type JobOutcome,
  type ToWorker,
  type WorkerData,
} from './protocol.js';
import { AuditRateLimit } from './rate-limit.js';
import { ResumeRelay } from './resume-relay.js';
import { WORKER_IDLE_MS, WORKER_URL, workerOptions } from './worker-options.js';
import { Scheduler } from './scheduler.js';
import type { FileDigests, FixityPoolOptions, FixityStats, HashOptions, Tree } from './types.js';

const DEFAULT_READ_SIZE = 1024 * 1024;
const MIN_READ_SIZE = 64 * 1024;
export class FixityPool {
  private readonly readSize: number;
  /** Whether an ingest job may run nested in an audit job: a second open file on that worker. */
  private readonly preemption: boolean;
  private readonly shared = new SharedArrayBuffer(SHARED_INTS * BigInt64Array.BYTES_PER_ELEMENT);
  private readonly sharedCells = new BigInt64Array(this.shared);
  private readonly rateLimit = new AuditRateLimit(this.shared);
  private readonly slots: WorkerSlot[] = [];
  private readonly scheduler: Scheduler;
  private readonly relay = new ResumeRelay({
    post: (slot, message) => this.post(slot, message),
    fail: (job, err) => this.fail(job, err),
    loadFailed: (slot, job, err) => {
      this.scheduler.release(slot, job);
      this.fail(job, err);
      this.dispatch();
    },
  });
  private readonly signals = new AbortSignals<Job>((job, reason) => this.abort(job, reason));
  private nextId = 1;
  private filesHashed = 0;
  private referenced = true;
  private readonly workerCount: number;
  /** Set while nothing is queued or running: when it fires, the workers end (see WORKER_IDLE_MS). */
  private idleTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private closing?: Promise<void>;
  /** Set when workers cannot start at all; every job then fails with it. */
  private broken?: FixityError;

  constructor(opts: FixityPoolOptions = {}) {
    let workers = opts.workers ?? availableParallelism();
    if (!Number.isSafeInteger(workers) || workers < 1)
      throw new RangeError(`workers must be an integer ≥ 1, got ${workers}`);
    const readSize = opts.readSize ?? DEFAULT_READ_SIZE;
    if (!Number.isSafeInteger(readSize) || readSize < 1)
      throw new RangeError(`readSize must be a positive integer, got ${readSize}`);
    this.readSize = Math.max(MIN_READ_SIZE, readSize);
    const maxOpenFiles = opts.maxOpenFiles ?? Infinity;
    if (!(maxOpenFiles >= 1)) throw new RangeError(`maxOpenFiles must be ≥ 1, got ${maxOpenFiles}`);
    // A worker holds one file open, two while an ingest job runs inside an audit job.
    workers = Math.min(workers, Math.floor(maxOpenFiles));
    this.preemption = maxOpenFiles >= 2 * workers;
    this.scheduler = new Scheduler(this.slots, this.preemption);
    this.rateLimit.setRate(opts.auditRateLimitBytesPerSec ?? 0);
    this.workerCount = workers;
    for (let i = 0; i < workers; i++) this.slots.push(this.spawn());
    this.updateReference();
  }

  hashFile(absPath: string, algorithms: Algorithm[], opts: HashOptions = {}): Promise<FileDigests> {
    return new Promise<FileDigests>((resolve, reject) => {
      this.checkOpen(absPath);
      this.enqueue(fileJob(this.nextId++, absPath, algorithms, opts, { resolve, reject }));
    });
  }

  /**
   * Hashes several files as ONE job: one worker reads them one after the other, in the order
   * given, and the results come back together, in that order. A file that cannot be hashed
   * does not stop the others: its entry is the error hashFile would have rejected with. The
   * whole batch rejects only when it stops (abort, pool closed, worker failed). Much cheaper per
   * file than hashFile for many small files (one message each way, one promise); keep batches to
   * a few MiB so they still spread over the workers and ingest jobs are not kept waiting.
   * `resume` does not apply.
   */
  hashFiles(
    files: ReadonlyArray<{ path: string; algorithms: Algorithm[] }>,
    opts: Omit<HashOptions, 'resume'> = {},
  ): Promise<Array<FileDigests | FixityError>> {
    return new Promise<Array<FileDigests | FixityError>>((resolve, reject) => {
      this.checkOpen(files[0]?.path);
      const job = batchJob(this.nextId++, files, opts, { resolve, reject });
      if (job === undefined) resolve([]);
      else this.enqueue(job);
    });
  }

  /**
   * Lists the folder tree under `absDir` in a worker (lstat of the folder, then readdir of it and
   * of every folder beneath, links not followed), queued like a hashing job of that priority.
   * Errors on the way are in the tree; it rejects only when stopped (abort, pool closed, worker
   * failed). Spares the main thread the listing of many small folders.
   */
  listTree(absDir: string, opts: Pick<HashOptions, 'priority' | 'signal'> = {}): Promise<Tree> {
    return new Promise<Tree>((resolve, reject) => {
      this.checkOpen(absDir);
      this.enqueue(listJob(this.nextId++, absDir, opts, { resolve, reject }));
    });
  }

  /** 0 = unlimited. Takes effect at once, also for audit jobs already running. */
  setAuditRateLimit(bytesPerSec: number): void {
    this.rateLimit.setRate(bytesPerSec);
    for (const slot of this.slots) this.ring(slot); // sleeping workers re-check
  }

  /** Worker threads hashing now. */
  get workers(): number {
    return this.slots.length;
  }

  stats(): FixityStats {
    return {
      bytesHashed: Number(Atomics.load(this.sharedCells, SHARED_BYTES)),
      filesHashed: this.filesHashed,
      queued: this.scheduler.queued,
      running: this.scheduler.outstanding,
    };
  }

  /** Terminates the workers; every job not yet resolved rejects (code ERR_FIXITY_POOL_CLOSED). */
  close(): Promise<void> {
    if (this.closing) return this.closing;
    this.closed = true;
    clearTimeout(this.idleTimer);
    const closedError = (job: Job): FixityError =>
      new FixityError(POOL_CLOSED, 'the fixity pool was closed before the file was hashed', {
        path: job.path,
      });
    for (const job of this.scheduler.takeAllQueued()) this.fail(job, closedError(job));
    for (const slot of this.slots) {
      for (const job of slot.jobs.values()) this.fail(job, closedError(job));
    }
    this.closing = Promise.all(this.slots.map((slot) => slot.worker.terminate())).then(() => undefined);
    return this.closing;
  }

  /** Throws (in a job's promise executor, so the job rejects) when the pool takes no more jobs. */
  private checkOpen(path: string | undefined): void {
    if (this.closed) throw new FixityError(POOL_CLOSED, 'the fixity pool is closed', { path });
    if (this.broken) throw this.broken;
  }

  private enqueue(job: Job): void {
    // The workers ended while the pool was idle: the first job starts them again.
    if (this.slots.length === 0 && this.broken === undefined)
      for (let i = 0; i < this.workerCount; i++) this.slots.push(this.spawn());
    if (job.signal) this.signals.watch(job.signal, job);
    this.scheduler.enqueue(job);
    this.dispatch();
  }

  private spawn(): WorkerSlot {
    const control = new SharedArrayBuffer(CONTROL_INTS * Int32Array.BYTES_PER_ELEMENT);
    const workerData: WorkerData = {
      readSize: this.readSize,
      preemption: this.preemption,
      control,
      shared: this.shared,
    };
    const slot: WorkerSlot = {
      worker: new Worker(WORKER_URL, { workerData, ...workerOptions() }),
      control: new Int32Array(control),
      jobs: new Map(),
      ingestJobs: 0,
      askedBack: false,
      onLongJob: false,
      ready: false,
    };
    if (!this.referenced) slot.worker.unref();
    slot.worker.on('message', (message: FromWorker) => this.onMessage(slot, message));
    slot.worker.on('error', (err) => (slot.error = err));
    slot.worker.on('exit', () => this.onExit(slot));
    return slot;
  }

  private post(slot: WorkerSlot, message: ToWorker): void {
    slot.worker.postMessage(message);
    this.ring(slot);
  }

  /** Tells a busy worker there is mail (it polls between chunks) and wakes it if it sleeps. */
  private ring(slot: WorkerSlot): void {
    Atomics.add(slot.control, MAIL, 1);
    Atomics.notify(slot.control, MAIL);
  }

  /** Posts the jobs the scheduler hands out (a resumable one once its checkpoint loaded). */
  private dispatch(): void {
    if (this.closed) return;
    for (const [slot, jobs] of this.scheduler.hand()) {
      const messages: JobMessage[] = [];
      for (const job of jobs) {
        if (job.kind === 'file' && job.resume) {
          this.relay.send(job, job.resume, slot);
        } else {
          job.posted = true;
          messages.push(jobMessage(job));
        }
      }
      if (messages.length > 0) this.post(slot, { t: 'jobs', jobs: messages });
    }
    for (const slot of this.scheduler.rebalance()) this.post(slot, { t: 'giveBack' });
    this.updateReference();
  }

  private onMessage(slot: WorkerSlot, message: FromWorker): void {
    switch (message.t) {
      case 'ready':
        slot.ready = true;
        break;
      case 'outcomes':
        for (const outcome of message.outcomes) this.onOutcome(slot, outcome);
        this.dispatch();
        break;
      case 'started': {
        const job = slot.jobs.get(message.id);
        if (job?.kind === 'file' && !job.settled) this.relay.started(job, message.offset, message.refused);
        break;
      }
      case 'checkpoint': {
        const job = slot.jobs.get(message.id);
        if (job?.kind === 'file') this.relay.save(slot, job, message.state);
        break;
      }
      case 'givenBack':
        this.scheduler.takeBack(slot, message.ids, message.onLongJob);
        this.dispatch();
        break;
    }
  }

  private onOutcome(slot: WorkerSlot, outcome: JobOutcome): void {
    const job = slot.jobs.get(outcome.id);
    if (!job) return;
    this.scheduler.release(slot, job);
    slot.onLongJob = false;
    if (outcome.t === 'fail') {
      this.fail(job, deserializeError(outcome.error, job.path));
    } else if (outcome.t === 'aborted') {
      this.fail(job, new AbortError(job.path));
    } else if (outcome.t === 'tree' && job.kind === 'list') {
      if (job.settled) return;
      this.settle(job);
      job.resolve(outcome.tree);
    } else if (outcome.t === 'batch' && job.kind === 'batch') {
      const files = job.files;
      const results = outcome.results.map((r, i) =>
        'error' in r ? deserializeError(r.error, files[i]![0]) : r,
      );
      if (job.settled) return;
      this.filesHashed += files.length;
      this.settle(job);
      job.resolve(results);
    } else if (outcome.t === 'done' && job.kind === 'file') {
      const { size, crc32, digests } = outcome;
      this.succeed(job, crc32 === undefined ? { size, digests } : { size, crc32, digests });
    } else {
      const message = `a fixity worker answered a ${job.kind} job with '${outcome.t}'`;
      this.fail(job, new FixityError(WORKER_FAILED, message, { path: job.path }));
    }
  }

  private succeed(job: FileJob, digests: FileDigests): void {
    if (job.settled) return;
    this.relay.clear(job, () => {
      if (job.settled) return;
      this.filesHashed++;
      this.settle(job);
      job.resolve(digests);
    });
  }

  private fail(job: Job, err: unknown): void {
    if (job.settled) return;
    this.settle(job);
    job.reject(err);
  }

  private settle(job: Job): void {
    job.settled = true;
    if (job.signal) this.signals.unwatch(job.signal, job);
  }

  private abort(job: Job, reason: unknown): void {
    if (job.settled) return;
    const slot = job.slot;
    if (!slot) this.scheduler.settledWhileQueued(); // dispatch skips settled jobs
    this.fail(job, new AbortError(job.path, reason));
    if (slot && job.posted)
      this.post(slot, { t: 'cancel', id: job.id }); // released when the worker answers
    else if (slot) this.scheduler.release(slot, job); // its checkpoint is still loading
    this.dispatch();
  }

  private onExit(slot: WorkerSlot): void {
    const index = this.slots.indexOf(slot);
    if (this.closed || index < 0) return;
    const cause = slot.error;
    for (const job of slot.jobs.values()) {
      this.scheduler.release(slot, job);
      this.fail(
        job,
        new FixityError(WORKER_FAILED, `a fixity worker stopped while hashing ${job.path}`, {
          path: job.path,
          cause,
        }),
      );
    }
    if (!slot.ready) {
      // The worker could not even start: replacing it would fail the same way.
      this.slots.splice(index, 1);
      if (this.slots.length === 0) {
        this.broken = new FixityError(WORKER_FAILED, 'fixity workers cannot start', { cause });
        for (const job of this.scheduler.takeAllQueued()) this.fail(job, this.broken);
      }
    } else {
      this.slots[index] = this.spawn();
    }
    this.dispatch();
  }

  /** Idle workers must not keep the process alive, and end after a while; busy ones must. */
  private updateReference(): void {
    const busy = this.scheduler.queued > 0 || this.scheduler.outstanding > 0;
    if (busy) {
      clearTimeout(this.idleTimer);
      this.idleTimer = undefined;
    } else if (!this.closed) {
      this.idleTimer ??= setTimeout(() => this.endIdleWorkers(), WORKER_IDLE_MS).unref();
    }
    if (busy === this.referenced) return;
    this.referenced = busy;
    for (const slot of this.slots) {
      if (busy) slot.worker.ref();
      else slot.worker.unref();
    }
  }

  /** Ends the workers while nothing is queued or running; removed from the slots first, their exits are not failures. */
  private endIdleWorkers(): void {
    this.idleTimer = undefined;
    if (this.closed || this.scheduler.queued > 0 || this.scheduler.outstanding > 0) return;
    // terminate() resolves with the exit code; it never rejects.
    for (const slot of this.slots.splice(0)) void slot.worker.terminate();
  }
}

/** A pool with the given options; the usual way to get one. */
export function createHasher(opts?: FixityPoolOptions): FixityPool {
  return new FixityPool(opts);
}
