/**
 * Replicas: copies of every stored package besides the primary in `storage/`, in S3-compatible
 * buckets or folders on other filesystems, made and verified by the replicator, checked by
 * audits and used to repair. `targetsFor` builds a target per configured replica; `checkTargets`
 * is the start-up check that refuses a bucket or folder that is missing or cannot be written.
 */
import type { Readable } from 'node:stream';
import type { ReplicaConfig } from '../config/replicas.js';
import { DirTarget } from './dir.js';
import { contentKey } from './keys.js';
import { prepareReplicaRoot } from './root.js';
import type { ReplicaTarget } from './target.js';

export { copyPackage } from './copy.js';
export { contentKey, objectKey, objectPrefix } from './keys.js';
export { prepareReplicaRoot, rootFiles } from './root.js';
export { writeRecordToReplicas, type RecordFile } from './record-copies.js';
export { PRIMARY, Remover } from './removals.js';
export { restoreLostObjects } from './restore-primary.js';
export { REPLICATION_PROBLEM_CODES } from './problems.js';
export { Repairer } from './repair.js';
export { Replicator, REPLICATION_EXECUTOR } from './replicator.js';
export { summarizeReplicas } from './summary.js';
export { ReplicaDown, type ReplicaTarget } from './target.js';

export async function targetsFor(
  replicas: readonly ReplicaConfig[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<ReplicaTarget[]> {
  // The S3 client is loaded only where a bucket is configured: ~26 MB of the daemon's RSS.
  const s3 = replicas.some((r) => r.kind === 's3') ? await import('./s3.js') : undefined;
  return replicas.map((r) => (r.kind === 's3' ? new s3!.S3Target(r, env) : new DirTarget(r)));
}

/**
 * Every target's start-up check, then its OCFL root files (written when first used, before any
 * object), all targets together; rejects with every problem found, one per line.
 */
export async function checkTargets(targets: readonly ReplicaTarget[]): Promise<void> {
  const results = await Promise.allSettled(
    targets.map(async (t) => {
      const signal = AbortSignal.timeout(30_000);
      await t.check(signal);
      await prepareReplicaRoot(t, signal);
    }),
  );
  const problems = results.flatMap((r) => (r.status === 'rejected' ? [(r.reason as Error).message] : []));
  if (problems.length > 0) throw new Error(`a replica cannot be used:\n  ${problems.join('\n  ')}`);
}

/**
 * A file's bytes from the first replica whose copy of the package is verified and has it; for
 * downloads when the primary cannot be read.
 */
export async function openFromReplica(
  targets: readonly ReplicaTarget[],
  verified: (replica: string) => boolean,
  bagId: string,
  file: { path: string; contentPath?: string },
  range: { start: number; end: number },
): Promise<Readable | undefined> {
  for (const target of targets) {
    if (!verified(target.name)) continue;
    try {
      const stream = await target.open(contentKey(bagId, file), range);
      if (stream !== undefined) return stream;
    } catch {
      // this replica cannot serve it now; try the next
    }
  }
  return undefined;
}
