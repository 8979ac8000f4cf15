/**
 * A pure BagIt (RFC 8493) library: validate a bag directory, read its tag files and manifests.
 * Knows nothing of HTTP, the catalog or chipmunk; hashing is delegated to a FileHasher.
 */
export { validateBag } from './validate.js';
export { BATCHED_BELOW } from './hash-files.js';
export type { BagFile, BagReport, FileHasher, ValidateOptions } from './report.js';
export {
  BAG_PROBLEM_CODES,
  describeProblem,
  makeProblem,
  showPath,
  type BagProblem,
  type BagProblemCode,
  type BagProblemInit,
  type Severity,
  type UnsafePathReason,
} from './problems.js';
export {
  decodeTagBytes,
  parseBagDeclaration,
  parseTagText,
  splitLines,
  tagValue,
  type TagEntry,
} from './tagfile.js';
export { parseManifest, parseManifestFileName, type ManifestEntry } from './manifest.js';
export { parseFetch, type FetchEntry } from './fetch.js';
export { decodeBagPath, isPayloadPath, nonPortableNameReason, unsafePathReason } from './paths.js';
