/**
 * What chipmunk's checks can find wrong with a bag, as typed values; the table of their codes;
 * the one function that makes a sentence of each. All are errors.
 */
import type { StoredProblem } from '../../catalog/types.js';

export const CHIPMUNK_INFO = 'chipmunk-info.txt';
export const IDENTITY_TAGS = ['External-Identifier', 'Bag-ID', 'Chipmunk-Content-Type'] as const;
export const METADATA_TAGS = ['Metadata-URL', 'Metadata-Type', 'Metadata-Tagfile'] as const;
export type IdentityTag = (typeof IDENTITY_TAGS)[number];

export type ChipmunkProblemInit =
  | { code: 'chipmunk-info-mismatch'; path: typeof CHIPMUNK_INFO; tag: IdentityTag; expected: string; actual?: string; fileMissing: boolean }
  | { code: 'chipmunk-metadata-incomplete'; path: typeof CHIPMUNK_INFO; present: string[]; missing: string[] }
  | { code: 'chipmunk-metadata-tagfile-missing'; path: string; inPayload: boolean }
  | { code: 'profile-unreadable'; contentType: string; detail: string }
  | { code: 'profile-invalid'; contentType: string; detail: string }
  | { code: 'profile-tag-missing'; path: 'bag-info.txt'; tag: string }
  | { code: 'profile-value-not-allowed'; path: 'bag-info.txt'; tag: string; value: string; allowed: string[] }
  | { code: 'validator-failed'; contentType: string; exitCode: number | null; signal: string | null; output: string }
  | { code: 'validator-timeout'; contentType: string; timeoutMs: number }
  | { code: 'validator-unavailable'; contentType: string; command: string; detail: string };

type ChipmunkProblemCode = ChipmunkProblemInit['code'];

export type ChipmunkProblem = ChipmunkProblemInit & { severity: 'error'; message: string } & StoredProblem;

/** Every code these checks can report, with its severity (for documentation and tests). */
export const CHIPMUNK_PROBLEM_CODES: Readonly<Record<ChipmunkProblemCode, 'error'>> = {
  'chipmunk-info-mismatch': 'error',
  'chipmunk-metadata-incomplete': 'error',
  'chipmunk-metadata-tagfile-missing': 'error',
  'profile-unreadable': 'error',
  'profile-invalid': 'error',
  'profile-tag-missing': 'error',
  'profile-value-not-allowed': 'error',
  'validator-failed': 'error',
  'validator-timeout': 'error',
  'validator-unavailable': 'error',
};

/** The one place a chipmunk problem becomes a sentence. */
function describeChipmunkProblem(p: ChipmunkProblemInit): string {
  switch (p.code) {
    case 'chipmunk-info-mismatch':
      if (p.fileMissing) return `${CHIPMUNK_INFO} is missing, so ${p.tag} cannot match the request's "${p.expected}".`;
      if (p.actual === undefined) return `${CHIPMUNK_INFO} has no ${p.tag}; the request says "${p.expected}".`;
      return `${CHIPMUNK_INFO} gives ${p.tag} "${p.actual}", but the request says "${p.expected}".`;
    case 'chipmunk-metadata-incomplete':
      return `${CHIPMUNK_INFO} has ${p.present.join(', ')} but not ${p.missing.join(', ')}; the Metadata-URL, Metadata-Type and Metadata-Tagfile tags come all together or not at all.`;
    case 'chipmunk-metadata-tagfile-missing':
      return p.inPayload
        ? `Metadata-Tagfile names ${p.path}, a payload file; it must name a tag file outside data/.`
        : `Metadata-Tagfile names ${p.path}, which is not a tag file in the bag.`;
    case 'profile-unreadable':
      return `The bag-info profile of content type "${p.contentType}" could not be read (${p.detail}); the repository's configuration needs fixing.`;
    case 'profile-invalid':
      return `The bag-info profile of content type "${p.contentType}" is not valid (${p.detail}); the repository's configuration needs fixing.`;
    case 'profile-tag-missing':
      return `bag-info.txt has no ${p.tag}, which this content type requires.`;
    case 'profile-value-not-allowed':
      return `bag-info.txt gives ${p.tag} "${p.value}", which is not one of the allowed values (${p.allowed.map((v) => `"${v}"`).join(', ')}).`;
    case 'validator-failed': {
      const how = p.exitCode !== null ? `exited with status ${p.exitCode}` : `was killed by ${p.signal ?? 'a signal'}`;
      return `The content validator for "${p.contentType}" rejected the bag (it ${how})${p.output === '' ? '.' : `:\n${p.output}`}`;
    }
    case 'validator-timeout':
      return `The content validator for "${p.contentType}" did not finish within ${Math.round(p.timeoutMs / 1000)} s and was stopped.`;
    case 'validator-unavailable':
      return `The content validator for "${p.contentType}" (${p.command}) could not be started (${p.detail}); the repository's configuration needs fixing.`;
  }
}

/** Attach severity and sentence to a problem value. */
export function chipmunkProblem(init: ChipmunkProblemInit): ChipmunkProblem {
  return { ...init, severity: CHIPMUNK_PROBLEM_CODES[init.code], message: describeChipmunkProblem(init) };
}

/** The code of a system error, or the message of another one: for a problem's detail. */
export function errorDetail(err: unknown): string {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' ? code : err instanceof Error ? err.message : String(err);
}
