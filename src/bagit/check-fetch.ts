/**
 * Validation steps for fetch.txt: read it, then check that what it lists is either in the bag or
 * a hole to fetch first (`fetch-hole`), and that every payload manifest lists it.
 */
import { existsInBag, readTagText, type BagContext, type ScannedBag } from './bag-context.js';
import { FETCH_FILE, parseFetch, type FetchEntry } from './fetch.js';
import type { LoadedManifest } from './load-manifests.js';
import { makeProblem, type BagProblem } from './problems.js';

export async function readFetchFile(
  bag: BagContext,
): Promise<{ entries: FetchEntry[]; problems: BagProblem[] }> {
  if (!bag.fileIndex.has(FETCH_FILE)) return { entries: [], problems: [] };
  const read = await readTagText(bag, FETCH_FILE);
  if (read.value === undefined) return { entries: [], problems: read.problems };
  const parsed = parseFetch(read.value, { decodePercent: bag.rules.decodePercent });
  const problems = read.problems;
  for (const p of parsed.problems) problems.push(makeProblem(p));
  return { entries: parsed.entries, problems };
}

export function checkFetchHoles(
  bag: ScannedBag,
  entries: readonly FetchEntry[],
  payloadManifests: readonly LoadedManifest[],
): BagProblem[] {
  const problems: BagProblem[] = [];
  for (const entry of entries) {
    if (!existsInBag(bag, entry.path))
      problems.push(
        makeProblem({ code: 'fetch-hole', path: entry.path, url: entry.url, listedIn: FETCH_FILE }),
      );
    for (const m of payloadManifests) {
      if (!m.entries.has(entry.path))
        problems.push(makeProblem({ code: 'fetch-not-in-manifest', path: entry.path, manifest: m.fileName }));
    }
  }
  return problems;
}
