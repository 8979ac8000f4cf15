/**
 * What the ingest itself can fail on, beside the bag's own problems (bagit) and chipmunk's
 * checks: typed values, the table of their codes, the one function that makes each a sentence.
 * All are errors.
 */
import { MAX_PATH_BYTES } from '../catalog/keys.js';
import type { StoredProblem } from '../catalog/types.js';

export type IngestProblemInit =
  | { code: 'upload-missing'; bagId: string }
  | { code: 'upload-empty'; bagId: string }
  | { code: 'upload-still-writing'; bagId: string; waitedMs: number }
  | { code: 'path-too-long'; path: string; bytes: number }
  | { code: 'disk-full'; bagId: string }
  | { code: 'internal-error' }
  | { code: 'already-stored'; bagId: string }
  | { code: 'request-missing'; bagId: string };

export type IngestProblemCode = IngestProblemInit['code'];

/** Every code the ingest can report, with its severity (for documentation and tests). */
export const INGEST_PROBLEM_CODES: Readonly<Record<IngestProblemCode, 'error'>> = {
  'upload-missing': 'error',
  'upload-empty': 'error',
  'upload-still-writing': 'error',
  'path-too-long': 'error',
  'disk-full': 'error',
  'internal-error': 'error',
  'already-stored': 'error',
  'request-missing': 'error',
};

function duration(ms: number): string {
  return ms < 120_000 ? `${Math.round(ms / 1000)} seconds` : `${Math.round(ms / 60_000)} minutes`;
}

/** The one place an ingest problem becomes a sentence. */
function describeIngestProblem(p: IngestProblemInit): string {
  switch (p.code) {
    case 'upload-missing':
      return `nothing was uploaded for ${p.bagId}: rsync the bag to its upload_link, then complete again`;
    case 'upload-empty':
      return `the upload of ${p.bagId} is empty: rsync the bag's contents to its upload_link`;
    case 'upload-still-writing':
      return `the upload of ${p.bagId} was still being written ${duration(p.waitedMs)} after complete (an rsync still running into it); nothing was ingested and its upload_link is open again: let the upload finish, then complete again`;
    case 'path-too-long':
      return `${p.path.slice(0, 80)}… is ${p.bytes} bytes long; this repository stores paths of at most ${MAX_PATH_BYTES} bytes (UTF-8): shorten it.`;
    case 'disk-full':
      return `the repository ran out of disk space while ingesting ${p.bagId}; nothing was stored and the upload is kept: complete the request again later`;
    case 'internal-error':
      return 'the ingest failed because of a server error; the operator can find it in the log';
    case 'already-stored':
      return `package ${p.bagId} is already stored`;
    case 'request-missing':
      return `no request ${p.bagId} in the catalog`;
  }
}

/** The problem as the catalog stores it. */
export function ingestProblem(init: IngestProblemInit): StoredProblem {
  const problem: StoredProblem = { code: init.code, message: describeIngestProblem(init), severity: INGEST_PROBLEM_CODES[init.code] };
  if ('path' in init) problem.path = init.path;
  return problem;
}
