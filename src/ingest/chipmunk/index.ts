/**
 * The checks chipmunk makes after BagIt (research/chipmunk.md §7): chipmunk-info.txt must match
 * the request (`info.ts`), bag-info.txt must satisfy the content type's profile (`profile.ts`),
 * and the content type's external validator must accept the bag (`validator.ts`). Unlike
 * chipmunk, every check runs and every problem is reported, and the validator runs without a
 * shell, with a time limit. Nothing here writes to the bag.
 */
import type { BagReport } from '../../bagit/index.js';
import type { StoredProblem } from '../../catalog/types.js';
import { checkChipmunkInfo, readChipmunkInfo } from './info.js';
import { checkAgainstProfile } from './profile.js';
import type { ContentTypeRules, ExpectedRequest } from './rules.js';
import { DEFAULT_VALIDATOR_TIMEOUT_MS, runValidator } from './validator.js';

export { CHIPMUNK_PROBLEM_CODES } from './problems.js';
export { checkProfile, parseProfile } from './profile.js';
export type { ContentTypeRules, ExpectedRequest } from './rules.js';
export { runValidator, VALIDATOR_OUTPUT_LIMIT } from './validator.js';

/**
 * Everything chipmunk checks after BagIt, all of it, every problem reported. The external
 * validator is not run over a bag holding symlinks or special files: third-party code must not
 * be led outside the bag, and the bag is refused for them anyway.
 */
export async function checkChipmunk(
  bagDir: string,
  report: BagReport,
  expected: ExpectedRequest,
  rules: ContentTypeRules | undefined,
  opts?: { signal?: AbortSignal | undefined },
): Promise<StoredProblem[]> {
  const problems: StoredProblem[] = [];
  const tags = await readChipmunkInfo(bagDir, report, problems);
  problems.push(...checkChipmunkInfo(tags, expected, report));
  if (rules?.profile !== undefined)
    problems.push(...(await checkAgainstProfile(rules.profile, expected.contentType, report)));
  if (rules?.validator !== undefined) {
    const unsafeBag = report.problems.some((p) => p.code === 'symlink' || p.code === 'special-file');
    if (!unsafeBag) {
      const failure = await runValidator(
        rules.validator,
        bagDir,
        expected.externalId,
        expected.contentType,
        rules.timeoutMs ?? DEFAULT_VALIDATOR_TIMEOUT_MS,
        opts?.signal,
      );
      if (failure !== undefined) problems.push(failure);
    }
  }
  return problems;
}
