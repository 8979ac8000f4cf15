/**
 * The verdict on an upload, the same for the ingest and for `preservd validate`: the BagIt
 * validation, then, for a known request, chipmunk's checks (chipmunk-info.txt, the content
 * type's bag-info profile and external validator), then the repository's own limits.
 *
 * It reads the bag and runs the validator; it moves nothing and records nothing.
 */
import { validateBag, type BagReport, type FileHasher } from '../bagit/index.js';
import { MAX_PATH_BYTES } from '../catalog/keys.js';
import { errorsOf, type StoredProblem } from '../catalog/types.js';
import { checkChipmunk, type ContentTypeRules, type ExpectedRequest } from './chipmunk/index.js';
import { ingestProblem } from './problems.js';

export interface UploadCheckOptions {
  hasher: FileHasher;
  /** The request the bag must match; without it only BagIt and the repository's limits apply. */
  request?: ExpectedRequest | undefined;
  /** The request's content type's rules (from the configuration). */
  rules?: ContentTypeRules | undefined;
  signal?: AbortSignal | undefined;
  /** A CRC-32 of every file in the report (default true: the ingest keeps it for the zip download). */
  crc32?: boolean | undefined;
}

/** The verdict: the validation report, and every problem (the report's, then the later checks'). */
export interface UploadVerdict {
  report: BagReport;
  problems: StoredProblem[];
  /** No problem is an error. */
  valid: boolean;
}

export async function checkUpload(dir: string, options: UploadCheckOptions): Promise<UploadVerdict> {
  const { hasher, request, rules, signal, crc32 = true } = options;
  const report = await validateBag(dir, { hasher, alsoDigest: ['sha256'], signal, crc32 });
  const problems: StoredProblem[] = [...report.problems];
  // With nothing there, BagIt's problems say enough.
  if (report.files.length > 0) {
    if (request !== undefined)
      problems.push(...(await checkChipmunk(dir, report, request, rules, { signal })));
    problems.push(...pathsTooLong(report));
  }
  return { report, problems, valid: errorsOf(problems).length === 0 };
}

/** The repository's own limit, beyond BagIt's: a path the catalog cannot key (MAX_PATH_BYTES). */
function pathsTooLong(report: BagReport): StoredProblem[] {
  return report.files
    .filter((f) => Buffer.byteLength(f.path) > MAX_PATH_BYTES)
    .map((f) => ingestProblem({ code: 'path-too-long', path: f.path, bytes: Buffer.byteLength(f.path) }));
}
