/**
 * JSON schemas of the wire shapes. Fastify validates and serialises with them, @fastify/swagger
 * turns them into the OpenAPI document, and views.ts builds values of their types (TypeBox
 * `Static`), so they are the one description of the API.
 */
import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { EVENT_TYPES, OUTCOMES } from '../catalog/types.js';
import { Nullable, StringEnum } from '../json-schema.js';

const date = Type.String({ format: 'date-time' });
/** A reference to a shared schema (`sharedSchemas`), typed as the schema it names. */
const Ref = <T extends TSchema & { $id?: string }>(schema: T) =>
  Type.Unsafe<Static<T>>({ $ref: `${schema.$id}#` });

const errorSchema = {
  $id: 'Error',
  type: 'object',
  required: ['error'],
  properties: {
    error: { type: 'string', description: 'One sentence saying what went wrong.' },
    fields: { type: 'object', additionalProperties: { type: 'array', items: { type: 'string' } } },
  },
} as const;

// No `required` list (every property optional): the serializer would move required fields first
// and break the documented field order.
const packageSchema = Type.Object(
  {
    bag_id: Type.Optional(Type.String({ format: 'uuid' })),
    user: Type.Optional(Type.String({ description: 'Username of the owner.' })),
    content_type: Type.Optional(Type.String()),
    external_id: Type.Optional(Type.String()),
    upload_link: Type.Optional(
      Nullable(Type.String(), {
        description:
          'Where to rsync the bag: rsync://host:port/module/<capability>/. A write capability: null for callers who may not complete the request, and once stored.',
      }),
    ),
    storage_location: Type.Optional(
      Nullable(Type.String(), { description: 'Admins only; null until stored.' }),
    ),
    replicas: Type.Optional(
      Type.Array(
        Type.Object({
          name: Type.Optional(Type.String()),
          status: Type.Optional(
            StringEnum(['pending', 'verified', 'failed', 'removing', 'retained', 'removed', 'unknown'], {
              description:
                "A tombstone's copies: removing (to do), retained (S3 Object Lock keeps it until retained_until; hidden, removed then), removed, unknown (its replica is no longer configured: not removed by preservd; error says so).",
            }),
          ),
          verified_at: Type.Optional(Nullable(date)),
          error: Type.Optional(Type.String({ description: 'Failed or unknown only: what is wrong.' })),
          retained_until: Type.Optional(date),
        }),
        {
          description:
            "Admins only: the package's copy on each configured replica; a tombstone's on a replica no longer configured too (unknown).",
        },
      ),
    ),
    stored: Type.Optional(Type.Boolean()),
    version: Type.Optional(
      Type.Integer({
        minimum: 1,
        description:
          'Stored packages: the current version (1 after the first deposit; each stored revision adds one).',
      }),
    ),
    deaccessioned: Type.Optional(
      Nullable(
        Type.Object({
          at: date,
          reason: Type.String(),
          requested_by: Type.String(),
          approved_by: Type.String(),
        }),
        {
          description:
            'Tombstones only: the deaccession that took the package out (its content removed from every copy, its files [], its downloads 410; its events kept).',
        },
      ),
    ),
    last_fixity_check: Type.Optional(
      Nullable(date, {
        description: 'Admins only: when an audit last verified the package; null before its first.',
      }),
    ),
    files: Type.Optional(
      Type.Array(Type.String(), {
        description: 'Single-item responses only: payload paths relative to data/, sorted.',
      }),
    ),
    upload: Type.Optional(
      Type.Object(
        {
          files: Type.Optional(Type.Integer()),
          bytes: Type.Optional(Type.Integer()),
          last_write_at: Type.Optional(Nullable(date)),
          in_progress: Type.Optional(Type.Boolean()),
        },
        {
          description:
            'Single-item responses of unstored requests: what has arrived in the landing folder so far.',
        },
      ),
    ),
    created_at: Type.Optional(date),
    updated_at: Type.Optional(date),
  },
  {
    $id: 'Package',
    description:
      'A request before it is stored, a package after (one object, two names). Always present: bag_id, user, content_type, external_id, upload_link, stored, created_at, updated_at.',
  },
);

