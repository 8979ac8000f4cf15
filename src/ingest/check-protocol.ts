/**
 * The messages between an ingest and the worker thread that checks its upload (check-worker.ts,
 * isolated-check.ts). The worker runs `checkUpload`; its hashing goes back to the daemon's
 * pool through the ingest, so the pool's priorities, rate limit and resumable checkpoints stay
 * the daemon's. Nothing here runs.
 */
import type { BagFile, BagReport } from '../bagit/index.js';
import type { StoredProblem } from '../catalog/types.js';
import type { Algorithm, FileDigests, SerializedError } from '../fixity/index.js';
import type { ContentTypeRules, ExpectedRequest } from './chipmunk/index.js';

/** The upload the worker is to check: its first message, sent when there is one (a worker may start ahead). */
export interface CheckWorkerData {
  dir: string;
  request?: ExpectedRequest | undefined;
  rules?: ContentTypeRules | undefined;
  /** Whether the ingest's hasher takes batches of small files (`FileHasher.hashFiles`). */
  batches: boolean;
}

/** The hashing options that cross: the signal stays with the ingest. */
export interface CrossingHashOptions {
  crc32?: boolean;
  priority?: 'ingest' | 'audit';
}

/** The report without its files, which follow in batches when the ingest asks for them. */
export type ReportSummary = Omit<BagReport, 'files'> & { fileCount: number };

export type FromCheckWorker =
  | { kind: 'hashFile'; id: number; path: string; algorithms: Algorithm[]; opts: CrossingHashOptions }
  | {
      kind: 'hashFiles';
      id: number;
      files: Array<{ path: string; algorithms: Algorithm[] }>;
      opts: CrossingHashOptions;
    }
  | { kind: 'verdict'; report: ReportSummary; problems: StoredProblem[]; valid: boolean }
  | { kind: 'files'; files: BagFile[]; done: boolean };

/** A batch entry: the file's digests, or why it could not be read. */
export type CrossingDigests = { ok: FileDigests } | { error: SerializedError };

export type ToCheckWorker =
  | ({ kind: 'check' } & CheckWorkerData)
  | { kind: 'hashed'; id: number; digests: FileDigests }
  | { kind: 'hashedAll'; id: number; results: CrossingDigests[] }
  | { kind: 'hashFailed'; id: number; error: SerializedError }
  | { kind: 'files'; count: number };
