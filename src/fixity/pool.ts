/**
 * FixityPool: the main-thread half of the hashing pool. Jobs wait in two FIFO queues, ingest
 * before audit, and go to the least-loaded worker, up to PREFETCH per worker: a small file
 * hashes faster than a message crosses threads, so a worker must have the next jobs at hand.
 * When a worker runs dry while others still hold jobs they have not started, those are taken
 * back and shared out again (all of them from a worker on a long file, which then gets no more
 * until it finishes it; half from one working through small files). Ingest jobs have their own
 * budget per worker: a worker runs them before its waiting audit jobs, and inside a running
 * one, between two of its chunks. The pool holds no file contents: a queued job is a path and
 * a promise.
 *
 * Besides single files it takes batches (hashFiles: many files, one message each way) and folder
 * listings (listTree), so a caller with many small files spares its own thread the per-file work.
 * It does not compare digests or know what a bag is.
 */
import { availableParallelism } from 'node:os';
import { isAbsolute } from 'node:path';
import { Worker } from 'node:worker_threads';
import { ALGORITHMS, type Algorithm } from './algorithms.js';
import { AbortSignals } from './abort-signals.js';
import { AbortError, deserializeError, FixityError, POOL_CLOSED, WORKER_FAILED } from './errors.js';
import { JobQueue } from './job-queue.js';
import {
  CONTROL_INTS,
  MAIL,
  SHARED_BYTES,
  SHARED_INTS,
  type FromWorker,
  type BatchFile,
  type JobMessage,
  type JobOutcome,
  type ToWorker,
  type WorkerData,
} from './protocol.js';
import { AuditRateLimit } from './rate-limit.js';
import type { FileDigests, FixityPoolOptions, FixityStats, HashOptions, Priority, ResumeStore, Tree } from './types.js';

const MiB = 1024 * 1024;
const DEFAULT_READ_SIZE = MiB;
const MIN_READ_SIZE = 64 * 1024;
const DEFAULT_CHECKPOINT_BYTES = 256 * MiB;
/**
 * A worker's garbage is short-lived (messages, digests) and its read buffers live outside the
 * heap: a small young generation keeps each worker's memory flat instead of letting V8 grow it
 * to 48 MiB before collecting, which mattered for the daemon's RSS target (bench/ingest).
 */
const WORKER_LIMITS = { maxYoungGenerationSizeMb: 8 };
const WORKER_URL = new URL('./worker.js', import.meta.url);
/**
 * Jobs per worker, running and waiting in its local queue. A 4 KiB file hashes in ~10–20 µs; a
 * round trip between threads took 50–500 µs on our shared 2-core host. With one job in flight
 * a worker did ~12k small files/s, with 16 ~45k, with 64 ~50–55k (noisy, shared host).
 */
const PREFETCH = 64;

interface Job {
  id: number;
  /** For a batch, its first file's (for error messages). */
  path: string;
  algorithms: Algorithm[];
  crc32: boolean;
  priority: Priority;
  resume?: ResumeStore;
  signal?: AbortSignal;
  /** A batch job (hashFiles): many files, one message each way. */
  batch?: BatchFile[];
  /** A listing job (listTree). */
  list?: true;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- FileDigests, or a batch's results
  resolve: (value: any) => void;
  reject: (err: unknown) => void;
  settled: boolean;
  /** The worker it was handed to; unset while queued. */
  slot?: WorkerSlot;
  /** Whether the job message went out (a resumable job first waits for its checkpoint to load). */
  posted: boolean;
}

interface WorkerSlot {
  worker: Worker;
  control: Int32Array;
  /** Jobs handed over that the worker has not answered for yet, settled (aborted) or not. */
  jobs: Map<number, Job>;
  ingestJobs: number;
  /** A giveBack is on its way to this worker. */
  askedBack: boolean;
  /** It said, giving jobs back, that it is on a long file: no new jobs until it finishes one. */
  onLongJob: boolean;
  /** The worker said it loaded; one that exits before that cannot start at all. */
  ready: boolean;
  error?: unknown;
}

/**
 * The process's Node options, less those that make no sense for (and break) a worker module:
 * `node --input-type=module -e …` would otherwise pass --input-type on, and the worker fails.
 */
