/**
 * The shapes the validator hands to its callers (the ingest worker, `preservd validate`), and the
 * one thing it needs from them: something that hashes a file.
 */
import type { Algorithm } from '../fixity/index.js';
import type { BagProblem } from './problems.js';

/** One regular file of the bag, tag or payload, as read once during validation. */
export interface BagFile {
  /** Relative to the bag root, '/' separated. */
  path: string;
  size: number;
  /** CRC-32 as 8 lower-case hex digits; '' when the validation was asked for none (`crc32: false`). */
  crc32: string;
  /** Lower-case hex, for every algorithm that was asked for. */
  digests: Partial<Record<Algorithm, string>>;
}

export interface BagReport {
  /** No problem of severity 'error'. */
  valid: boolean;
  /** BagIt-Version as bagit.txt gives it (even when invalid), absent without a readable bagit.txt. */
  version?: string;
  /** Tag-File-Character-Encoding as bagit.txt gives it. */
  encoding?: string;
  /** Payload manifest algorithms present, in the order of ALGORITHMS. */
  algorithms: Algorithm[];
  /** Every problem found, errors and warnings; validation never stops at the first. */
  problems: BagProblem[];
  /** Every regular file in the bag (tag and payload) that could be read, sorted by path. */
  files: BagFile[];
  payloadBytes: number;
  payloadFiles: number;
  /** bag-info.txt (or a pre-0.96 package-info.txt) entries in order, labels as written. */
  bagInfo: Array<[string, string]>;
}

/** What the validator needs to hash: implemented by src/fixity's pool. */
export interface FileHasher {
  hashFile(
    absPath: string,
    algorithms: Algorithm[],
    /** `signal` lets an abort stop a file mid-read; a hasher may ignore it. */
    opts?: { crc32?: boolean; priority?: 'ingest' | 'audit'; signal?: AbortSignal | undefined },
  ): Promise<{ size: number; crc32?: string; digests: Partial<Record<Algorithm, string>> }>;
  /**
   * Optional: many small files (each below `BATCHED_BELOW` as scanned) as one job, each entry
   * its result or the error `hashFile` would have rejected with, in the order given. Rejects only
   * when stopped. Far cheaper per file than `hashFile` for a bag of many small files.
   */
  hashFiles?(
    files: ReadonlyArray<{ path: string; algorithms: Algorithm[] }>,
    opts?: { crc32?: boolean; priority?: 'ingest' | 'audit'; signal?: AbortSignal },
  ): Promise<Array<{ size: number; crc32?: string; digests: Partial<Record<Algorithm, string>> } | Error>>;
}

export interface ValidateOptions {
  hasher: FileHasher;
  /** Digests to compute for every file beyond those the manifests use, e.g. ['sha256']. */
  alsoDigest?: Algorithm[];
  signal?: AbortSignal | undefined;
  /** hashFile calls in flight at once; the hasher bounds the real work. Default 32. */
  concurrency?: number;
  /** A CRC-32 of every file besides its digests (the zip download needs it). Default true. */
  crc32?: boolean;
}
