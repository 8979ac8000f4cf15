/**
 * The content type's bag-info profile (a chipmunk "bagger profile"): which tags bag-info.txt must
 * have and which values they may take.
 */
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { BagReport } from '../../bagit/index.js';
import type { StoredProblem } from '../../catalog/types.js';
import { chipmunkProblem, errorDetail } from './problems.js';

export interface ProfileRule {
  tag: string;
  required: boolean;
  allowed?: string[];
}

/**
 * Read a chipmunk "bagger profile": `{"ordered": [{"<Tag>": {"fieldRequired": bool,
 * "valueList"?: [string...]}}...]}`. `defaultValue` and other keys are ignored, as chipmunk does;
 * an entry without a boolean `fieldRequired` is a configuration error.
 */
export function parseProfile(json: unknown): ProfileRule[] | { error: string } {
  const ordered = (json as { ordered?: unknown } | null)?.ordered;
  if (!Array.isArray(ordered)) return { error: 'no "ordered" array' };
  const rules: ProfileRule[] = [];
  for (const [i, item] of ordered.entries()) {
    const keys = item !== null && typeof item === 'object' ? Object.keys(item as object) : [];
    if (keys.length !== 1) return { error: `entry ${i + 1} is not an object with exactly one tag` };
    const tag = keys[0]!;
    const spec = (item as Record<string, unknown>)[tag] as {
      fieldRequired?: unknown;
      valueList?: unknown;
    } | null;
    if (spec === null || typeof spec !== 'object' || typeof spec.fieldRequired !== 'boolean') {
      return { error: `entry "${tag}" has no boolean fieldRequired` };
    }
    const rule: ProfileRule = { tag, required: spec.fieldRequired };
    if (spec.valueList !== undefined) {
      if (!Array.isArray(spec.valueList) || !spec.valueList.every((v) => typeof v === 'string')) {
        return { error: `entry "${tag}" has a valueList that is not a list of strings` };
      }
      rule.allowed = spec.valueList;
    }
    rules.push(rule);
  }
  return rules;
}

/**
 * Check bag-info entries against profile rules; every rule is checked and every problem kept.
 * Labels match case-insensitively (as elsewhere in bag-info); values match exactly, so a value
 * list entry with a trailing space (chipmunk's "Not Yet Known ") means what it says. An empty
 * value counts as present. Every occurrence of a repeated tag must be allowed.
 */
export function checkProfile(
  rules: readonly ProfileRule[],
  bagInfo: ReadonlyArray<[string, string]>,
): StoredProblem[] {
  const problems: StoredProblem[] = [];
  for (const rule of rules) {
    const values = bagInfo
      .filter(([label]) => label.toLowerCase() === rule.tag.toLowerCase())
      .map(([, v]) => v);
    if (values.length === 0) {
      if (rule.required)
        problems.push(chipmunkProblem({ code: 'profile-tag-missing', path: 'bag-info.txt', tag: rule.tag }));
      continue;
    }
    if (rule.allowed === undefined) continue;
    for (const value of values) {
      if (!rule.allowed.includes(value)) {
        problems.push(
          chipmunkProblem({
            code: 'profile-value-not-allowed',
            path: 'bag-info.txt',
            tag: rule.tag,
            value,
            allowed: rule.allowed,
          }),
        );
      }
    }
  }
  return problems;
}

export async function checkAgainstProfile(
  profilePath: string,
  contentType: string,
  report: BagReport,
): Promise<StoredProblem[]> {
  let json: unknown;
  try {
    json = JSON.parse(await readFile(resolve(profilePath), 'utf8'));
  } catch (err) {
    const detail = err instanceof SyntaxError ? 'not JSON' : errorDetail(err);
    return [chipmunkProblem({ code: 'profile-unreadable', contentType, detail })];
  }
  const rules = parseProfile(json);
  if ('error' in rules)
    return [chipmunkProblem({ code: 'profile-invalid', contentType, detail: rules.error })];
  return checkProfile(rules, report.bagInfo);
}