function workerExecArgv(): string[] {
  const args: string[] = [];
  const withValue = new Set(['-e', '--eval', '-p', '--print', '--input-type']);
  for (let i = 0; i < process.execArgv.length; i++) {
    const arg = process.execArgv[i]!;
    if (withValue.has(arg)) i++;
    else if (!arg.startsWith('--input-type=') && !arg.startsWith('--eval=') && !arg.startsWith('--print=')) args.push(arg);
  }
  return args;
}

function invalidArgument(message: string): FixityError {
  return new FixityError('ERR_INVALID_ARG_VALUE', message);
}

function checkPriority(priority: Priority | undefined): Priority {
  const p = priority ?? 'ingest';
  if (p !== 'ingest' && p !== 'audit') throw invalidArgument(`unknown priority ${JSON.stringify(p)}`);
  return p;
}

function checkAlgorithms(algorithms: readonly Algorithm[]): Algorithm[] {
  if (!Array.isArray(algorithms)) throw invalidArgument('algorithms must be an array');
  for (const a of algorithms) {
    if (!ALGORITHMS.includes(a)) throw invalidArgument(`unknown digest algorithm ${JSON.stringify(a)}`);
  }
  return [...new Set(algorithms)];
}

export class FixityPool {
  private readonly readSize: number;
  /** Whether an ingest job may run nested in an audit job: a second open file on that worker. */
  private readonly preemption: boolean;
  private readonly shared = new SharedArrayBuffer(SHARED_INTS * BigInt64Array.BYTES_PER_ELEMENT);
  private readonly sharedCells = new BigInt64Array(this.shared);
  private readonly rateLimit = new AuditRateLimit(this.shared);
  private readonly slots: WorkerSlot[] = [];
  private readonly ingestQueue = new JobQueue<Job>();
  private readonly auditQueue = new JobQueue<Job>();
  private readonly signals = new AbortSignals<Job>((job, reason) => this.abort(job, reason));
  private nextId = 1;
  private queued = 0;
  private outstanding = 0;
  private filesHashed = 0;
  private referenced = true;
  private closed = false;
  private closing?: Promise<void>;
  /** Set when workers cannot start at all; every job then fails with it. */
  private broken?: FixityError;

  constructor(opts: FixityPoolOptions = {}) {
    let workers = opts.workers ?? availableParallelism();
    if (!Number.isSafeInteger(workers) || workers < 1) throw new RangeError(`workers must be an integer ≥ 1, got ${workers}`);
    const readSize = opts.readSize ?? DEFAULT_READ_SIZE;
    if (!Number.isSafeInteger(readSize) || readSize < 1) throw new RangeError(`readSize must be a positive integer, got ${readSize}`);
    this.readSize = Math.max(MIN_READ_SIZE, readSize);
    const maxOpenFiles = opts.maxOpenFiles ?? Infinity;
    if (!(maxOpenFiles >= 1)) throw new RangeError(`maxOpenFiles must be ≥ 1, got ${maxOpenFiles}`);
    // A worker holds one file open, two while an ingest job runs inside an audit job.
    workers = Math.min(workers, Math.floor(maxOpenFiles));
    this.preemption = maxOpenFiles >= 2 * workers;
    this.rateLimit.setRate(opts.auditRateLimitBytesPerSec ?? 0);
    for (let i = 0; i < workers; i++) this.slots.push(this.spawn());
    this.updateReference();
  }

  hashFile(absPath: string, algorithms: Algorithm[], opts: HashOptions = {}): Promise<FileDigests> {
    return new Promise<FileDigests>((resolve, reject) => {
      this.checkOpen(absPath);
      if (typeof absPath !== 'string' || !isAbsolute(absPath)) throw invalidArgument(`not an absolute path: ${absPath}`);
      const unique = checkAlgorithms(algorithms);
      const priority = checkPriority(opts.priority);
      const everyBytes = opts.resume?.everyBytes;
      if (everyBytes !== undefined && !(Number.isSafeInteger(everyBytes) && everyBytes > 0)) {
        throw invalidArgument(`resume.everyBytes must be a positive integer, got ${everyBytes}`);
      }
      if (opts.signal?.aborted) throw new AbortError(absPath, opts.signal.reason);

      this.enqueue({
        id: this.nextId++,
        path: absPath,
        algorithms: unique,
        crc32: opts.crc32 === true,
        priority,
        resolve,
        reject,
        settled: false,
        posted: false,
        ...(opts.resume ? { resume: opts.resume } : {}),
        ...(opts.signal ? { signal: opts.signal } : {}),
      });
    });
  }

