/**
 * The pool's record of a job, one type per kind of work (a file, a batch, a listing), each with
 * its own result type, and of a worker as the pool sees it; the checks a caller's arguments pass
 * before they become a job, and the message that hands a job to a worker. Records only: who
 * queues, assigns and settles jobs is pool.ts and scheduler.ts.
 */
import { isAbsolute } from 'node:path';
import type { Worker } from 'node:worker_threads';
import { ALGORITHMS, type Algorithm } from './algorithms.js';
import type { BatchFile, FileJobMessage, JobMessage } from './protocol.js';
import type { FileDigests, HashOptions, Priority, ResumeStore, Tree } from './types.js';
import { AbortError, FixityError } from './errors.js';

export type Job = FileJob | BatchJob | ListJob;

interface JobBase {
  id: number;
  /** The file or folder; for a batch, its first file's (for error messages). */
  path: string;
  priority: Priority;
  signal?: AbortSignal | undefined;
  reject: (err: unknown) => void;
  settled: boolean;
  /** The worker it was handed to; unset while queued. */
  slot?: WorkerSlot;
  /** Whether the job message went out (a resumable job first waits for its checkpoint to load). */
  posted: boolean;
}

/** One file (hashFile). */
export interface FileJob extends JobBase {
  kind: 'file';
  algorithms: Algorithm[];
  crc32: boolean;
  resume?: ResumeStore | undefined;
  resolve: (digests: FileDigests) => void;
}

/** Many files, one message each way (hashFiles); a file that fails is an entry, not a rejection. */
interface BatchJob extends JobBase {
  kind: 'batch';
  files: BatchFile[];
  crc32: boolean;
  resolve: (results: Array<FileDigests | FixityError>) => void;
}

/** A folder tree listed in a worker (listTree). */
interface ListJob extends JobBase {
  kind: 'list';
  resolve: (tree: Tree) => void;
}

/** How a job's promise is settled. */
interface Settle<T> {
  resolve: (value: T) => void;
  reject: (err: unknown) => void;
}

/**
 * A file job from a caller's arguments, checked (it throws on a bad argument or an aborted
 * signal, inside the promise's executor, so that the promise rejects).
 */
export function fileJob(
  id: number,
  absPath: string,
  algorithms: Algorithm[],
  opts: HashOptions,
  settle: Settle<FileDigests>,
): FileJob {
  checkAbsolute(absPath);
  const unique = checkAlgorithms(algorithms);
  const priority = checkPriority(opts.priority);
  const everyBytes = opts.resume?.everyBytes;
  if (everyBytes !== undefined && !(Number.isSafeInteger(everyBytes) && everyBytes > 0)) {
    throw invalidArgument(`resume.everyBytes must be a positive integer, got ${everyBytes}`);
  }
  if (opts.signal?.aborted) throw new AbortError(absPath, opts.signal.reason);
  // One literal, every field present (resume, signal even when undefined), no spread: this runs
  // once per file, and V8 builds a spread-together object far more slowly.
  return {
    kind: 'file',
    id,
    path: absPath,
    algorithms: unique,
    crc32: opts.crc32 === true,
    priority,
    resume: opts.resume,
    signal: opts.signal,
    resolve: settle.resolve,
    reject: settle.reject,
    settled: false,
    posted: false,
  };
}

/** A batch job from a caller's arguments, checked; undefined for no files at all. */
export function batchJob(
  id: number,
  files: ReadonlyArray<{ path: string; algorithms: Algorithm[] }>,
  opts: Omit<HashOptions, 'resume'>,
  settle: Settle<Array<FileDigests | FixityError>>,
): BatchJob | undefined {
  if (!Array.isArray(files)) throw invalidArgument('files must be an array');
  const batch: BatchFile[] = files.map(({ path, algorithms }) => {
    checkAbsolute(path);
    return [path, checkAlgorithms(algorithms)];
  });
  const priority = checkPriority(opts.priority);
  if (opts.signal?.aborted) throw new AbortError(batch[0]?.[0] ?? '', opts.signal.reason);
  if (batch.length === 0) return undefined;
  return {
    kind: 'batch',
    id,
    path: batch[0]![0],
    files: batch,
    crc32: opts.crc32 === true,
    priority,
    signal: opts.signal,
    resolve: settle.resolve,
    reject: settle.reject,
    settled: false,
    posted: false,
  };
}

/** A folder-listing job from a caller's arguments, checked. */
export function listJob(
  id: number,
  absDir: string,
  opts: Pick<HashOptions, 'priority' | 'signal'>,
  settle: Settle<Tree>,
): ListJob {
  checkAbsolute(absDir);
  const priority = checkPriority(opts.priority);
  if (opts.signal?.aborted) throw new AbortError(absDir, opts.signal.reason);
  return {
    kind: 'list',
    id,
    path: absDir,
    priority,
    signal: opts.signal,
    resolve: settle.resolve,
    reject: settle.reject,
    settled: false,
    posted: false,
  };
}

/** A worker thread and the jobs it holds. */
export interface WorkerSlot {
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

function invalidArgument(message: string): FixityError {
  return new FixityError('ERR_INVALID_ARG_VALUE', message);
}

function checkAbsolute(path: string): void {
  if (typeof path !== 'string' || !isAbsolute(path)) throw invalidArgument(`not an absolute path: ${path}`);
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

/** The message handing the job to its worker (a resumable file job's checkpoint is added later). */
export function jobMessage(job: Job): JobMessage {
  const audit = job.priority === 'audit';
  switch (job.kind) {
    case 'file':
      return fileJobMessage(job);
    case 'batch':
      return { kind: 'batch', id: job.id, audit, files: job.files, crc32: job.crc32 };
    case 'list':
      return { kind: 'list', id: job.id, audit, path: job.path };
  }
}

export function fileJobMessage(job: FileJob): FileJobMessage {
  return {
    kind: 'file',
    id: job.id,
    audit: job.priority === 'audit',
    path: job.path,
    algorithms: job.algorithms,
    crc32: job.crc32,
  };
}
