/**
 * Verifying a package's copies on replicas, for audits: every file the catalog records is read
 * back from each replica holding a copy (verified, or found damaged before) at that replica's
 * own rate limit and compared with the catalog's size and sha256 at its content path in the
 * replica's OCFL object; the object's declaration, root inventory and sidecar must be there, the
 * sidecar naming the inventory's sha256; other keys under the object's folder that are neither
 * content the catalog knows nor the object's declaration, inventories and logs are extra (a path
 * in `v1/content/` is named by its path in the bag, any other by its path in the object). Each
 * finding names its copy. A replica that
 * cannot be read at all is one finding, not one per file.
 *
 * Copies not yet made (pending) are the replicator's business, not an audit's. `auditCopies` is
 * what both kinds of audit (full sweeps and continuous) do with a package's copies: verify them
 * and mark a damaged one so, for repair; repairing is replicas/repair.ts's.
 */
import type { Catalog } from '../catalog/catalog.js';
import type { FileRecord, ReplicaCopy } from '../catalog/types.js';
import { createHash } from 'node:crypto';
import { INVENTORY, INVENTORY_SIDECAR } from '../ocfl/inventory.js';
import { contentPathOf, OBJECT_DECLARATION } from '../ocfl/layout.js';
import { contentKey, objectKey, objectPrefix, ReplicaDown, type ReplicaTarget } from '../replicas/index.js';
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
  const recorded = new Set(files.map((f) => contentKey(bagId, f)));
  const prefix = objectPrefix(bagId);
  const firstContent = contentPathOf(1, '');
  try {
    for await (const object of target.list(prefix, opts.signal)) {
      const key = object.key.replace(/^\/+/, '');
      const inObject = key.slice(prefix.length);
      if (recorded.has(key) || OBJECT_FILE.test(inObject)) continue;
      const path = inObject.startsWith(firstContent) ? inObject.slice(firstContent.length) : inObject;
      findings.push({ code: 'file-extra', copy, path, kind: 'file' });
    }
    findings.push(...(await checkInventory(target, bagId, opts.signal)));
    for (const file of files) {
      const sha256 = file.digests.sha256;
      if (sha256 === undefined) {
        findings.push({ code: 'digest-not-recorded', copy, path: file.path });
        continue;
      }
      const back = await target.readBack(
        contentKey(bagId, file),
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

/** What an object holds besides content: its declaration, inventories and sidecars, and `logs/`. */
const OBJECT_FILE = /^(0=ocfl_object_1\.1|(v[1-9][0-9]*\/)?inventory\.json(\.sha256)?|logs\/.+)$/;

/** The replica object's declaration, root inventory and sidecar are there, the sidecar naming the inventory's sha256. */
async function checkInventory(
  target: ReplicaTarget,
  bagId: string,
  signal?: AbortSignal,
): Promise<Finding[]> {
  const copy = target.name;
  const read = async (path: string): Promise<Buffer | undefined> => {
    const stream = await target.open(objectKey(bagId, path), undefined, signal);
    if (stream === undefined) return undefined;
    const chunks: Buffer[] = [];
    for await (const chunk of stream) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  };
  const findings: Finding[] = [];
  const declaration = await read(OBJECT_DECLARATION.name);
  if (declaration === undefined) findings.push({ code: 'file-missing', copy, path: OBJECT_DECLARATION.name });
  const inventory = await read(INVENTORY);
  const sidecar = await read(INVENTORY_SIDECAR);
  if (inventory === undefined) findings.push({ code: 'file-missing', copy, path: INVENTORY });
  if (sidecar === undefined) findings.push({ code: 'file-missing', copy, path: INVENTORY_SIDECAR });
  if (inventory !== undefined && sidecar !== undefined) {
    const expected = sidecar.toString('utf8').trim().split(/\s+/)[0] ?? '';
    const actual = createHash('sha256').update(inventory).digest('hex');
    if (expected !== actual)
      findings.push({ code: 'file-changed', copy, path: INVENTORY, algorithm: 'sha256', expected, actual });
  }
  return findings;
}
