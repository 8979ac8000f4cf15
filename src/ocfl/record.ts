/**
 * The preservd record kept in every storage root beside the OCFL objects (STORAGE.md): what the
 * catalog knows that a bag does not. Each object's `logs/` (not versioned, not content) holds the
 * package record and its events; the root holds the repository's own record (users without
 * tokens, grants, content types, the repository's identity) as a direct child file.
 *
 * Formats only, both ways: the record made from catalog values, and read back (checked, trusting
 * nothing) for a rebuild. Dates are RFC 3339 with milliseconds, so a rebuilt event is the same event.
 */
import { Type, type Static, type TLiteral, type TSchema, type TUnion } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import type { VersionRecord } from '../catalog/revisions.js';
import {
  EVENT_TYPES,
  OUTCOMES,
  type Deaccession,
  type Grant,
  type Package,
  type PreservationEvent,
  type QueueItem,
  type User,
} from '../catalog/types.js';

/** The object's folder OCFL leaves to us, and the files in it. */
export const LOGS = 'logs';
export const PACKAGE_RECORD = 'preservd-package.json';
export const EVENTS_RECORD = 'preservd-events.json';
/** A direct child of the root (a folder under `extensions/` would need a registered name). */
export const REPOSITORY_RECORD = 'preservd-repository.json';
/** The deaccessioned packages' tombstones, beside it: their objects are gone, their record is not. */
export const TOMBSTONES_RECORD = 'preservd-tombstones.json';

/** One of a few strings (a union of literals: TypeBox's checker reads it, unlike `json-schema.ts`'s enum). */
const OneOf = <const T extends readonly string[]>(values: T) =>
  Type.Union(values.map((v) => Type.Literal(v))) as unknown as TUnion<Array<TLiteral<T[number]>>>;

const Date3339 = Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{3}Z$' });
const Id = Type.Integer({ minimum: 1 });
const Uuid = Type.String({ pattern: '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' });

const VersionSchema = Type.Object({
  version: Id,
  /** The queue item (completion attempt) that produced the version. */
  queue_item: Type.Object({ id: Id, user: Type.String(), created_at: Date3339, updated_at: Date3339 }),
  stored_at: Date3339,
  /** As the versions list shows it: kept once the package is revised (none for a package never revised). */
  listed: Type.Optional(
    Type.Object({
      created_at: Date3339,
      user: Type.String(),
      note: Type.Union([Type.String(), Type.Null()]),
      files: Type.Integer({ minimum: 0 }),
      bytes: Type.Integer({ minimum: 0 }),
    }),
  ),
  /** The revision that made it (version 2 on): who opened it, when, and when it ended. */
  revision: Type.Optional(
    Type.Object({ user: Type.String({ minLength: 1 }), created_at: Date3339, updated_at: Date3339 }),
  ),
});

const PackageRecordSchema = Type.Object({
  format: Type.Literal('preservd-package/1'),
  bag_id: Uuid,
  external_id: Type.String({ minLength: 1 }),
  content_type: Type.String({ minLength: 1 }),
  owner: Type.String({ minLength: 1 }),
  created_at: Date3339,
  updated_at: Date3339,
  versions: Type.Array(VersionSchema, { minItems: 1 }),
});

const EventSchema = Type.Object({
  id: Id,
  type: OneOf(EVENT_TYPES),
  outcome: OneOf(OUTCOMES),
  executor: Type.String(),
  detail: Type.Union([Type.String(), Type.Null()]),
  date: Date3339,
});

const EventsRecordSchema = Type.Object({
  format: Type.Literal('preservd-events/1'),
  bag_id: Uuid,
  events: Type.Array(EventSchema),
});

