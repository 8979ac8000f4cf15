/**
 * Hashing a bag's files for the validator: every file once, with every algorithm at once, through
 * the caller's FileHasher. A file that cannot be read becomes a failure, not a thrown error.
 */
import type { Algorithm } from '../fixity/index.js';
import { errorCode } from '../fs/errors.js';
import { under } from '../fs/paths.js';
import type { BagFile, FileHasher } from './report.js';
import type { ScannedFile } from './scan.js';

type HashResult = Awaited<ReturnType<FileHasher['hashFile']>>;

export const DEFAULT_CONCURRENCY = 32;

export /** The error code of a failed read, or its message when it has none (a hasher's own error). */
function readFailure(err: unknown): string {
  const code = errorCode(err);
  return code !== 'EUNKNOWN' ? code : err instanceof Error ? err.message : 'read error';
}

/** Files below this size go to the hasher in batches, when it takes batches. */
export const BATCHED_BELOW = 1024 * 1024;
/** A batch closes at this many files or bytes: small enough to spread over the workers. */
const BATCH_FILES = 256;
const BATCH_BYTES = 8 * 1024 * 1024;

/**
 * What hashing found: the report's entry of each file read, at the file's index in the scan
 * (nothing where it could not be read), and why each other one could not be.
 */
export interface HashedFiles {
  entries: Array<BagFile | undefined>;
  failures: Map<string, string>;
}

/**
 * Hash every file once with every algorithm, largest first so one huge file does not start last
 * and finish alone. At most `concurrency` calls are in flight; the hasher bounds the real work.
 * Small files go in batches when the hasher takes them (`hashFiles`): one call, message and
 * promise per batch rather than per file, which is most of what a bag of many small files costs.
 * Each answer becomes the report's entry at once, kept by index: no map of paths, and no second
 * object per file when the report is made.
 */
export async function hashFiles(
  root: string,
  files: readonly ScannedFile[],
  algorithms: Algorithm[],
  hasher: FileHasher,
  concurrency: number,
  signal: AbortSignal | undefined,
  crc32 = true,
): Promise<HashedFiles> {
  const queue = files.map((_, i) => i).sort((a, b) => files[b]!.size - files[a]!.size);
  const entries = new Array<BagFile | undefined>(files.length).fill(undefined);
  const failures = new Map<string, string>();
  const keep = (i: number, result: HashResult): void => {
    entries[i] = {
      path: files[i]!.path,
      size: result.size,
      crc32: result.crc32 ?? '',
      digests: result.digests,
    };
  };
  const opts = { crc32, priority: 'ingest' as const, signal };
  const batchOpts = { crc32, priority: 'ingest' as const, ...(signal === undefined ? {} : { signal }) };
  const batched = hasher.hashFiles?.bind(hasher);
  let next = 0;
  /** The next batch of small files from the queue (they are at its end: it is sorted largest first). */
  const takeBatch = (): number[] => {
    const batch: number[] = [];
    let bytes = 0;
    while (next < queue.length && batch.length < BATCH_FILES && bytes < BATCH_BYTES) {
      const i = queue[next++]!;
      batch.push(i);
      bytes += files[i]!.size;
    }
    return batch;
  };
  const runner = async (): Promise<void> => {
    while (next < queue.length) {
      signal?.throwIfAborted();
      if (batched !== undefined && files[queue[next]!]!.size < BATCHED_BELOW) {
        const batch = takeBatch();
        let found: Array<HashResult | Error>;
        try {
          found = await batched(
            batch.map((i) => ({ path: under(root, files[i]!.path), algorithms })),
            batchOpts,
          );
        } catch (err) {
          // As for a single file: a stop goes up, any other failure is each file's.
          signal?.throwIfAborted();
          found = batch.map(() => (err instanceof Error ? err : new Error(String(err))));
        }
        signal?.throwIfAborted();
        batch.forEach((i, k) => {
          const result = found[k]!;
          if (result instanceof Error) failures.set(files[i]!.path, readFailure(result));
          else keep(i, result);
        });
        continue;
      }
      const i = queue[next++]!;
      try {
        keep(i, await hasher.hashFile(under(root, files[i]!.path), algorithms, opts));
      } catch (err) {
        signal?.throwIfAborted();
        failures.set(files[i]!.path, readFailure(err));
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, queue.length)) }, runner));
  return { entries, failures };
}
