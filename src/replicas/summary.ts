/**
 * Where each replica stands, from the catalog: copies verified, pending and failed, the bytes
 * verified, and since when the oldest copy not yet verified has been owed. One summary for
 * `/metrics`, `preservd replicas` and `preservd status`.
 */
import type { Catalog } from '../catalog/catalog.js';

export interface ReplicaSummary {
  name: string;
  verified: number;
  pending: number;
  failed: number;
  verifiedBytes: number;
  /** When the oldest copy not yet verified (pending or failed) was owed; undefined when none is. */
  oldestUnverifiedAt: number | undefined;
}

export function summarizeReplicas(catalog: Catalog, names: readonly string[]): ReplicaSummary[] {
  const oldest = new Map<string, number>();
  for (const copy of catalog.replication.unverified()) {
    const seen = oldest.get(copy.replica);
    if (seen === undefined || copy.createdAt < seen) oldest.set(copy.replica, copy.createdAt);
  }
  return names.map((name) => ({
    name,
    ...catalog.replication.countsOf(name),
    oldestUnverifiedAt: oldest.get(name),
  }));
}
