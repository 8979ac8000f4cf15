/**
 * Validation step: every regular file of the bag read once, for every algorithm any manifest uses
 * plus what the caller wants kept; a file that could not be read, or changed while it was read,
 * is a problem.
 */
import { ALGORITHMS, type Algorithm } from '../fixity/index.js';
import type { BagContext } from './bag-context.js';
import { DEFAULT_CONCURRENCY, hashFiles } from './hash-files.js';
import type { LoadedManifest } from './load-manifests.js';
import { makeProblem, type BagProblem } from './problems.js';
import type { BagFile, ValidateOptions } from './report.js';
import { filesChangedSinceScan } from './scan.js';

/** The report's entry of each file read, at the file's index in the scan (nothing where it could not be). */
export type HashedBag = Array<BagFile | undefined>;

export async function hashBag(
  bag: BagContext,
  manifests: readonly LoadedManifest[],
  opts: ValidateOptions,
): Promise<{ hashed: HashedBag; problems: BagProblem[] }> {
  const { dir, scan, signal } = bag;
  const wanted = new Set<Algorithm>([...manifests.map((m) => m.algorithm), ...(opts.alsoDigest ?? [])]);
  const algorithms = ALGORITHMS.filter((a) => wanted.has(a));
  const { entries: hashed, failures } = await hashFiles(
    dir,
    scan.files,
    algorithms,
    opts.hasher,
    opts.concurrency ?? DEFAULT_CONCURRENCY,
    signal,
    opts.crc32 ?? true,
  );
  signal?.throwIfAborted();
  const problems: BagProblem[] = [];
  for (const [path, detail] of [...failures].sort(([a], [b]) => (a < b ? -1 : 1)))
    problems.push(makeProblem({ code: 'file-unreadable', path, detail }));
  // A file written to while it was hashed has digests of bytes that may no longer be there.
  const hashedFiles = scan.files.filter((_, i) => hashed[i] !== undefined);
  for (const path of await filesChangedSinceScan(dir, hashedFiles, signal))
    problems.push(makeProblem({ code: 'file-changed-during-validation', path }));
  return { hashed, problems };
}