  /**
   * Hashes several files as ONE job: one worker reads them one after the other, in the order
   * given, and the results come back together, in that order. A file that cannot be hashed
   * does not stop the others: its entry is the error hashFile would have rejected with. The
   * whole batch rejects only when it stops (abort, pool closed, worker failed). Much cheaper per
   * file than hashFile for many small files (one message each way, one promise); keep batches to
   * a few MiB so they still spread over the workers and ingest jobs are not kept waiting.
   * `resume` and `expectedSize` do not apply.
   */
  hashFiles(
    files: ReadonlyArray<{ path: string; algorithms: Algorithm[] }>,
    opts: Omit<HashOptions, 'resume' | 'expectedSize'> = {},
  ): Promise<Array<FileDigests | FixityError>> {
    return new Promise<Array<FileDigests | FixityError>>((resolve, reject) => {
      this.checkOpen(files[0]?.path);
      if (!Array.isArray(files)) throw invalidArgument('files must be an array');
      const batch: BatchFile[] = files.map(({ path, algorithms }) => {
        if (typeof path !== 'string' || !isAbsolute(path)) throw invalidArgument(`not an absolute path: ${path}`);
        return [path, checkAlgorithms(algorithms)];
      });
      const priority = checkPriority(opts.priority);
      if (opts.signal?.aborted) throw new AbortError(batch[0]?.[0] ?? '', opts.signal.reason);
      if (batch.length === 0) return resolve([]);
      this.enqueue({
        id: this.nextId++,
        path: batch[0]![0],
        algorithms: [],
        crc32: opts.crc32 === true,
        priority,
        batch,
        resolve,
        reject,
        settled: false,
        posted: false,
        ...(opts.signal ? { signal: opts.signal } : {}),
      });
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
      if (typeof absDir !== 'string' || !isAbsolute(absDir)) throw invalidArgument(`not an absolute path: ${absDir}`);
      const priority = checkPriority(opts.priority);
      if (opts.signal?.aborted) throw new AbortError(absDir, opts.signal.reason);
      this.enqueue({
        id: this.nextId++,
        path: absDir,
        algorithms: [],
        crc32: false,
        priority,
        list: true,
        resolve,
        reject,
        settled: false,
        posted: false,
        ...(opts.signal ? { signal: opts.signal } : {}),
      });
    });
  }

  /** Throws (in a job's promise executor, so the job rejects) when the pool takes no more jobs. */
  private checkOpen(path: string | undefined): void {
    if (this.closed) throw new FixityError(POOL_CLOSED, 'the fixity pool is closed', { path });
    if (this.broken) throw this.broken;
  }

  private enqueue(job: Job): void {
    if (job.signal) this.signals.watch(job.signal, job);
    (job.priority === 'ingest' ? this.ingestQueue : this.auditQueue).push(job);
    this.queued++;
    this.dispatch();
  }

  /** 0 = unlimited. Takes effect at once, also for audit jobs already running. */
  setAuditRateLimit(bytesPerSec: number): void {
    this.rateLimit.setRate(bytesPerSec);
    for (const slot of this.slots) this.ring(slot); // sleeping workers re-check
  }

  stats(): FixityStats {
    return {
      bytesHashed: Number(Atomics.load(this.sharedCells, SHARED_BYTES)),
      filesHashed: this.filesHashed,
      queued: this.queued,
      running: this.outstanding,
    };
  }

  /** Terminates the workers; every job not yet resolved rejects (code ERR_FIXITY_POOL_CLOSED). */
  close(): Promise<void> {
    if (this.closing) return this.closing;
    this.closed = true;
    const closedError = (job: Job): FixityError =>
      new FixityError(POOL_CLOSED, 'the fixity pool was closed before the file was hashed', { path: job.path });
    for (const job of [...this.ingestQueue.takeAll(), ...this.auditQueue.takeAll()]) this.fail(job, closedError(job));
    this.queued = 0;
    for (const slot of this.slots) {
      for (const job of slot.jobs.values()) this.fail(job, closedError(job));
    }
    this.closing = Promise.all(this.slots.map((slot) => slot.worker.terminate())).then(() => undefined);
    return this.closing;
  }

