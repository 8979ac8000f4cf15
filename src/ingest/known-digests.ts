/**
 * The hasher the validation gets at complete when files were hashed as they landed
 * (landed-hasher.ts): a file whose identity (size, mtime, ctime, inode, device) is still the one
 * recorded when it was read gets the recorded digests, without a read; any other file goes to
 * the ingest's hasher as before. The validator cannot tell the difference: the digests are the
 * file's, and every step (manifests, oxum, completeness) runs as in a full validation.
 */
import type { FileHasher } from '../bagit/index.js';
import type { LandedHash } from '../catalog/landed-hashes.js';
import type { Algorithm } from '../fixity/index.js';
import { relativeUnder } from '../fs/paths.js';
import { identityOf, sameIdentity } from './file-identity.js';
import type { LandedHasher } from './landed-hasher.js';

type Result = Awaited<ReturnType<FileHasher['hashFile']>>;
type Opts = Parameters<FileHasher['hashFile']>[2];

export class KnownDigestsHasher implements FileHasher {
  constructor(
    private readonly inner: Required<FileHasher>,
    private readonly landed: LandedHasher,
    private readonly bag: { bagId: string; dir: string },
    /**
     * Receives the path of each file answered from a record that says it was flushed as it
     * landed (the landed hasher flushes large files before it records them) and unchanged
     * since, so the store need not flush it.
     */
    private readonly onDisk?: Set<string>,
  ) {}

  async hashFiles(
    files: Parameters<Required<FileHasher>['hashFiles']>[0],
    opts?: Parameters<Required<FileHasher>['hashFiles']>[1],
  ): Promise<Array<Result | Error>> {
    const known = await Promise.all(files.map((f) => this.known(f.path, f.algorithms, opts?.crc32)));
    const rest = files.filter((_, i) => known[i] === undefined);
    const read = rest.length > 0 ? await this.inner.hashFiles(rest, opts) : [];
    let next = 0;
    return known.map((k) => k ?? read[next++]!);
  }

  async hashFile(absPath: string, algorithms: Algorithm[], opts?: Opts): Promise<Result> {
    return (
      (await this.known(absPath, algorithms, opts?.crc32)) ?? this.inner.hashFile(absPath, algorithms, opts)
    );
  }

  /** The recorded digests if the file is as it was when read and they cover what is asked. */
  private async known(
    absPath: string,
    algorithms: Algorithm[],
    crc32: boolean | undefined,
  ): Promise<Result | undefined> {
    const path = relativeUnder(this.bag.dir, absPath);
    const record = await this.landed.claim(this.bag.bagId, path);
    const stats = this.landed.stats;
    if (record === undefined || !covers(record, algorithms, crc32)) {
      stats.unreported++;
      return undefined;
    }
    const now = identityOf(absPath);
    if (now === undefined || !sameIdentity(now, record)) {
      stats.rehashed++;
      return undefined;
    }
    stats.known++;
    if (record.flushed === true) this.onDisk?.add(path);
    const digests: Partial<Record<Algorithm, string>> = {};
    for (const a of algorithms) digests[a] = record.digests[a]!;
    return crc32 === true
      ? { size: record.size, crc32: record.crc32, digests }
      : { size: record.size, digests };
  }
}

function covers(record: LandedHash, algorithms: Algorithm[], crc32: boolean | undefined): boolean {
  return algorithms.every((a) => record.digests[a] !== undefined) && (crc32 !== true || record.crc32 !== '');
}
