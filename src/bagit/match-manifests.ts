/**
 * Validation step: each manifest entry matched to a file on disk and its digest compared. A name
 * in another Unicode normalization than the file's matches it (RFC 8493 §2.4 asks validators to
 * tolerate this), with a warning. What is listed but not there is `file-missing`, once per path.
 */
import { unreachable, type ScannedBag } from './bag-context.js';
import type { FetchEntry } from './fetch.js';
import type { HashedBag } from './hash-bag.js';
import type { LoadedManifest } from './load-manifests.js';
import { makeProblem, type BagProblem } from './problems.js';

export interface Matching {
  problems: BagProblem[];
  /** Listed paths not in the bag, each with the manifests listing it. */
  missing: Map<string, string[]>;
  /** Per manifest, the files on disk its entries name (by index): the entry's path, or the file it matched by normalization. */
  covered: Map<LoadedManifest, Uint8Array>;
}

/**
 * The files named like `path` up to Unicode normalization. Built on first use, only when some
 * listed path is not on disk as written: an entry per file of the bag.
 */
function normalizationTwins(bag: ScannedBag): (path: string) => string[] {
  let filesByNfc: Map<string, string[]> | undefined;
  return (path) => {
    if (filesByNfc === undefined) {
      filesByNfc = new Map();
      for (const f of bag.scan.files) {
        const key = f.path.normalize('NFC');
        const twins = filesByNfc.get(key);
        if (twins === undefined) filesByNfc.set(key, [f.path]);
        else twins.push(f.path);
      }
    }
    return filesByNfc.get(path.normalize('NFC')) ?? [];
  };
}

export function matchManifests(
  bag: ScannedBag,
  manifests: readonly LoadedManifest[],
  fetchEntries: readonly FetchEntry[],
  hashed: HashedBag,
): Matching {
  const { scan, fileIndex } = bag;
  const fetched = new Set(fetchEntries.map((e) => e.path));
  const filesNamedLike = normalizationTwins(bag);
  const matching: Matching = { problems: [], missing: new Map(), covered: new Map() };
  const { problems, missing } = matching;
  for (const manifest of manifests) {
    const covered = new Uint8Array(scan.files.length);
    matching.covered.set(manifest, covered);
    for (const entry of manifest.entries.values()) {
      let onDisk: string | undefined = fileIndex.has(entry.path) ? entry.path : undefined;
      if (onDisk === undefined) {
        if (bag.directories.has(entry.path)) {
          problems.push(makeProblem({ code: 'not-a-file', path: entry.path, listedIn: manifest.fileName }));
          continue;
        }
        // A path that exists as a link or device was reported as such already, one under a folder
        // that could not be read was reported with it, and one fetch.txt lists is a fetch hole.
        if (
          scan.others.has(entry.path) ||
          unreachable(bag, entry.path) ||
          (manifest.kind === 'payload' && fetched.has(entry.path))
        )
          continue;
        const twins = filesNamedLike(entry.path);
        if (twins.length === 1) {
          onDisk = twins[0]!;
          problems.push(
            makeProblem({
              code: 'manifest-path-normalization',
              path: onDisk,
              listed: entry.path,
              listedIn: manifest.fileName,
            }),
          );
        } else {
          const listedIn = missing.get(entry.path);
          if (listedIn === undefined) missing.set(entry.path, [manifest.fileName]);
          else listedIn.push(manifest.fileName);
          continue;
        }
      }
      const index = fileIndex.get(onDisk)!;
      covered[index] = 1;
      const file = hashed[index];
      if (file === undefined || !entry.digestWellFormed) continue;
      const actual = file.digests[manifest.algorithm];
      if (actual === undefined) {
        problems.push(
          makeProblem({
            code: 'file-unreadable',
            path: onDisk,
            detail: `the hasher returned no ${manifest.algorithm} digest`,
          }),
        );
        continue;
      }
      for (const expected of [entry.digest, ...entry.conflictingDigests]) {
        if (actual.toLowerCase() !== expected) {
          problems.push(
            makeProblem({
              code: 'manifest-mismatch',
              path: onDisk,
              algorithm: manifest.algorithm,
              expected,
              actual: actual.toLowerCase(),
              listedIn: manifest.fileName,
            }),
          );
        }
      }
    }
  }
  // One by one: a hostile manifest may list a great many missing paths.
  for (const p of missingFiles(bag, missing)) problems.push(p);
  return matching;
}

/**
 * `file-missing` for each listed path not in the bag, by path. A listed name that is absent but
 * present under another case, or with whitespace a sloppy writer added, is the commonest cause on
 * Linux; say so in the problem.
 */
function missingFiles(bag: ScannedBag, missing: ReadonlyMap<string, string[]>): BagProblem[] {
  if (missing.size === 0) return [];
  const similarKey = (p: string): string => p.normalize('NFC').toLowerCase().trimEnd();
  const bySimilarKey = new Map(bag.scan.files.map((f) => [similarKey(f.path), f.path]));
  return [...missing]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([path, listedIn]) => {
      const similar = bySimilarKey.get(similarKey(path));
      return makeProblem(
        similar === undefined
          ? { code: 'file-missing', path, listedIn }
          : { code: 'file-missing', path, listedIn, similar },
      );
    });
}