const RepositoryRecordSchema = Type.Object({
  format: Type.Literal('preservd-repository/1'),
  repository: Uuid,
  users: Type.Array(
    Type.Object({ name: Type.String({ minLength: 1 }), admin: Type.Boolean(), created_at: Date3339 }),
  ),
  grants: Type.Array(
    Type.Object({
      user: Type.String({ minLength: 1 }),
      role: OneOf(['viewer', 'content_manager', 'admin'] as const),
      scope: Type.String({ minLength: 1 }),
      created_at: Date3339,
    }),
  ),
  content_types: Type.Array(Type.String({ minLength: 1 })),
});

const TombstoneSchema = Type.Object({
  package: PackageRecordSchema,
  deaccession: Type.Object({
    request: Id,
    reason: Type.String({ minLength: 1 }),
    requested_by: Type.String({ minLength: 1 }),
    requested_at: Date3339,
    approved_by: Type.String({ minLength: 1 }),
    at: Date3339,
    approval_reason: Type.Union([Type.String(), Type.Null()]),
  }),
  events: Type.Array(EventSchema),
});

const TombstonesRecordSchema = Type.Object({
  format: Type.Literal('preservd-tombstones/1'),
  tombstones: Type.Array(TombstoneSchema),
});

export type PackageRecord = Static<typeof PackageRecordSchema>;
type VersionEntry = PackageRecord['versions'][number];
export type TombstonesRecord = Static<typeof TombstonesRecordSchema>;
export type Tombstone = Static<typeof TombstoneSchema>;
export type EventsRecord = Static<typeof EventsRecordSchema>;
export type RepositoryRecord = Static<typeof RepositoryRecordSchema>;

/** A record file that is not what preservd writes; the message names the first problem. */
export class RecordError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RecordError';
  }
}

const rfc3339 = (ms: number) => new Date(ms).toISOString();

/**
 * What the catalog keeps of a revised package's versions (catalog/revisions.ts): each version as
 * its list shows it, and the revision that made it, so that a rebuild brings them back as they were.
 */
export interface KeptVersion extends VersionRecord {
  revision?: { user: string; createdAt: number; updatedAt: number } | undefined;
}

/**
 * The package record of a stored package: one version per DONE queue item (a revision adds
 * one), each stored when the package record last changed for it, with what `kept` holds of it.
 */
export function packageRecordOf(
  pkg: Package,
  done: readonly QueueItem[],
  kept: readonly KeptVersion[] = [],
): PackageRecord {
  const keptOf = new Map(kept.map((k) => [k.version, k]));
  return {
    format: 'preservd-package/1',
    bag_id: pkg.bagId,
    external_id: pkg.externalId,
    content_type: pkg.contentType,
    owner: pkg.user,
    created_at: rfc3339(pkg.createdAt),
    updated_at: rfc3339(pkg.updatedAt),
    versions: done.map((item, i) => ({
      version: i + 1,
      queue_item: {
        id: item.id,
        user: item.user,
        created_at: rfc3339(item.createdAt),
        updated_at: rfc3339(item.updatedAt),
      },
      stored_at: rfc3339(i === done.length - 1 ? pkg.updatedAt : item.updatedAt),
      ...keptEntry(keptOf.get(i + 1)),
    })),
  };
}

function keptEntry(k: KeptVersion | undefined): Pick<VersionEntry, 'listed' | 'revision'> {
  if (k === undefined) return {};
  const { createdAt, user, note, files, bytes, revision } = k;
  return {
    listed: { created_at: rfc3339(createdAt), user, note, files, bytes },
    ...(revision === undefined
      ? {}
      : {
          revision: {
            user: revision.user,
            created_at: rfc3339(revision.createdAt),
            updated_at: rfc3339(revision.updatedAt),
          },
        }),
  };
}

/**
 * A package's events in order. A `fixity check` covers every copy of the package at once, so of
 * those only the latest and every failure are kept: continuous audits then rewrite a record only
 * when it changes in substance, and the record does not grow with every pass.
 */
