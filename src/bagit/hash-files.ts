/**
 * Hashing a bag's files for the validator: every file once, with every algorithm at once, through
 * the caller's FileHasher. A file that cannot be read becomes a failure, not a thrown error.
 */
import { join } from 'node:path';
import type { Algorithm } from '../fixity/index.js';
import { errorCode } from '../fs/errors.js';
import type { FileHasher } from './report.js';
import type { ScannedFile } from './scan.js';

export type HashResult = Awaited<ReturnType<FileHasher['hashFile']>>;

export const DEFAULT_CONCURRENCY = 32;

export /** The error code of a failed read, or its message when it has none (a hasher's own error). */
function readFailure(err: unknown): string {
  const code = errorCode(err);
  return code !== 'EUNKNOWN' ? code : err instanceof Error ? err.message : 'read error';
}

/**
 * Hash every file once with every algorithm, largest first so one huge file does not start last
 * and finish alone. At most `concurrency` calls are in flight; the hasher bounds the real work.
 */
export async function hashFiles(
  root: string,
  files: readonly ScannedFile[],
  algorithms: Algorithm[],
  hasher: FileHasher,
  concurrency: number,
  signal: AbortSignal | undefined,
): Promise<{ results: Map<string, HashResult>; failures: Map<string, string> }> {
  const queue = [...files].sort((a, b) => b.size - a.size);
  const results = new Map<string, HashResult>();
  const failures = new Map<string, string>();
  let next = 0;
  const runner = async (): Promise<void> => {
    while (next < queue.length) {
      signal?.throwIfAborted();
      const file = queue[next++]!;
      try {
        results.set(file.path, await hasher.hashFile(join(root, file.path), algorithms, { crc32: true, priority: 'ingest', signal }));
      } catch (err) {
        signal?.throwIfAborted();
        failures.set(file.path, readFailure(err));
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, queue.length)) }, runner));
  return { results, failures };
}