// No `required` list, for the same reason as Package.
const revisionSchema = Type.Object(
  {
    version: Type.Optional(Type.Integer({ description: 'The version it becomes once stored.' })),
    bag_id: Type.Optional(Type.String({ format: 'uuid' })),
    status: Type.Optional(
      StringEnum(['open', 'pending', 'stored', 'abandoned'], {
        description: 'open: accepting uploads; pending: completed, being ingested; then stored or abandoned.',
      }),
    ),
    upload_link: Type.Optional(
      Nullable(Type.String(), {
        description: 'While open, for callers who may complete it: pre-filled with the current version.',
      }),
    ),
    note: Type.Optional(Nullable(Type.String())),
    user: Type.Optional(Type.String({ description: 'Who opened it.' })),
    created_at: Type.Optional(date),
    updated_at: Type.Optional(date),
  },
  { $id: 'Revision', description: 'A revision of a stored package: its next version, being uploaded.' },
);

const versionSchema = Type.Object(
  {
    version: Type.Integer(),
    created_at: date,
    user: Type.String({ description: 'Who completed the version.' }),
    note: Nullable(Type.String()),
    files: Type.Integer({ description: 'How many files (tag files included) the version holds.' }),
    bytes: Type.Integer(),
  },
  { $id: 'Version', description: 'One stored version of a package.' },
);

const problemSchema = Type.Object(
  {
    code: Type.String(),
    message: Type.String(),
    path: Type.Optional(Type.String()),
    severity: Type.Optional(StringEnum(['error', 'warning'])),
  },
  { $id: 'Problem' },
);

const queueStatus = StringEnum(['PENDING', 'DONE', 'FAILED']);
const failedError = Type.Optional(
  Type.String({ description: 'FAILED only: every problem, joined by blank lines.' }),
);

// No `required` list, for the same reason as Package.
const queueItemSchema = Type.Object(
  {
    id: Type.Optional(Type.Integer()),
    status: Type.Optional(queueStatus),
    request: Type.Optional(Type.String()),
    package: Type.Optional(Type.String({ description: 'DONE only.' })),
    error: failedError,
    errors: Type.Optional(Type.Array(Ref(problemSchema), { description: 'FAILED only.' })),
    created_at: Type.Optional(date),
    updated_at: Type.Optional(date),
  },
  {
    $id: 'QueueItem',
    description: 'One completion attempt. Always present: id, status, request, created_at, updated_at.',
  },
);

const queueStatusItem = Type.Object({
  id: Type.Integer(),
  status: queueStatus,
  request: Type.String(),
  package: Type.Object({ bag_id: Type.String(), external_id: Type.String(), content_type: Type.String() }),
  error: failedError,
  created_at: Type.String({ format: 'date-time', description: 'ISO 8601 with milliseconds, UTC.' }),
  updated_at: Type.String({ format: 'date-time', description: 'ISO 8601 with milliseconds, UTC.' }),
});

const queueStatusSchema = {
  $id: 'QueueStatus',
  type: 'object',
  required: ['done', 'pending', 'failed'],
  description: 'Visible queue items by outcome, each list newest first by updated_at.',
  properties: {
    done: { type: 'array', items: queueStatusItem },
    pending: { type: 'array', items: queueStatusItem },
    failed: { type: 'array', items: queueStatusItem },
  },
} as const;

export const eventSchema = Type.Object(
  {
    id: Type.Integer(),
    type: StringEnum(EVENT_TYPES),
    executor: Type.String(),
    outcome: StringEnum(OUTCOMES),
    detail: Nullable(Type.String()),
    date,
  },
  { $id: 'Event' },
);

const auditCommon = {
  id: Type.Integer(),
  user: Type.String(),
  packages: Type.Integer({ description: 'Stored packages when the audit started.' }),
  bytes: Type.Optional(Type.Integer({ description: 'Bytes verified so far.' })),
  total_bytes: Type.Optional(Type.Integer()),
  finished_at: Type.Optional(Nullable(date)),
  created_at: date,
  updated_at: date,
};

const auditSummarySchema = Type.Object(
  { ...auditCommon, successes: Type.Integer(), failures: Type.Integer() },
  { $id: 'AuditSummary' },
);

const auditEventSchema = {
  $id: 'AuditEvent',
  type: 'object',
  properties: {
    ...eventSchema.properties,
    bag_id: { type: 'string' },
    external_id: { type: 'string' },
  },
} as const;

const auditSchema = Type.Object(
  {
    ...auditCommon,
    successes: Type.Array(Type.Unsafe({ $ref: 'AuditEvent#' })),
    failures: Type.Array(Type.Unsafe({ $ref: 'AuditEvent#' })),
  },
  {
    $id: 'Audit',
    description:
      'One audit, with its successes and failures as fixity check events (bag_id and external_id added).',
  },
);

