/**
 * The hasher one ingest hands to the BagIt validator: the fixity pool, except that files of at
 * least `ingest.resumeAboveBytes` are hashed resumably, with their checkpoints in the catalog
 * under the bag's id and the file's path in the bag. After a crash the next run of the ingest
 * goes on from a huge file's last checkpoint instead of reading it all again.
 *
 * Only huge files take this path: the resumable hashers (hash-wasm) are several times slower than
 * node:crypto for SHA-2 (docs/performance.md, "Fixity"). Clearing the bag's checkpoints when the
 * ingest ends is the stages' job (they do it in the transaction that ends it).
 */
import { lstat } from 'node:fs/promises';
import { relative, sep } from 'node:path';
import { BATCHED_BELOW, type FileHasher } from '../bagit/index.js';
import type { CheckpointStore } from '../catalog/checkpoints.js';
import type { Algorithm } from '../fixity/index.js';
import { failpoint } from '../failpoints.js';
import type { FileDigests, HashOptions, ResumeStore } from '../fixity/index.js';
import type { Logger } from '../logger.js';

/** What ingest needs of the fixity pool: hashing with the pool's options, resume included. */
export interface ResumableHasher {
  hashFile(absPath: string, algorithms: Algorithm[], opts?: HashOptions): Promise<FileDigests>;
  hashFiles(
    files: ReadonlyArray<{ path: string; algorithms: Algorithm[] }>,
    opts?: Omit<HashOptions, 'resume'>,
  ): Promise<Array<FileDigests | Error>>;
}

const MiB = 1024 * 1024;

/**
 * A checkpoint every quarter of the threshold, at most every 256 MiB: at most that much is read
 * again after a crash, and a checkpoint (one catalog commit) costs little beside reading that much.
 */
function checkpointInterval(resumeAboveBytes: number): number {
  return Math.min(256 * MiB, Math.max(MiB, Math.floor(resumeAboveBytes / 4)));
}

export class CheckpointedHasher implements FileHasher {
  private readonly everyBytes: number;

  constructor(
    private readonly pool: ResumableHasher,
    private readonly checkpoints: CheckpointStore,
    private readonly bag: { bagId: string; dir: string },
    private readonly resumeAboveBytes: number,
    private readonly logger: Logger,
  ) {
    this.everyBytes = checkpointInterval(resumeAboveBytes);
  }

  async hashFile(absPath: string, algorithms: Algorithm[], opts: HashOptions = {}): Promise<FileDigests> {
    if (this.resumeAboveBytes > 0) {
      // A file that cannot be looked at is left to the pool, which reports why.
      const size = await lstat(absPath).then(
        (s) => s.size,
        () => 0,
      );
      if (size >= this.resumeAboveBytes) {
        const path = relative(this.bag.dir, absPath).split(sep).join('/');
        // A path too long for a catalog key is hashed the ordinary way: correct, just not resumable.
        if (this.checkpoints.fits(this.bag.bagId, path))
          return this.pool.hashFile(absPath, algorithms, { ...opts, resume: this.store(path) });
      }
    }
    return this.pool.hashFile(absPath, algorithms, opts);
  }

  /**
   * Small files in one job of the pool's. They are never resumable, unless the threshold is
   * below the validator's batch size: then each goes through `hashFile`, which decides.
   */
  async hashFiles(
    files: ReadonlyArray<{ path: string; algorithms: Algorithm[] }>,
    opts: Omit<HashOptions, 'resume'> = {},
  ): Promise<Array<FileDigests | Error>> {
    if (this.resumeAboveBytes === 0 || this.resumeAboveBytes >= BATCHED_BELOW)
      return this.pool.hashFiles(files, opts);
    return Promise.all(
      files.map(({ path, algorithms }) =>
        this.hashFile(path, algorithms, opts).catch((err: unknown) =>
          err instanceof Error ? err : new Error(String(err)),
        ),
      ),
    );
  }

  /** The checkpoint of one file of the bag (`path` relative to the bag), kept in the catalog. */
  private store(path: string): ResumeStore {
    const { checkpoints, logger } = this;
    const { bagId } = this.bag;
    return {
      everyBytes: this.everyBytes,
      load: async () => checkpoints.get(bagId, path),
      save: async (state) => {
        checkpoints.save(bagId, path, state);
        failpoint('ingest:after-checkpoint');
      },
      clear: async () => checkpoints.remove(bagId, path),
      started: ({ offset, refused }) => {
        if (offset > 0) logger.info({ bagId, path, offset }, 'hashing resumed from a checkpoint');
        else if (refused)
          logger.warn(
            { bagId, path },
            'the checkpoint no longer fits the file (it changed); hashing it from the start',
          );
      },
    };
  }
}