export function eventsRecordOf(bagId: string, events: Iterable<PreservationEvent>): EventsRecord {
  const all = [...events];
  let latestCheck = -1;
  all.forEach((e, i) => {
    if (e.type === 'fixity check') latestCheck = i;
  });
  const kept = all.filter(
    (e, i) => e.type !== 'fixity check' || e.outcome === 'failure' || i === latestCheck,
  );
  return {
    format: 'preservd-events/1',
    bag_id: bagId,
    events: kept.map((e) => ({
      id: e.id,
      type: e.type,
      outcome: e.outcome,
      executor: e.executor,
      detail: e.detail,
      date: rfc3339(e.date),
    })),
  };
}

/** The repository's record: never a token or a session. */
export function repositoryRecordOf(
  repository: string,
  users: readonly User[],
  grants: readonly Grant[],
  contentTypes: readonly string[],
): RepositoryRecord {
  return {
    format: 'preservd-repository/1',
    repository,
    users: users.map((u) => ({ name: u.name, admin: u.admin, created_at: rfc3339(u.createdAt) })),
    grants: grants.map((g) => ({
      user: g.user,
      role: g.role,
      scope: g.scope,
      created_at: rfc3339(g.createdAt),
    })),
    content_types: [...contentTypes],
  };
}

/**
 * A deaccessioned package's tombstone: its package record, the deaccession, and every event its
 * `logs/` held (they outlive the object).
 */
export function tombstoneOf(
  pkg: Package,
  done: readonly QueueItem[],
  request: Deaccession,
  events: Iterable<PreservationEvent>,
  kept: readonly KeptVersion[] = [],
): Tombstone {
  const d = pkg.deaccessioned!;
  return {
    package: packageRecordOf(pkg, done, kept),
    deaccession: {
      request: d.requestId,
      reason: d.reason,
      requested_by: d.requestedBy,
      requested_at: rfc3339(d.requestedAt),
      approved_by: d.approvedBy,
      at: rfc3339(d.at),
      approval_reason: request.decisionReason ?? null,
    },
    events: eventsRecordOf(pkg.bagId, events).events,
  };
}

export function tombstonesRecordOf(tombstones: Tombstone[]): TombstonesRecord {
  return { format: 'preservd-tombstones/1', tombstones };
}

/** A record's bytes as stored: indented JSON, one trailing newline. */
export function recordBytes(
  record: PackageRecord | EventsRecord | RepositoryRecord | TombstonesRecord,
): Buffer {
  return Buffer.from(`${JSON.stringify(record, null, 1)}\n`, 'utf8');
}

function parse<T extends TSchema>(schema: T, bytes: Buffer | string, what: string): Static<T> {
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString());
  } catch (err) {
    throw new RecordError(`${what} is not JSON: ${(err as Error).message}`);
  }
  const first = Value.Errors(schema, value).First();
  if (first !== undefined) throw new RecordError(`${what}: ${first.path || '/'} ${first.message}`);
  return value;
}

export function readPackageRecord(bytes: Buffer | string): PackageRecord {
  return parse(PackageRecordSchema, bytes, `${LOGS}/${PACKAGE_RECORD}`);
}

export function readEventsRecord(bytes: Buffer | string): EventsRecord {
  const record = parse(EventsRecordSchema, bytes, `${LOGS}/${EVENTS_RECORD}`);
  for (let i = 1; i < record.events.length; i++)
    if (record.events[i]!.id <= record.events[i - 1]!.id)
      throw new RecordError(`${LOGS}/${EVENTS_RECORD}: event ids are not in increasing order`);
  return record;
}

export function readRepositoryRecord(bytes: Buffer | string): RepositoryRecord {
  return parse(RepositoryRecordSchema, bytes, REPOSITORY_RECORD);
}

export function readTombstonesRecord(bytes: Buffer | string): TombstonesRecord {
  return parse(TombstonesRecordSchema, bytes, TOMBSTONES_RECORD);
}

/** Milliseconds since the epoch of a record's date (checked by the schema). */
export function msOf(date: string): number {
  return Date.parse(date);
}
