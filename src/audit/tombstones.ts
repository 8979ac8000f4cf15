/**
 * What an audit checks of a deaccessioned package (API.md: "audits check that no content of a
 * deaccessioned package remains where it could be removed"): no copy whose removal is done may
 * still hold any of its object, in the primary or on a replica. What is found is a finding, and
 * its removal is recorded again so the remover takes it out; a copy still being removed or
 * retained by S3 Object Lock is not looked at.
 */
import type { Catalog } from '../catalog/catalog.js';
import { objectPrefix, PRIMARY, ReplicaDown } from '../replicas/index.js';
import { primaryHoldsObject } from '../storage/remove-object.js';
import type { Storage } from '../storage/storage.js';
import type { AuditedReplicas } from './copies.js';
import type { Finding } from './findings.js';

export async function tombstoneFindings(
  catalog: Catalog,
  storage: Storage,
  replicas: AuditedReplicas | undefined,
  bagId: string,
  signal: AbortSignal,
): Promise<Finding[]> {
  const pending = new Set(catalog.deaccessions.removalsOf(bagId).map((r) => r.copy));
  const findings: Finding[] = [];
  const left: string[] = [];
  if (!pending.has(PRIMARY) && (await primaryHoldsObject(storage, bagId))) {
    findings.push({ code: 'deaccessioned-content-left' });
    left.push(PRIMARY);
  }
  for (const target of replicas?.targets ?? []) {
    if (pending.has(target.name)) continue;
    try {
      for await (const _ of target.list(objectPrefix(bagId), signal)) {
        findings.push({ code: 'deaccessioned-content-left', copy: target.name });
        left.push(target.name);
        break;
      }
    } catch (err) {
      if (signal.aborted || !(err instanceof ReplicaDown)) throw err;
      findings.push({ code: 'replica-unreachable', copy: target.name, reason: err.reason });
    }
  }
  if (left.length > 0) catalog.deaccessions.removeAgain(bagId, left);
  return findings;
}
