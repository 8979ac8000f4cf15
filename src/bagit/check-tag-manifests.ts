/**
 * Validation step: RFC 8493 §2.2.1's rules for tag manifests: a tag manifest must not list tag
 * manifests, and should list every payload manifest (errors from 1.0, warnings before).
 */
import type { BagContext } from './bag-context.js';
import { payloadManifestsOf, type LoadedManifest } from './load-manifests.js';
import { parseManifestFileName } from './manifest.js';
import { makeProblem, type BagProblem } from './problems.js';

export function checkTagManifests(bag: BagContext, manifests: readonly LoadedManifest[]): BagProblem[] {
  const problems: BagProblem[] = [];
  const severity = bag.rules.tagManifestRules;
  const payloadManifests = payloadManifestsOf(manifests);
  for (const tagManifest of manifests.filter((m) => m.kind === 'tag')) {
    for (const entry of tagManifest.entries.values()) {
      if (!entry.path.includes('/') && parseManifestFileName(entry.path)?.kind === 'tag') {
        problems.push(
          makeProblem(
            {
              code: 'tag-manifest-lists-tag-manifest',
              path: entry.path,
              listedIn: tagManifest.fileName,
              line: entry.line,
            },
            severity,
          ),
        );
      }
    }
    for (const m of payloadManifests) {
      if (!tagManifest.entries.has(m.fileName))
        problems.push(
          makeProblem(
            { code: 'tag-manifest-incomplete', path: m.fileName, listedIn: tagManifest.fileName },
            severity,
          ),
        );
    }
  }
  return problems;
}
