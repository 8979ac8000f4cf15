/**
 * A replica's half of `preservd migrate` (STORAGE.md, Migration), after the primary's: the
 * replica's root files (the declaration first, beside the old keys), then per package that has a
 * copy there, its OCFL object written from the primary's migrated object under the new keys and
 * read back (replicas/copy.ts, as the replicator copies), the catalog's bookkeeping of the copy
 * moved to the new paths, and only then the old `ab/cd/ef/<bag_id>/` keys deleted. A failed copy
 * (the replicator's or repair's to redo) is not copied: its old keys go and its bookkeeping moves.
 * Under S3 Object Lock an old key whose retention has not ended stays (counted, with its date).
 * Run again, a package whose old keys are gone is done; one with old keys left is copied (found
 * there and read back) and cleared again.
 */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import type { Catalog } from '../catalog/catalog.js';
import { failpoint } from '../failpoints.js';
import { contentPathOf } from '../ocfl/layout.js';
import { copyPackage, prepareReplicaRoot, rootFiles, type ReplicaTarget } from '../replicas/index.js';
import type { Storage } from '../storage/storage.js';
import { oldStoragePath } from './old-layout.js';
import type { Skipped } from './primary.js';

export interface ReplicaOutcome {
  replica: string;
  migrated: number;
  removed: number;
  /** Old keys kept by Object Lock retention, and the latest date one is retained until. */
  retained: number;
  retainedUntil?: Date;
  skipped: Skipped[];
}

/** The write check of earlier releases kept its object under this prefix (S3). */
const OLD_WRITE_CHECK = '.preservd/';
/** Files copied at once per package. */
const LANES = 4;

export async function migrateReplica(
  target: ReplicaTarget,
  storage: Storage,
  catalog: Catalog,
  bagIds: readonly string[],
  onProgress: (done: number) => void,
): Promise<ReplicaOutcome> {
  const out: ReplicaOutcome = { replica: target.name, migrated: 0, removed: 0, retained: 0, skipped: [] };
  const signal = new AbortController().signal;
  await target.check(signal);
  const [declaration] = rootFiles();
  const bytes = Buffer.from(declaration!.text);
  const expected = { size: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') };
  // The declaration first, beside the old keys: prepareReplicaRoot then completes the root.
  if ((await target.readBack(declaration!.path, expected, { signal })).kind === 'missing')
    await target.write(declaration!.path, Readable.from([bytes]), expected, { replace: false, signal });
  await prepareReplicaRoot(target, signal);
  failpoint('migrate:replica-root');
  let done = 0;
  for (const bagId of bagIds) {
    const why = await migrateCopy(target, storage, catalog, bagId, out, signal);
    if (why !== undefined) out.skipped.push({ bagId, why: `replica ${target.name}: ${why}` });
    onProgress(++done);
  }
  await removeOldKeys(target, OLD_WRITE_CHECK, out, signal);
  return out;
}

/** One package's copy; why it could not be migrated, if so. */
async function migrateCopy(
  target: ReplicaTarget,
  storage: Storage,
  catalog: Catalog,
  bagId: string,
  out: ReplicaOutcome,
  signal: AbortSignal,
): Promise<string | undefined> {
  const copy = catalog.replication.get(bagId, target.name);
  const oldPrefix = `${oldStoragePath(bagId)}/`;
  const oldKeys: string[] = [];
  for await (const { key } of target.list(oldPrefix, signal)) oldKeys.push(key.replace(/^\/+/, ''));
  if (copy === undefined || oldKeys.length === 0) return undefined;
  const moved = (path: string) => contentPathOf(1, path);
  if (copy.status === 'failed') {
    catalog.replication.movePaths(bagId, target.name, [], moved);
  } else {
    const files = catalog.files.list(bagId);
    const verified: string[] = [];
    const outcome = await copyPackage(target, bagId, storage, files, {
      skip: new Set(),
      replaceable: new Set(),
      lanes: () => LANES,
      onVerified: (path) => verified.push(path),
      signal,
    });
    if (outcome.kind === 'failed') {
      const p = outcome.problem;
      return `its OCFL object could not be written and verified (${p.code} at ${p.path}: ${p.detail}); its old keys were kept`;
    }
    failpoint('migrate:replica-copied');
    // A copy still pending keeps what is verified, now under the object's paths; a verified one needs none.
    catalog.replication.movePaths(bagId, target.name, copy.status === 'pending' ? verified : [], moved);
  }
  await removeOldKeys(target, oldPrefix, out, signal, oldKeys);
  out.migrated++;
  return undefined;
}

async function removeOldKeys(
  target: ReplicaTarget,
  prefix: string,
  out: ReplicaOutcome,
  signal: AbortSignal,
  known?: readonly string[],
): Promise<void> {
  let keys = known;
  if (keys === undefined) {
    const listed: string[] = [];
    for await (const { key } of target.list(prefix, signal)) listed.push(key.replace(/^\/+/, ''));
    keys = listed;
  }
  for (const key of keys) {
    const { retainedUntil } = await target.removeOld(key, signal);
    failpoint('migrate:old-key-removed');
    if (retainedUntil === undefined) out.removed++;
    else {
      out.retained++;
      if (out.retainedUntil === undefined || retainedUntil > out.retainedUntil)
        out.retainedUntil = retainedUntil;
    }
  }
}
