/**
 * What chipmunk's checks can find wrong with a bag, as typed values, and their table
 * (`defineProblems`): the sentence of each code. All are errors.
 */
import { defineProblems } from '../../problems.js';

export const CHIPMUNK_INFO = 'chipmunk-info.txt';
export const IDENTITY_TAGS = ['External-Identifier', 'Bag-ID', 'Chipmunk-Content-Type'] as const;
export const METADATA_TAGS = ['Metadata-URL', 'Metadata-Type', 'Metadata-Tagfile'] as const;
export type IdentityTag = (typeof IDENTITY_TAGS)[number];

export type ChipmunkProblemInit =
  | {
      code: 'chipmunk-info-mismatch';
      path: typeof CHIPMUNK_INFO;
      tag: IdentityTag;
      expected: string;
      actual?: string;
      fileMissing: boolean;
    }
  | { code: 'chipmunk-metadata-incomplete'; path: typeof CHIPMUNK_INFO; present: string[]; missing: string[] }
  | { code: 'chipmunk-metadata-tagfile-missing'; path: string; inPayload: boolean }
  | { code: 'profile-unreadable'; contentType: string; detail: string }
  | { code: 'profile-invalid'; contentType: string; detail: string }
  | { code: 'profile-tag-missing'; path: 'bag-info.txt'; tag: string }
  | { code: 'profile-value-not-allowed'; path: 'bag-info.txt'; tag: string; value: string; allowed: string[] }
  | {
      code: 'validator-failed';
      contentType: string;
      exitCode: number | null;
      signal: string | null;
      output: string;
    }
  | { code: 'validator-timeout'; contentType: string; timeoutMs: number }
  | { code: 'validator-unavailable'; contentType: string; command: string; detail: string };

/** Each code's sentence; all are errors. */
const CHIPMUNK_PROBLEMS = defineProblems<ChipmunkProblemInit>({
  'chipmunk-info-mismatch': {
    describe: (p) => {
      if (p.fileMissing)
        return `${CHIPMUNK_INFO} is missing, so ${p.tag} cannot match the request's "${p.expected}".`;
      if (p.actual === undefined)
        return `${CHIPMUNK_INFO} has no ${p.tag}; the request says "${p.expected}".`;
      return `${CHIPMUNK_INFO} gives ${p.tag} "${p.actual}", but the request says "${p.expected}".`;
    },
  },
  'chipmunk-metadata-incomplete': {
    describe: (p) =>
      `${CHIPMUNK_INFO} has ${p.present.join(', ')} but not ${p.missing.join(', ')}; the Metadata-URL, Metadata-Type and Metadata-Tagfile tags come all together or not at all.`,
  },
  'chipmunk-metadata-tagfile-missing': {
    describe: (p) =>
      p.inPayload
        ? `Metadata-Tagfile names ${p.path}, a payload file; it must name a tag file outside data/.`
        : `Metadata-Tagfile names ${p.path}, which is not a tag file in the bag.`,
  },
  'profile-unreadable': {
    describe: (p) =>
      `The bag-info profile of content type "${p.contentType}" could not be read (${p.detail}); the repository's configuration needs fixing.`,
  },
  'profile-invalid': {
    describe: (p) =>
      `The bag-info profile of content type "${p.contentType}" is not valid (${p.detail}); the repository's configuration needs fixing.`,
  },
  'profile-tag-missing': {
    describe: (p) => `bag-info.txt has no ${p.tag}, which this content type requires.`,
  },
  'profile-value-not-allowed': {
    describe: (p) =>
      `bag-info.txt gives ${p.tag} "${p.value}", which is not one of the allowed values (${p.allowed.map((v) => `"${v}"`).join(', ')}).`,
  },
  'validator-failed': {
    describe: (p) => {
      const how =
        p.exitCode !== null ? `exited with status ${p.exitCode}` : `was killed by ${p.signal ?? 'a signal'}`;
      return `The content validator for "${p.contentType}" rejected the bag (it ${how})${p.output === '' ? '.' : `:\n${p.output}`}`;
    },
  },
  'validator-timeout': {
    describe: (p) =>
      `The content validator for "${p.contentType}" did not finish within ${Math.round(p.timeoutMs / 1000)} s and was stopped.`,
  },
  'validator-unavailable': {
    describe: (p) =>
      `The content validator for "${p.contentType}" (${p.command}) could not be started (${p.detail}); the repository's configuration needs fixing.`,
  },
});

/** Every code these checks can report, with its severity (for documentation and tests). */
export const CHIPMUNK_PROBLEM_CODES = CHIPMUNK_PROBLEMS.CODES;

/** Attach severity and sentence to a problem value. */
export const chipmunkProblem = CHIPMUNK_PROBLEMS.make;

/** The code of a system error, or the message of another one: for a problem's detail. */
export function errorDetail(err: unknown): string {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' ? code : err instanceof Error ? err.message : String(err);
}
