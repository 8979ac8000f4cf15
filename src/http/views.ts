/**
 * Wire shapes of the API (API.md): snake_case, RFC 3339 UTC dates with milliseconds, fields in
 * the documented order, `storage_location` for admins only.
 */
import type { AbandonedRemoval, Removal } from '../catalog/deaccessions.js';
import type { FixityState } from '../catalog/fixity.js';
import {
  errorsOf,
  type Audit,
  type Deaccession,
  type Package,
  type PreservationEvent,
  type QueueItem,
  type ReplicaCopy,
  type StoredProblem,
} from '../catalog/types.js';
import type { UploadProgress } from '../ingest/watcher.js';
import type {
  AuditSummaryWire,
  DeaccessionWire,
  EventWire,
  PackageWire,
  ProblemWire,
  QueueItemWire,
  QueueStatusItemWire,
  RevisionWire,
  VersionWire,
} from './schemas.js';
import type { Revision, VersionRecord } from '../catalog/revisions.js';

type ReplicaCopyWire = NonNullable<PackageWire['replicas']>[number];

const rfc3339 = (ms: number) => new Date(ms).toISOString();

export interface PackageViewOptions {
  /** Whether the caller may see storage details (auth/access.ts, canSeeStorage). */
  storageVisible: boolean;
  /** The upload link, or null for a caller who may not write into the upload (auth/access.ts, canSeeUploadLink). */
  uploadLink: string | null;
  storageLocation?: string | undefined;
  /** Admins only: each configured replica's name and the package's copy there (undefined: none yet). */
  replicas?: Array<{ name: string; copy: ReplicaCopy | undefined }> | undefined;
  /** Admins only, of a tombstone: the removals of its copies still to do. */
  removals?: Removal[] | undefined;
  /** Admins only, of a tombstone: the removals given up, their replica no longer configured. */
  abandoned?: AbandonedRemoval[] | undefined;
  /** Admins only: the package's verification state (undefined for an open request). */
  fixity?: FixityState | undefined;
  files?: string[] | undefined;
  upload?: UploadProgress | undefined;
  /** The version shown, when not the current one (`/versions/{n}`). */
  version?: number | undefined;
}

export function packageView(pkg: Package, o: PackageViewOptions): PackageWire {
  const view: PackageWire = {
    bag_id: pkg.bagId,
    user: pkg.user,
    content_type: pkg.contentType,
    external_id: pkg.externalId,
    // A stored package's link is closed: null for everyone (and the same for every caller of a kept show).
    upload_link: pkg.stored ? null : o.uploadLink,
  };
  if (o.storageVisible) view.storage_location = pkg.stored ? (o.storageLocation ?? null) : null;
  if (o.storageVisible && o.replicas !== undefined)
    view.replicas = [
      ...o.replicas.map(({ name, copy }) =>
        pkg.deaccessioned === undefined
          ? replicaView(name, copy)
          : removalView(
              name,
              o.removals?.find((r) => r.copy === name),
            ),
      ),
      // Never `removed`: nothing could remove a copy on a replica no longer configured.
      ...(o.abandoned ?? []).map((a): ReplicaCopyWire => ({
        name: a.copy,
        status: 'unknown',
        verified_at: null,
        error: a.reason,
      })),
    ];
  view.stored = pkg.stored;
  if (pkg.stored) view.version = o.version ?? pkg.head ?? 1;
  if (pkg.deaccessioned !== undefined)
    view.deaccessioned = {
      at: rfc3339(pkg.deaccessioned.at),
      reason: pkg.deaccessioned.reason,
      requested_by: pkg.deaccessioned.requestedBy,
      approved_by: pkg.deaccessioned.approvedBy,
    };
  if (o.storageVisible && pkg.stored)
    view.last_fixity_check = o.fixity?.checkedAt === undefined ? null : rfc3339(o.fixity.checkedAt);
  if (o.files !== undefined) view.files = o.files;
  if (o.upload !== undefined && !pkg.stored)
    view.upload = {
      files: o.upload.files,
      bytes: o.upload.bytes,
      last_write_at: o.upload.lastWriteAt === undefined ? null : rfc3339(o.upload.lastWriteAt),
      in_progress: o.upload.tempFiles > 0,
    };
  view.created_at = rfc3339(pkg.createdAt);
  view.updated_at = rfc3339(pkg.updatedAt);
  return view;
}

