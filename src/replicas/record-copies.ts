/**
 * The preservd record on the replicas (STORAGE.md: every root carries it, so that a rebuild works
 * from any one): the root's repository record on every replica, and a package's `logs/` files
 * on each replica whose copy of the package is verified (a replica never gets logs for an object
 * it lacks; the `replication` event that verifies a copy marks the record behind, so the logs
 * follow the copy). These are the only files a target replaces outside a repair: each is written
 * whole (dir: temporary name and rename; S3: one PUT) and read back.
 */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { objectKey } from './keys.js';
import { ReplicaDown, type ReplicaTarget } from './target.js';

/** One file of the record: its path in the object (`logs/...`) or in the root. */
export interface RecordFile {
  path: string;
  bytes: Buffer;
}

/**
 * Writes the files to each target (`bagId` undefined: the root's own files); resolves with the
 * names of the targets that could not take them now (down, or not reading back), to be tried again.
 */
export async function writeRecordToReplicas(
  targets: readonly ReplicaTarget[],
  bagId: string | undefined,
  files: readonly RecordFile[],
  signal?: AbortSignal,
): Promise<string[]> {
  const behind: string[] = [];
  for (const target of targets) {
    try {
      for (const file of files) {
        const key = bagId === undefined ? file.path : objectKey(bagId, file.path);
        const expected = {
          size: file.bytes.length,
          sha256: createHash('sha256').update(file.bytes).digest('hex'),
        };
        if ((await target.readBack(key, expected, { signal })).kind === 'match') continue;
        await target.write(key, Readable.from([file.bytes]), expected, { replace: true, signal });
        const back = await target.readBack(key, expected, { signal });
        if (back.kind !== 'match') throw new Error(`${key} does not read back as written (${back.kind})`);
      }
    } catch (err) {
      if (signal?.aborted === true) throw err;
      behind.push(`${target.name}: ${err instanceof ReplicaDown ? err.reason : (err as Error).message}`);
    }
  }
  return behind;
}