// No `required` list, for the same reason as Package.
const deaccessionSchema = Type.Object(
  {
    id: Type.Optional(Type.Integer()),
    bag_id: Type.Optional(Type.String({ format: 'uuid' })),
    status: Type.Optional(StringEnum(['requested', 'approved', 'rejected'])),
    reason: Type.Optional(Type.String()),
    requested_by: Type.Optional(Type.String()),
    requested_at: Type.Optional(date),
    decided_by: Type.Optional(Nullable(Type.String())),
    decided_at: Type.Optional(Nullable(date)),
    decision_reason: Type.Optional(
      Nullable(Type.String(), { description: "The deciding admin's reason (required to reject)." }),
    ),
  },
  {
    $id: 'Deaccession',
    description:
      'A request to take a package out, decided by a second admin. Always present: every field (decided_by, decided_at and decision_reason null until decided).',
  },
);

export type PackageWire = Static<typeof packageSchema>;
export type DeaccessionWire = Static<typeof deaccessionSchema>;
export type ProblemWire = Static<typeof problemSchema>;
export type RevisionWire = Static<typeof revisionSchema>;
export type VersionWire = Static<typeof versionSchema>;
export type QueueItemWire = Static<typeof queueItemSchema>;
export type QueueStatusItemWire = Static<typeof queueStatusItem>;
export type EventWire = Static<typeof eventSchema>;
export type AuditSummaryWire = Static<typeof auditSummarySchema>;

export const sharedSchemas = [
  errorSchema,
  packageSchema,
  revisionSchema,
  versionSchema,
  problemSchema,
  queueItemSchema,
  queueStatusSchema,
  eventSchema,
  auditSummarySchema,
  auditEventSchema,
  auditSchema,
  deaccessionSchema,
];

export const ref = (id: string) => ({ $ref: `${id}#` });
/** A collection, oldest first: all of it streamed, or a page of it with `?limit=` (http/lists.ts). */
export const listOf = (id: string) => ({
  type: 'array',
  items: ref(id),
  description: `Every visible ${id}, oldest first; with ?limit= a page of them.`,
  headers: {
    Link: {
      type: 'string',
      description:
        'With ?limit=, when more items follow: <the same list, limit, after=CURSOR>; rel="next" (RFC 8288).',
    },
  },
});

/** When each error status is given (API.md), for the OpenAPI document. */
const errorDescriptions: Record<number, string> = {
  400: 'Malformed JSON, or a path parameter of the wrong shape.',
  401: 'No credentials, or an unknown or revoked token.',
  403: "The caller may not see or do this: another user's resource outside their grants, a content type they hold no role for, or an operation for administrators only.",
  404: 'No such resource.',
  409: 'The bag_id or external_id is already used by a package the caller may not see.',
  413: 'The body is larger than the configured limit.',
  410: 'The package was deaccessioned: its content is gone (its record, events and tombstone remain).',
  416: 'The range cannot be satisfied.',
  422: 'A body field is missing, empty, of the wrong type or not allowed; `fields` names each.',
  429: 'The caller already holds as many open requests as a user may (`upload.openRequestsPerUser`); complete some first.',
  507: 'The repository is out of disk space; try again later.',
};

/** Error responses a route may give, for the OpenAPI document. */
export function errors(...codes: number[]): Record<number, unknown> {
  return Object.fromEntries(
    codes.map((c) => {
      const response: Record<string, unknown> = {
        ...ref('Error'),
        description: errorDescriptions[c] ?? 'An error.',
      };
      if (c === 401)
        response.headers = { 'WWW-Authenticate': { type: 'string', description: 'Bearer realm="preservd"' } };
      return [c, response];
    }),
  );
}

const location = (description: string) => ({ Location: { type: 'string', description } });

/** A 201 response: the created object, and where it lives. */
export function created(id: string, description: string, where: string): Record<string, unknown> {
  return { ...ref(id), description, headers: location(where) };
}

/** A 303 response: no body; Location names the existing resource. */
export function seeOther(description: string, where: string): Record<string, unknown> {
  return { type: 'null', description, headers: location(where) };
}

export const bagIdParam = {
  type: 'object',
  required: ['bag_id'],
  properties: { bag_id: { type: 'string', description: 'A bag_id (UUID) or the package’s external_id.' } },
} as const;

export const idParam = {
  type: 'object',
  required: ['id'],
  properties: { id: { type: 'string', pattern: '^[0-9]{1,15}$' } },
} as const;
