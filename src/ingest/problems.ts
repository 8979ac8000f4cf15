/**
 * What the ingest itself can fail on, beside the bag's own problems (bagit) and chipmunk's
 * checks: typed values and their table (`defineProblems`), the sentence of each code. All are
 * errors.
 */
import { MAX_PATH_BYTES } from '../catalog/keys.js';
import { defineProblems } from '../problems.js';

type IngestProblemInit =
  | { code: 'upload-missing'; bagId: string }
  | { code: 'upload-empty'; bagId: string }
  | { code: 'upload-still-writing'; bagId: string; waitedMs: number }
  | { code: 'path-too-long'; path: string; bytes: number }
  | { code: 'disk-full'; bagId: string }
  | { code: 'internal-error' }
  | { code: 'already-stored'; bagId: string }
  | { code: 'request-missing'; bagId: string };

function duration(ms: number): string {
  return ms < 120_000 ? `${Math.round(ms / 1000)} seconds` : `${Math.round(ms / 60_000)} minutes`;
}

/** Each code's sentence; all are errors. */
const INGEST_PROBLEMS = defineProblems<IngestProblemInit>({
  'upload-missing': {
    describe: (p) =>
      `nothing was uploaded for ${p.bagId}: rsync the bag to its upload_link, then complete again`,
  },
  'upload-empty': {
    describe: (p) => `the upload of ${p.bagId} is empty: rsync the bag's contents to its upload_link`,
  },
  'upload-still-writing': {
    describe: (p) =>
      `the upload of ${p.bagId} was still being written ${duration(p.waitedMs)} after complete (an rsync still running into it); nothing was ingested; the upload is yours again under a new upload_link (the old one is retired and the transfer through it stopped): rsync the bag to the new link, then complete again`,
  },
  'path-too-long': {
    describe: (p) =>
      `${p.path.slice(0, 80)}… is ${p.bytes} bytes long; this repository stores paths of at most ${MAX_PATH_BYTES} bytes (UTF-8): shorten it.`,
  },
  'disk-full': {
    describe: (p) =>
      `the repository ran out of disk space while ingesting ${p.bagId}; nothing was stored and the upload is kept: complete the request again later`,
  },
  'internal-error': {
    describe: () => 'the ingest failed because of a server error; the operator can find it in the log',
  },
  'already-stored': { describe: (p) => `package ${p.bagId} is already stored` },
  'request-missing': { describe: (p) => `no request ${p.bagId} in the catalog` },
});

/** Every code the ingest can report, with its severity (for documentation and tests). */
export const INGEST_PROBLEM_CODES = INGEST_PROBLEMS.CODES;

/** Attach severity and sentence to a problem value: what the catalog stores, still typed. */
export const ingestProblem = INGEST_PROBLEMS.make;
