/**
 * The rebuild's part for deaccessioned packages: the root's `preservd-tombstones.json` (ocfl/
 * record.ts) read back, and each tombstone put in the catalog as it was: the package (no files),
 * its versions' queue items, every event, the approved request, and a removal per copy (what a
 * crash left of its object in any root is removed at the daemon's first start).
 */
import type { Catalog } from '../catalog/catalog.js';
import type { PreservationEvent, QueueItem } from '../catalog/types.js';
import { newCapability } from '../ingest/capability.js';
import { packageObjectPath } from '../ocfl/layout.js';
import {
  msOf,
  readTombstonesRecord,
  RecordError,
  TOMBSTONES_RECORD,
  type PackageRecord,
  type Tombstone,
} from '../ocfl/record.js';
import { restoreVersions } from './rebuild-versions.js';
import type { RootReader } from './root-reader.js';

/** The root's tombstones (none when it has no such file); `refuse` turns an unreadable file into the rebuild's refusal. */
export async function readTombstones(
  reader: RootReader,
  refuse: (message: string) => Error,
  signal?: AbortSignal,
): Promise<Tombstone[]> {
  const bytes = await reader.read(TOMBSTONES_RECORD, signal);
  if (bytes === undefined) return [];
  try {
    return readTombstonesRecord(bytes).tombstones;
  } catch (err) {
    if (err instanceof RecordError) throw refuse(err.message);
    throw err;
  }
}

/** One tombstone into the catalog at position `seq`, in one transaction. */
export function restoreTombstone(
  catalog: Catalog,
  t: Tombstone,
  seq: number,
  copies: readonly string[],
): void {
  const record = t.package;
  const bagId = record.bag_id;
  const d = t.deaccession;
  catalog.transaction(() => {
    catalog.files.emptyPayloadList(bagId);
    catalog.restore.package(
      {
        bagId,
        externalId: record.external_id,
        contentType: record.content_type,
        user: record.owner,
        capability: newCapability(),
        stored: true,
        storagePath: packageObjectPath(bagId),
        createdAt: msOf(record.created_at),
        updatedAt: msOf(record.updated_at),
        version: 1,
        ...(record.versions.length > 1 ? { head: record.versions.length } : {}),
        deaccessioned: {
          at: msOf(d.at),
          reason: d.reason,
          requestedBy: d.requested_by,
          approvedBy: d.approved_by,
          requestId: d.request,
          requestedAt: msOf(d.requested_at),
        },
      },
      seq,
      msOf(d.at),
    );
    catalog.fixity.forget(bagId);
    if (record.versions.length > 1) restoreVersions(catalog, bagId, record.versions);
    const { lastItem, lastEvent } = restoreHistory(catalog, bagId, record.versions, t.events);
    catalog.deaccessions.restore(
      {
        id: d.request,
        bagId,
        status: 'approved',
        reason: d.reason,
        requestedBy: d.requested_by,
        requestedAt: msOf(d.requested_at),
        decidedBy: d.approved_by,
        decidedAt: msOf(d.at),
        ...(d.approval_reason === null ? {} : { decisionReason: d.approval_reason }),
      },
      copies,
    );
    catalog.raiseSequence('package', seq);
    catalog.raiseSequence('queue', lastItem);
    catalog.raiseSequence('event', lastEvent);
    catalog.raiseSequence('deaccession', d.request);
    // The root read may be the only one that still holds the tombstones file (a lost primary, a
    // new disk for a replica): the writer puts it back in every root.
    catalog.records.markPackage(bagId);
  });
}

/**
 * A package's DONE queue items (one per version) and its events, as its storage record lists
 * them, for a rebuild (of a package or a tombstone); the highest ids, for the sequences.
 */
export function restoreHistory(
  catalog: Catalog,
  bagId: string,
  versions: PackageRecord['versions'],
  events: ReadonlyArray<Omit<PreservationEvent, 'bagId' | 'date'> & { date: string }>,
): { lastItem: number; lastEvent: number } {
  let lastItem = 0;
  for (const v of versions) {
    const item: QueueItem = {
      id: v.queue_item.id,
      bagId,
      status: 'DONE',
      stage: 'finished',
      user: v.queue_item.user,
      ...(v.version > 1 ? { version: v.version } : {}),
      createdAt: msOf(v.queue_item.created_at),
      updatedAt: msOf(v.queue_item.updated_at),
    };
    catalog.restore.queueItem(item);
    lastItem = Math.max(lastItem, item.id);
  }
  let lastEvent = 0;
  for (const e of events) {
    catalog.restore.event({ ...e, bagId, date: msOf(e.date) });
    lastEvent = Math.max(lastEvent, e.id);
  }
  return { lastItem, lastEvent };
}