  private spawn(): WorkerSlot {
    const control = new SharedArrayBuffer(CONTROL_INTS * Int32Array.BYTES_PER_ELEMENT);
    const workerData: WorkerData = { readSize: this.readSize, preemption: this.preemption, control, shared: this.shared };
    const slot: WorkerSlot = {
      worker: new Worker(WORKER_URL, { workerData, execArgv: workerExecArgv(), resourceLimits: WORKER_LIMITS }),
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

  private dispatch(): void {
    if (this.closed) return;
    const batches = new Map<WorkerSlot, JobMessage[]>();
    for (const [queue, priority] of [
      [this.ingestQueue, 'ingest'],
      [this.auditQueue, 'audit'],
    ] as const) {
      while (queue.length > 0) {
        const slot = this.pickWorker(priority);
        if (!slot) break;
        const job = queue.shift()!;
        if (job.settled) continue;
        const message = this.assign(job, slot);
        if (!message) continue;
        const batch = batches.get(slot);
        if (batch) batch.push(message);
        else batches.set(slot, [message]);
      }
    }
    for (const [slot, jobs] of batches) this.post(slot, { t: 'jobs', jobs });
    if (this.queued === 0) this.rebalance();
    this.updateReference();
  }

  /**
   * Audit: the least-loaded worker with room. Ingest: the same, except that when preemption is on
   * ingest jobs have a budget of their own per worker (they run before, or inside, its audit jobs).
   */
  private pickWorker(priority: Priority): WorkerSlot | undefined {
    let best: WorkerSlot | undefined;
    let bestRank = Infinity;
    for (const slot of this.slots) {
      const load = slot.jobs.size;
      if (load === 0) return slot;
      let rank: number;
      if (priority === 'ingest' && this.preemption) {
        if (slot.ingestJobs >= PREFETCH) continue;
        rank = (slot.onLongJob ? 2 * PREFETCH : 0) + slot.ingestJobs + load / (4 * PREFETCH);
      } else {
        if (load >= PREFETCH || slot.onLongJob) continue;
        rank = load;
      }
      if (rank < bestRank) {
        best = slot;
        bestRank = rank;
      }
    }
    return best;
  }

  /** Nothing is queued but a worker is idle: take back the jobs others have not started yet. */
  private rebalance(): void {
    if (!this.slots.some((slot) => slot.jobs.size === 0)) return;
    for (const slot of this.slots) {
      if (slot.jobs.size > 1 && !slot.askedBack) {
        slot.askedBack = true;
        this.post(slot, { t: 'giveBack' });
      }
    }
  }

  /** Jobs a worker handed back go to the front of their queues, in their old order. */
  private takeBack(slot: WorkerSlot, ids: number[], onLongJob: boolean): void {
    slot.askedBack = false;
    slot.onLongJob = onLongJob;
    for (let i = ids.length - 1; i >= 0; i--) {
      const job = slot.jobs.get(ids[i]!);
      if (!job) continue;
      this.release(slot, job);
      if (job.settled) continue;
      delete job.slot;
      job.posted = false;
      (job.priority === 'ingest' ? this.ingestQueue : this.auditQueue).unshift(job);
      this.queued++;
    }
    this.dispatch();
  }

  /** Hands the job to the worker; returns the message to post, unless it must wait for its checkpoint. */
  private assign(job: Job, slot: WorkerSlot): JobMessage | undefined {
    this.queued--;
    this.outstanding++;
    job.slot = slot;
    slot.jobs.set(job.id, job);
    if (job.priority === 'ingest') slot.ingestJobs++;
    const message: JobMessage = {
      id: job.id,
      path: job.path,
      algorithms: job.algorithms,
      crc32: job.crc32,
      audit: job.priority === 'audit',
      ...(job.batch ? { batch: job.batch } : {}),
      ...(job.list ? { list: true as const } : {}),
    };
    const store = job.resume;
    if (!store) {
      job.posted = true;
      return message;
    }
    const everyBytes = store.everyBytes ?? DEFAULT_CHECKPOINT_BYTES;
    store.load().then(
      (checkpoint) => {
        if (job.settled || slot.jobs.get(job.id) !== job) return;
        job.posted = true;
        const resume = checkpoint ? { checkpoint, everyBytes } : { everyBytes };
        this.post(slot, { t: 'jobs', jobs: [{ ...message, resume }] });
      },
      (err: unknown) => {
        if (slot.jobs.get(job.id) !== job) return;
        this.release(slot, job);
        this.fail(job, err);
        this.dispatch();
      },
    );
    return undefined;
  }

  /** The worker no longer holds the job. */
  private release(slot: WorkerSlot, job: Job): void {
    if (!slot.jobs.delete(job.id)) return;
    this.outstanding--;
    if (job.priority === 'ingest') slot.ingestJobs--;
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
        if (job && !job.settled) this.tellStarted(job, message.offset, message.refused);
        break;
      }
      case 'checkpoint': {
        const job = slot.jobs.get(message.id);
        if (job) this.saveCheckpoint(slot, job, message.state);
        break;
      }
      case 'givenBack':
        this.takeBack(slot, message.ids, message.onLongJob);
        break;
    }
  }

