/**
 * The verdict on an upload, the same for the ingest and for `preservd validate`: the BagIt
 * validation, then, for a known request, chipmunk's checks (chipmunk-info.txt, the content
 * type's bag-info profile and external validator), then the repository's own limits.
 *
 * It reads the bag and runs the validator; it moves nothing and records nothing.
 */
import { validateBag, type BagReport, type FileHasher } from '../bagit/index.js';
import { MAX_PATH_BYTES } from '../catalog/keys.js';
import type { Problem } from '../catalog/types.js';
import { checkChipmunk, type ContentTypeRules, type ExpectedRequest } from './chipmunk.js';

export interface UploadCheckOptions {
  hasher: FileHasher;
  /** The request the bag must match; without it only BagIt and the repository's limits apply. */
  request?: ExpectedRequest;
  /** The request's content type's rules (from the configuration). */
  rules?: ContentTypeRules;
  signal?: AbortSignal;
}

/** The validation report, its problems followed by those of the later checks. */
export async function checkUpload(dir: string, options: UploadCheckOptions): Promise<BagReport> {
  const { hasher, request, rules, signal } = options;
  const report = await validateBag(dir, { hasher, alsoDigest: ['sha256'], ...(signal === undefined ? {} : { signal }) });
  const later: Problem[] = [];
  if (report.files.length === 0) return report; // nothing there: BagIt's problems say enough
  if (request !== undefined) later.push(...(await checkChipmunk(dir, report, request, rules, signal === undefined ? {} : { signal })));
  later.push(...pathsTooLong(report));
  return { ...report, problems: [...report.problems, ...later] };
}

/** The repository's own limit, beyond BagIt's: a path the catalog cannot key (MAX_PATH_BYTES). */
function pathsTooLong(report: BagReport): Problem[] {
  return report.files
    .filter((f) => Buffer.byteLength(f.path) > MAX_PATH_BYTES)
    .map((f) => ({
      code: 'path-too-long',
      path: f.path,
      message: `${f.path.slice(0, 80)}… is ${Buffer.byteLength(f.path)} bytes long; this repository stores paths of at most ${MAX_PATH_BYTES} bytes (UTF-8): shorten it.`,
      severity: 'error' as const,
    }));
}
