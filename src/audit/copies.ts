/**
 * Verifying a package's copies on replicas, for audits: every file the catalog records is read
 * back from each replica holding a copy (verified, or found damaged before) at that replica's
 * own rate limit and compared with the catalog's size and sha256; objects under the package's
 * prefix that the catalog does not know are extra. Each finding names its copy. A replica that
 * cannot be read at all is one finding, not one per file.
 *
 * Copies not yet made (pending) are the replicator's business, not an audit's. `auditCopies` is
 * what both kinds of audit (full sweeps and continuous) do with a package's copies: verify them
 * and mark a damaged one so, for repair; repairing is replicas/repair.ts's.
 */
import type { Catalog } from '../catalog/catalog.js';
import type { FileRecord, ReplicaCopy } from '../catalog/types.js';
import { objectKey, packagePrefix, ReplicaDown, type ReplicaTarget } from '../replicas/index.js';
import { byPackageThenPath, findingsDetail, type Finding } from './findings.js';

/** What audits need to check copies: the replicas, their read rates, and the repair to ask for. */
export interface AuditedReplicas {
  targets: readonly ReplicaTarget[];
  bytesPerSec: (replica: string) => number;
  /** Asked to repair a package whose check failed, when `audit.repair` is auto. */
  repair: (bagId: string) => void;
}

/**
 * Findings on the package's replica copies, each naming its copy; a copy found damaged (not
 * merely unreachable) is marked so in the catalog, for repair.
 */
export async function auditCopies(
  catalog: Catalog,
  replicas: AuditedReplicas,
  bagId: string,
  files: readonly FileRecord[],
  signal: AbortSignal,
): Promise<Finding[]> {
  const perCopy = await verifyCopies(bagId, files, replicas.targets, catalog.replication.forPackage(bagId), {
    signal,
    bytesPerSec: replicas.bytesPerSec,
  });
  const findings: Finding[] = [];
  for (const [replica, found] of perCopy) {
    findings.push(...found);
    if (found.length > 0 && !signal.aborted && found.every((f) => f.code !== 'replica-unreachable'))
      catalog.replication.damaged(bagId, replica, findingsDetail(found));
  }
  return findings;
}

interface CopyCheckOptions {
  signal?: AbortSignal | undefined;
  /** Read rate limit of audits of a replica, bytes per second (0: none). */
  bytesPerSec: (replica: string) => number;
}

/** Findings per replica checked (an empty list: the copy is intact). */
async function verifyCopies(
  bagId: string,
  files: readonly FileRecord[],
  targets: readonly ReplicaTarget[],
  copies: readonly ReplicaCopy[],
  opts: CopyCheckOptions,
): Promise<Map<string, Finding[]>> {
  const out = new Map<string, Finding[]>();
  for (const target of targets) {
    const copy = copies.find((c) => c.replica === target.name);
    if (copy === undefined || (copy.status !== 'verified' && copy.damaged !== true)) continue;
    out.set(target.name, await verifyCopy(bagId, files, target, opts));
  }
  return out;
}

async function verifyCopy(
  bagId: string,
  files: readonly FileRecord[],
  target: ReplicaTarget,
  opts: CopyCheckOptions,
): Promise<Finding[]> {
  const copy = target.name;
  const findings: Finding[] = [];
  const recorded = new Set(files.map((f) => objectKey(bagId, f.path)));
  const prefix = packagePrefix(bagId);
  try {
    for await (const object of target.list(prefix, opts.signal)) {
      if (!recorded.has(object.key))
        findings.push({ code: 'file-extra', copy, path: object.key.slice(prefix.length), kind: 'file' });
    }
    for (const file of files) {
      const sha256 = file.digests.sha256;
      if (sha256 === undefined) {
        findings.push({ code: 'digest-not-recorded', copy, path: file.path });
        continue;
      }
      const back = await target.readBack(
        objectKey(bagId, file.path),
        { size: file.size, sha256 },
        { signal: opts.signal, bytesPerSec: opts.bytesPerSec(copy) },
      );
      const path = file.path;
      if (back.kind === 'missing') findings.push({ code: 'file-missing', copy, path });
      else if (back.kind === 'unreadable')
        findings.push({ code: 'file-unreadable', copy, path, reason: back.reason });
      else if (back.kind === 'differs') {
        if (back.size !== file.size)
          findings.push({
            code: 'size-changed',
            copy,
            path,
            expected: String(file.size),
            actual: String(back.size),
          });
        else
          findings.push({
            code: 'file-changed',
            copy,
            path,
            algorithm: 'sha256',
            expected: sha256,
            actual: back.sha256,
          });
      }
    }
  } catch (err) {
    opts.signal?.throwIfAborted();
    if (!(err instanceof ReplicaDown)) throw err;
    return [{ code: 'replica-unreachable', copy, reason: err.reason }];
  }
  return findings.sort(byPackageThenPath);
}
