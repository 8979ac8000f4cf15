/**
 * fixity: hashing files for a preservation repository. A pool of worker threads (one per core by
 * default) reads each file once, in large reads into a reused buffer, and feeds every requested
 * digest (md5, sha1, sha224, sha256, sha384, sha512 via node:crypto; CRC-32 via zlib) from that
 * one read. Ingest jobs go before queued audit jobs; audit reads can be rate-limited; huge files
 * can be hashed resumably across restarts. Symbolic links, FIFOs, devices and sockets are
 * refused, never followed or blocked on (this concerns the file itself: O_NOFOLLOW does not
 * look at the directories on the way, which the caller vouches for).
 *
 * It knows nothing of bags, manifests or the catalog, and depends on nothing of preservd's.
 */
export { ALGORITHMS, ALGORITHM_STRENGTH, DIGEST_LENGTH, type Algorithm } from './algorithms.js';
export { NativeDigester } from './digesters.js';
export { FixityPool, createHasher } from './pool.js';
export { HelpingHasher } from './helping-hasher.js';
export { entriesOf, errorCode, kindOf } from './types.js';
export {
  AbortError,
  FixityError,
  NOT_REGULAR_FILE,
  POOL_CLOSED,
  WORKER_FAILED,
  deserializeError,
  serializeError,
  type SerializedError,
} from './errors.js';
export { workerExecArgv } from './worker-options.js';
export type {
  EntryKind,
  FileDigests,
  FixityPoolOptions,
  FixityStats,
  FolderEntries,
  HashOptions,
  Priority,
  ResumeStore,
  Tree,
} from './types.js';