  private onOutcome(slot: WorkerSlot, outcome: JobOutcome): void {
    const job = slot.jobs.get(outcome.id);
    if (!job) return;
    this.release(slot, job);
    slot.onLongJob = false;
    if (outcome.t === 'tree') {
      if (job.settled) return;
      this.settle(job);
      job.resolve(outcome.tree);
    } else if (outcome.t === 'batch') {
      const batch = job.batch!;
      const results = outcome.results.map((r, i) => ('error' in r ? deserializeError(r.error, batch[i]![0]) : r));
      if (job.settled) return;
      this.filesHashed += batch.length;
      this.settle(job);
      job.resolve(results);
    } else if (outcome.t === 'done') {
      const { size, crc32, digests } = outcome;
      this.succeed(job, crc32 === undefined ? { size, digests } : { size, crc32, digests });
    } else if (outcome.t === 'fail') {
      this.fail(job, deserializeError(outcome.error, job.path));
    } else {
      this.fail(job, new AbortError(job.path));
    }
  }

  /** The store's business (a log line, say); its failure must not touch the job. */
  private tellStarted(job: Job, offset: number, refused: boolean): void {
    try {
      job.resume?.started?.({ offset, refused });
    } catch {
      // ignored: hashing goes on either way
    }
  }

  private saveCheckpoint(slot: WorkerSlot, job: Job, state: Uint8Array): void {
    if (job.settled) return;
    job.resume!.save(state).then(
      () => {
        if (!job.settled) this.post(slot, { t: 'saved', id: job.id });
      },
      (err: unknown) => {
        if (job.settled) return;
        this.fail(job, err);
        this.post(slot, { t: 'cancel', id: job.id });
      },
    );
  }

  private succeed(job: Job, digests: FileDigests): void {
    if (job.settled) return;
    const finish = (): void => {
      if (job.settled) return;
      this.filesHashed++;
      this.settle(job);
      job.resolve(digests);
    };
    // A finished file's checkpoint must not let a later run skip re-reading it.
    if (job.resume?.clear) job.resume.clear().then(finish, (err: unknown) => this.fail(job, err));
    else finish();
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
    if (!slot) this.queued--; // still queued: dispatch skips settled jobs
    this.fail(job, new AbortError(job.path, reason));
    if (slot && job.posted) this.post(slot, { t: 'cancel', id: job.id }); // released when the worker answers
    else if (slot) this.release(slot, job); // its checkpoint is still loading
    this.dispatch();
  }

  private onExit(slot: WorkerSlot): void {
    const index = this.slots.indexOf(slot);
    if (this.closed || index < 0) return;
    const cause = slot.error;
    for (const job of slot.jobs.values()) {
      this.release(slot, job);
      this.fail(job, new FixityError(WORKER_FAILED, `a fixity worker stopped while hashing ${job.path}`, { path: job.path, cause }));
    }
    if (!slot.ready) {
      // The worker could not even start: replacing it would fail the same way.
      this.slots.splice(index, 1);
      if (this.slots.length === 0) {
        this.broken = new FixityError(WORKER_FAILED, 'fixity workers cannot start', { cause });
        for (const job of [...this.ingestQueue.takeAll(), ...this.auditQueue.takeAll()]) this.fail(job, this.broken);
        this.queued = 0;
      }
    } else {
      this.slots[index] = this.spawn();
    }
    this.dispatch();
  }

  /** Idle workers must not keep the process alive; busy ones must. */
  private updateReference(): void {
    const busy = this.queued > 0 || this.outstanding > 0;
    if (busy === this.referenced) return;
    this.referenced = busy;
    for (const slot of this.slots) {
      if (busy) slot.worker.ref();
      else slot.worker.unref();
    }
  }
}

/** A pool with the given options; the usual way to get one. */
export function createHasher(opts?: FixityPoolOptions): FixityPool {
  return new FixityPool(opts);
}