/** A package's copy on one replica (API.md, Replicas): a copy not yet made is `pending`. */
function replicaView(name: string, copy: ReplicaCopy | undefined): ReplicaCopyWire {
  const view: ReplicaCopyWire = {
    name,
    status: copy?.status ?? 'pending',
    verified_at: copy?.verifiedAt === undefined ? null : rfc3339(copy.verifiedAt),
  };
  if (copy?.status === 'failed') view.error = copy.error ?? 'failed';
  return view;
}

/** A tombstone's copy on one replica: being removed, retained by Object Lock until a date, or removed. */
function removalView(name: string, removal: Removal | undefined): ReplicaCopyWire {
  if (removal === undefined) return { name, status: 'removed', verified_at: null };
  if (removal.retainedUntil === undefined) return { name, status: 'removing', verified_at: null };
  return { name, status: 'retained', verified_at: null, retained_until: rfc3339(removal.retainedUntil) };
}

/** A deaccession request (API.md, "Deaccession"). */
export function deaccessionView(d: Deaccession): DeaccessionWire {
  return {
    id: d.id,
    bag_id: d.bagId,
    status: d.status,
    reason: d.reason,
    requested_by: d.requestedBy,
    requested_at: rfc3339(d.requestedAt),
    decided_by: d.decidedBy ?? null,
    decided_at: d.decidedAt === undefined ? null : rfc3339(d.decidedAt),
    decision_reason: d.decisionReason ?? null,
  };
}

function problemView(p: StoredProblem): ProblemWire {
  const v: ProblemWire = { code: p.code, message: p.message };
  if (p.path !== undefined) v.path = p.path;
  if (p.severity !== undefined) v.severity = p.severity;
  return v;
}

export function queueItemView(item: QueueItem): QueueItemWire {
  const view: QueueItemWire = { id: item.id, status: item.status, request: `/v1/requests/${item.bagId}` };
  if (item.status === 'DONE') view.package = `/v1/packages/${item.bagId}`;
  if (item.status === 'FAILED') {
    const errors = errorsOf(item.errors ?? []);
    view.error = errorText(errors);
    view.errors = errors.map(problemView);
  }
  view.created_at = rfc3339(item.createdAt);
  view.updated_at = rfc3339(item.updatedAt);
  return view;
}

/** chipmunk's `error`: every error's sentence, joined by blank lines. */
export function errorText(errors: readonly StoredProblem[]): string {
  return errors.map((p) => p.message).join('\n\n');
}

/** An item of `/v1/queue/status`: its package as an object, times with milliseconds (chipmunk's shape). */
export function queueStatusItemView(item: QueueItem, pkg: Package): QueueStatusItemWire {
  return {
    id: item.id,
    status: item.status,
    request: `/v1/requests/${item.bagId}`,
    package: { bag_id: pkg.bagId, external_id: pkg.externalId, content_type: pkg.contentType },
    ...(item.status === 'FAILED' ? { error: errorText(errorsOf(item.errors ?? [])) } : {}),
    created_at: new Date(item.createdAt).toISOString(),
    updated_at: new Date(item.updatedAt).toISOString(),
  };
}

export function eventView(e: PreservationEvent): EventWire {
  return {
    id: e.id,
    type: e.type,
    executor: e.executor,
    outcome: e.outcome,
    detail: e.detail,
    date: rfc3339(e.date),
  };
}

export function auditSummaryView(a: Audit): AuditSummaryWire {
  return {
    id: a.id,
    user: a.user,
    successes: a.successes,
    failures: a.failures,
    packages: a.packages,
    bytes: a.bytes,
    total_bytes: a.totalBytes,
    finished_at: a.finishedAt === undefined ? null : rfc3339(a.finishedAt),
    created_at: rfc3339(a.createdAt),
    updated_at: rfc3339(a.updatedAt),
  };
}

export function revisionView(
  r: Revision,
  status: 'open' | 'pending' | 'stored' | 'abandoned',
  uploadLink: string | null,
): RevisionWire {
  return {
    version: r.version,
    bag_id: r.bagId,
    status,
    upload_link: uploadLink,
    note: r.note,
    user: r.user,
    created_at: rfc3339(r.createdAt),
    updated_at: rfc3339(r.updatedAt),
  };
}

export function versionView(v: VersionRecord): VersionWire {
  return {
    version: v.version,
    created_at: rfc3339(v.createdAt),
    user: v.user,
    note: v.note,
    files: v.files,
    bytes: v.bytes,
  };
}
