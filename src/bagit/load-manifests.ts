/**
 * Validation step: the manifests at the bag root, payload and tag, read and parsed (payload
 * manifests compactly, as they may list a great many files). A bag needs at least one payload
 * manifest with an algorithm this validator knows.
 */
import type { Algorithm } from '../fixity/index.js';
import { readTagText, type BagContext } from './bag-context.js';
import { CompactManifest, type ManifestView } from './compact-manifest.js';
import { parseManifest, parseManifestFileName, readManifest, type ManifestKind } from './manifest.js';
import { makeProblem, type BagProblem, type BagProblemInit } from './problems.js';

export interface LoadedManifest {
  fileName: string;
  kind: ManifestKind;
  algorithm: Algorithm;
  /** Tag manifests as a Map; payload manifests, which may list a great many files, compactly. */
  entries: ManifestView;
}

export async function loadManifests(
  bag: BagContext,
): Promise<{ manifests: LoadedManifest[]; problems: BagProblem[] }> {
  const manifests: LoadedManifest[] = [];
  const problems: BagProblem[] = [];
  for (const file of bag.scan.files) {
    if (file.path.includes('/')) continue;
    const name = parseManifestFileName(file.path);
    if (name === undefined) continue;
    if (name.algorithm === undefined) {
      problems.push(
        makeProblem({
          code: 'manifest-algorithm-unknown',
          path: file.path,
          algorithmName: name.algorithmName,
        }),
      );
      continue;
    }
    const read = await readTagText(bag, file.path);
    problems.push(...read.problems);
    if (read.value === undefined) continue;
    const options = {
      fileName: file.path,
      kind: name.kind,
      algorithm: name.algorithm,
      decodePercent: bag.rules.decodePercent,
    };
    let entries: ManifestView;
    let found: BagProblemInit[];
    if (name.kind === 'payload') {
      const table = new CompactManifest(
        name.algorithm,
        bag.fileIndex,
        (i) => bag.scan.files[i]!.path,
        bag.scan.files.length,
      );
      found = readManifest(read.value, options, table);
      entries = table;
    } else ({ entries, problems: found } = parseManifest(read.value, options));
    for (const p of found)
      problems.push(
        makeProblem(p, p.code === 'manifest-duplicate' ? bag.rules.duplicateSeverity : undefined),
      );
    manifests.push({ fileName: file.path, kind: name.kind, algorithm: name.algorithm, entries });
  }
  if (!manifests.some((m) => m.kind === 'payload')) problems.push(makeProblem({ code: 'manifest-missing' }));
  return { manifests, problems };
}

export function payloadManifestsOf(manifests: readonly LoadedManifest[]): LoadedManifest[] {
  return manifests.filter((m) => m.kind === 'payload');
}
