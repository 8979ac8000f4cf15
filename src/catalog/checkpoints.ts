/**
 * Checkpoints of huge files being hashed during an ingest: how far the fixity pool had got in a
 * file and its hashers' states, so that after a crash the ingest goes on from there instead of
 * reading the whole file again. Keyed by bag_id and the file's path in the bag; the bytes are
 * the pool's own (opaque here).
 *
 * Each save is a transaction of its own: it must survive the crash that may follow at once. A
 * file's checkpoint goes when the file is hashed; all of a bag's go in the transaction that ends
 * its ingest (DONE or FAILED), so none outlives the ingest it belongs to.
 */
import type { Database, RootDatabase } from 'lmdb';
import { MAX_PATH_BYTES } from './keys.js';
import type { Transactor } from './transaction.js';
import type { HashCheckpoint } from './types.js';

export class CheckpointStore {
  private readonly checkpoints: Database<Buffer, [string, string]>;

  constructor(
    root: RootDatabase,
    private readonly catalog: Transactor,
  ) {
    this.checkpoints = root.openDB({ name: 'hashCheckpoints', encoding: 'binary' });
  }

  /**
   * Whether a checkpoint of this file can be kept at all: its key, the bag_id and the path, must
   * stay within the catalog's key limit (a path of ~1.9 kB or more cannot).
   */
  fits(bagId: string, path: string): boolean {
    return Buffer.byteLength(bagId) + Buffer.byteLength(path) <= MAX_PATH_BYTES;
  }

  get(bagId: string, path: string): Uint8Array | undefined {
    const state = this.checkpoints.get([bagId, path]);
    // A copy: the pool posts it to a worker thread, and lmdb may reuse its buffer.
    return state === undefined ? undefined : Uint8Array.from(state);
  }

  save(bagId: string, path: string, state: Uint8Array): void {
    this.catalog.transaction(() => {
      this.checkpoints.putSync([bagId, path], Buffer.from(state));
    });
  }

  /** The file hashed completely: its checkpoint must not let a later run skip re-reading it. */
  remove(bagId: string, path: string): void {
    this.catalog.transaction(() => {
      this.checkpoints.removeSync([bagId, path]);
    });
  }

  /** Drops every checkpoint of the bag; joins the caller's transaction (an ingest's last). */
  clearPackage(bagId: string): number {
    return this.catalog.transaction(() => {
      const keys = [...this.checkpoints.getKeys({ start: [bagId], end: [bagId, '\uffff'] })];
      for (const key of keys) this.checkpoints.removeSync(key);
      return keys.length;
    });
  }

  /** Every checkpoint kept, in bag_id and path order (checks and tests). */
  *list(): Generator<HashCheckpoint> {
    for (const { key, value } of this.checkpoints.getRange())
      yield { bagId: key[0], path: key[1], bytes: value.length };
  }
}
