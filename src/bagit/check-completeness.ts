/**
 * Validation step: completeness the other way round from matching: every payload file is in a
 * payload manifest (in every one, from BagIt 1.0).
 */
import type { BagContext } from './bag-context.js';
import type { LoadedManifest } from './load-manifests.js';
import { isPayloadPath } from './paths.js';
import { makeProblem, type BagProblem } from './problems.js';

export function checkCompleteness(
  bag: BagContext,
  payloadManifests: readonly LoadedManifest[],
  covered: ReadonlyMap<LoadedManifest, Uint8Array>,
): BagProblem[] {
  const problems: BagProblem[] = [];
  if (payloadManifests.length === 0) return problems;
  for (const [i, file] of bag.scan.files.entries()) {
    if (!isPayloadPath(file.path)) continue;
    const lacking = payloadManifests.filter((m) => covered.get(m)?.[i] !== 1);
    if (lacking.length === payloadManifests.length)
      problems.push(makeProblem({ code: 'file-not-in-manifest', path: file.path }));
    else if (bag.rules.everyPayloadManifest) {
      for (const m of lacking)
        problems.push(
          makeProblem({
            code: 'file-not-in-manifest',
            path: file.path,
            algorithm: m.algorithm,
            manifest: m.fileName,
          }),
        );
    }
  }
  return problems;
}
