/**
 * What was hashed of an upload's files as they landed (ingest/landed-hasher.ts): per file its
 * identity when read (size, mtime, ctime, inode, device) and its digests. At complete the
 * validation takes a file's digests from here only if the file still has that identity. Keyed by
 * bag_id and the file's path in the upload; all of a bag's records go when its ingest is DONE
 * (a FAILED one keeps them: the upload goes back to the depositor unchanged).
 *
 * A record of a file not flushed to disk (`flushed` not true) is good only in the machine's boot
 * that made it (`bootId`): until written back, the bytes it describes are the page cache's, and a
 * power loss before that can leave a file whose identity is as recorded but whose bytes are not
 * (a filesystem that does not write data before the metadata that points at it). Such a record
 * from another boot is not used, and the file is read at complete.
 */
import { readFileSync } from 'node:fs';
import type { Database, RootDatabase } from 'lmdb';
import type { Algorithm } from '../fixity/index.js';
import { MAX_PATH_BYTES } from './keys.js';
import type { Transactor } from './transaction.js';

/** A file as it was when hashed: any write, touch, rename or replacement changes one of these. */
export interface FileIdentity {
  size: number;
  /** Nanoseconds since the epoch, as decimal strings (bigint stat). */
  mtimeNs: string;
  ctimeNs: string;
  ino: string;
  dev: string;
}

export interface LandedHash extends FileIdentity {
  crc32: string;
  digests: Partial<Record<Algorithm, string>>;
  /**
   * True when the file was flushed to disk before this was recorded (a large file); otherwise
   * the store flushes it at complete. Records written before this field existed lack it and a
   * boot: they are not used, and their files are read at complete (safe, only slower).
   */
  flushed?: boolean;
  /** The machine's boot (/proc/sys/kernel/random/boot_id) when a file not flushed was recorded. */
  bootId?: string;
}

/** This boot of the machine; undefined where it cannot be read (then no unflushed record is used). */
const THIS_BOOT = ((): string | undefined => {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'latin1').trim();
  } catch {
    return undefined;
  }
})();

/**
 * Whether a record may be used in the boot `bootId` (undefined: unknown): its file was flushed,
 * or it was made in that boot.
 */
export function goodInBoot(record: LandedHash, bootId: string | undefined): boolean {
  return record.flushed === true || (bootId !== undefined && record.bootId === bootId);
}

export class LandedHashStore {
  private readonly records: Database<LandedHash, [string, string]>;

  constructor(
    root: RootDatabase,
    private readonly catalog: Transactor,
  ) {
    this.records = root.openDB({ name: 'landedHashes' });
  }

  /** Whether a record of this file can be kept at all (its key within the catalog's limit). */
  fits(bagId: string, path: string): boolean {
    return Buffer.byteLength(bagId) + Buffer.byteLength(path) <= MAX_PATH_BYTES;
  }

  /** The file's record, if there is one that may be used now (`goodInBoot`). */
  get(bagId: string, path: string): LandedHash | undefined {
    const record = this.fits(bagId, path) ? this.records.get([bagId, path]) : undefined;
    return record !== undefined && goodInBoot(record, THIS_BOOT) ? record : undefined;
  }

  /**
   * Several records in one transaction (one commit for a batch of small files); those of files
   * not flushed are stamped with this boot.
   */
  putAll(records: ReadonlyArray<{ bagId: string; path: string; hash: LandedHash }>): void {
    this.catalog.transaction(() => {
      for (const { bagId, path, hash } of records) {
        if (!this.fits(bagId, path)) continue;
        const stamped =
          hash.flushed === true || THIS_BOOT === undefined ? hash : { ...hash, bootId: THIS_BOOT };
        this.records.putSync([bagId, path], stamped);
      }
    });
  }

  /** The paths of the bag's records whose files were not flushed when recorded. */
  unflushed(bagId: string): string[] {
    const paths: string[] = [];
    for (const { key, value } of this.records.getRange({ start: [bagId], end: [bagId, '\uffff'] }))
      if (value.flushed !== true) paths.push(key[1]);
    return paths;
  }

  /** Drops every record of the bag; joins the caller's transaction (an ingest's last). */
  clearPackage(bagId: string): number {
    return this.catalog.transaction(() => {
      const keys = [...this.records.getKeys({ start: [bagId], end: [bagId, '\uffff'] })];
      for (const key of keys) this.records.removeSync(key);
      return keys.length;
    });
  }

  /** How many records the bag has (tests, checks). */
  count(bagId: string): number {
    return this.records.getKeysCount({ start: [bagId], end: [bagId, '\uffff'] });
  }
}
