/**
 * The messages between the pool (main thread) and its workers, and the layout of the shared
 * memory they also use. Internal to src/fixity.
 */
import type { Algorithm } from './algorithms.js';
import type { SerializedError } from './errors.js';
import type { Tree } from './types.js';

/** A job as the worker gets it: which kind of work, and what it needs for that kind only. */
export type JobMessage = FileJobMessage | BatchJobMessage | ListJobMessage;

interface JobMessageBase {
  id: number;
  /** Audit jobs are throttled and may be preempted by ingest jobs. */
  audit: boolean;
}

/** One file (FixityPool.hashFile). */
export interface FileJobMessage extends JobMessageBase {
  kind: 'file';
  path: string;
  algorithms: Algorithm[];
  crc32: boolean;
  /** Present for a resumable job; `checkpoint` is what the store loaded, if anything. */
  resume?: { checkpoint?: Uint8Array; everyBytes: number };
}

/**
 * A batch (FixityPool.hashFiles): these files, one after the other. One message and one
 * outcome for many files; never resumable.
 */
interface BatchJobMessage extends JobMessageBase {
  kind: 'batch';
  files: BatchFile[];
  crc32: boolean;
}

/** A listing (FixityPool.listTree): `path` is the folder to walk; nothing is hashed. */
export interface ListJobMessage extends JobMessageBase {
  kind: 'list';
  path: string;
}

/** One file of a batch: its path and the algorithms wanted for it. */
export type BatchFile = [path: string, algorithms: Algorithm[]];

/** One file's result in a batch: its digests, or why it could not be hashed. */
export type BatchResult =
  { size: number; crc32?: string; digests: Partial<Record<Algorithm, string>> } | { error: SerializedError };

export type ToWorker =
  | { t: 'jobs'; jobs: JobMessage[] }
  | { t: 'cancel'; id: number }
  /** The pool stored the checkpoint the worker sent; it may go on. */
  | { t: 'saved'; id: number }
  /** Another worker is idle: hand back every job not started yet. */
  | { t: 'giveBack' };

/** Answers about jobs; a worker sends them in batches: one message costs about as much as hashing a small file. */
export type JobOutcome =
  | { t: 'done'; id: number; size: number; crc32?: string; digests: Partial<Record<Algorithm, string>> }
  | { t: 'fail'; id: number; error: SerializedError }
  /** A listing job's tree. */
  | { t: 'tree'; id: number; tree: Tree }
  /** A batch ran to its end: one result per file, in order (a file that failed does not stop it). */
  | { t: 'batch'; id: number; results: BatchResult[] }
  | { t: 'aborted'; id: number };

export type FromWorker =
  /** The worker's module loaded: it can take jobs. A worker that exits before this cannot start. */
  | { t: 'ready' }
  | { t: 'outcomes'; outcomes: JobOutcome[] }
  /** A resumable job opened its file: hashing goes on from `offset` (see ResumeStore.started). */
  | { t: 'started'; id: number; offset: number; refused: boolean }
  | { t: 'checkpoint'; id: number; state: Uint8Array }
  /**
   * Answer to giveBack: jobs not started, in queue order. All of them when the running job is a
   * long one (past its first chunk, or sleeping), else the later half.
   */
  | { t: 'givenBack'; ids: number[]; onLongJob: boolean };

export interface WorkerData {
  readSize: number;
  /** Whether an audit job lets waiting ingest jobs run inside it (a second open file). */
  preemption: boolean;
  /** Per worker Int32Array: [MAIL] counts messages posted to it, so a busy worker knows to poll. */
  control: SharedArrayBuffer;
  /** Shared by all workers: the audit token bucket and the byte counter (see rate-limit.ts). */
  shared: SharedArrayBuffer;
}

export const MAIL = 0;
export const CONTROL_INTS = 1;

/** Indices into the shared BigInt64Array. 0–2 belong to AuditRateLimit. */
export const SHARED_BYTES = 3;
export const SHARED_INTS = 4;
