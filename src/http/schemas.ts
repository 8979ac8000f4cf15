/**
 * JSON schemas of the wire shapes. Fastify validates and serialises with them, and
 * @fastify/swagger turns them into the OpenAPI document, so they are the one description of the
 * API.
 */
const date = { type: 'string', format: 'date-time' } as const;

const errorSchema = {
  $id: 'Error',
  type: 'object',
  required: ['error'],
  properties: {
    error: { type: 'string', description: 'One sentence saying what went wrong.' },
    fields: { type: 'object', additionalProperties: { type: 'array', items: { type: 'string' } } },
  },
} as const;

const packageSchema = {
  $id: 'Package',
  type: 'object',
  // No `required` list: the serializer would move required fields first and break the
  // documented field order. Always present: bag_id, user, content_type, external_id,
  // upload_link, stored, created_at, updated_at.
  description: 'A request before it is stored, a package after (one object, two names). Always present: bag_id, user, content_type, external_id, upload_link, stored, created_at, updated_at.',
  properties: {
    bag_id: { type: 'string', format: 'uuid' },
    user: { type: 'string', description: 'Username of the owner.' },
    content_type: { type: 'string' },
    external_id: { type: 'string' },
    upload_link: {
      type: ['string', 'null'],
      description: 'Where to rsync the bag: rsync://host:port/module/<capability>/. A write capability: null for callers who may not complete the request, and once stored.',
    },
    storage_location: { type: ['string', 'null'], description: 'Admins only; null until stored.' },
    replicas: {
      type: 'array',
      description: 'Admins only: the package\'s copy on each configured replica.',
      items: {
        type: 'object',
        properties: {
          name: { type: 'string' },
          status: { type: 'string', enum: ['pending', 'verified', 'failed'] },
          verified_at: { type: ['string', 'null'], format: 'date-time' },
          error: { type: 'string', description: 'Failed only: what is wrong.' },
        },
      },
    },
    stored: { type: 'boolean' },
    last_fixity_check: { type: ['string', 'null'], format: 'date-time', description: 'Admins only: when an audit last verified the package; null before its first.' },
    files: { type: 'array', items: { type: 'string' }, description: 'Single-item responses only: payload paths relative to data/, sorted.' },
    upload: {
      type: 'object',
      description: 'Single-item responses of unstored requests: what has arrived in the landing folder so far.',
      properties: {
        files: { type: 'integer' },
        bytes: { type: 'integer' },
        last_write_at: { type: ['string', 'null'], format: 'date-time' },
        in_progress: { type: 'boolean' },
      },
    },
    created_at: date,
    updated_at: date,
  },
} as const;

const problemSchema = {
  $id: 'Problem',
  type: 'object',
  required: ['code', 'message'],
  properties: {
    code: { type: 'string' },
    message: { type: 'string' },
    path: { type: 'string' },
    severity: { type: 'string', enum: ['error', 'warning'] },
  },
} as const;

const queueItemSchema = {
  $id: 'QueueItem',
  type: 'object',
  // No `required` list, for the same reason as Package.
  description: 'One completion attempt. Always present: id, status, request, created_at, updated_at.',
  properties: {
    id: { type: 'integer' },
    status: { type: 'string', enum: ['PENDING', 'DONE', 'FAILED'] },
    request: { type: 'string' },
    package: { type: 'string', description: 'DONE only.' },
    error: { type: 'string', description: 'FAILED only: every problem, joined by blank lines.' },
    errors: { type: 'array', items: { $ref: 'Problem#' }, description: 'FAILED only.' },
    created_at: date,
    updated_at: date,
  },
} as const;

const queueStatusItem = {
  type: 'object',
  required: ['id', 'status', 'request', 'package', 'created_at', 'updated_at'],
  properties: {
    id: { type: 'integer' },
    status: { type: 'string', enum: ['PENDING', 'DONE', 'FAILED'] },
    request: { type: 'string' },
    package: {
      type: 'object',
      required: ['bag_id', 'external_id', 'content_type'],
      properties: { bag_id: { type: 'string' }, external_id: { type: 'string' }, content_type: { type: 'string' } },
    },
    error: { type: 'string', description: 'FAILED only: every problem, joined by blank lines.' },
    created_at: { type: 'string', format: 'date-time', description: 'ISO 8601 with milliseconds, UTC.' },
    updated_at: { type: 'string', format: 'date-time', description: 'ISO 8601 with milliseconds, UTC.' },
  },
} as const;

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

export const eventSchema = {
  $id: 'Event',
  type: 'object',
  required: ['id', 'type', 'executor', 'outcome', 'detail', 'date'],
  properties: {
    id: { type: 'integer' },
    type: { type: 'string', enum: ['transfer', 'validation', 'ingestion', 'fixity check', 'replication', 'recovery', 'deletion'] },
    executor: { type: 'string' },
    outcome: { type: 'string', enum: ['success', 'failure'] },
    detail: { type: ['string', 'null'] },
    date,
  },
} as const;

const auditCommon = {
  id: { type: 'integer' },
  user: { type: 'string' },
  packages: { type: 'integer', description: 'Stored packages when the audit started.' },
  bytes: { type: 'integer', description: 'Bytes verified so far.' },
  total_bytes: { type: 'integer' },
  finished_at: { type: ['string', 'null'], format: 'date-time' },
  created_at: date,
  updated_at: date,
} as const;

const auditSummarySchema = {
  $id: 'AuditSummary',
  type: 'object',
  required: ['id', 'user', 'successes', 'failures', 'packages', 'created_at', 'updated_at'],
  properties: { ...auditCommon, successes: { type: 'integer' }, failures: { type: 'integer' } },
} as const;

const auditEventSchema = {
  $id: 'AuditEvent',
  type: 'object',
  properties: {
    ...eventSchema.properties,
    bag_id: { type: 'string' },
    external_id: { type: 'string' },
  },
} as const;

const auditSchema = {
  $id: 'Audit',
  type: 'object',
  description: 'One audit, with its successes and failures as fixity check events (bag_id and external_id added).',
  required: ['id', 'user', 'successes', 'failures', 'packages', 'created_at', 'updated_at'],
  properties: {
    ...auditCommon,
    successes: { type: 'array', items: { $ref: 'AuditEvent#' } },
    failures: { type: 'array', items: { $ref: 'AuditEvent#' } },
  },
} as const;

export const sharedSchemas = [errorSchema, packageSchema, problemSchema, queueItemSchema, queueStatusSchema, eventSchema, auditSummarySchema, auditEventSchema, auditSchema];

export const ref = (id: string) => ({ $ref: `${id}#` });
/** A collection, oldest first: all of it streamed, or a page of it with `?limit=` (http/lists.ts). */
export const listOf = (id: string) => ({
  type: 'array',
  items: ref(id),
  description: `Every visible ${id}, oldest first; with ?limit= a page of them.`,
  headers: { Link: { type: 'string', description: 'With ?limit=, when more items follow: <the same list, limit, after=CURSOR>; rel="next" (RFC 8288).' } },
});

/** When each error status is given (API.md), for the OpenAPI document. */
const errorDescriptions: Record<number, string> = {
  400: 'Malformed JSON, or a path parameter of the wrong shape.',
  401: 'No credentials, or an unknown or revoked token.',
  403: 'The caller may not see or do this: another user\'s resource outside their grants, a content type they hold no role for, or an operation for administrators only.',
  404: 'No such resource.',
  409: 'The bag_id or external_id is already used by a package the caller may not see.',
  413: 'The body is larger than the configured limit.',
  416: 'The range cannot be satisfied.',
  422: 'A body field is missing, empty, of the wrong type or not allowed; `fields` names each.',
  429: 'The caller already holds as many open requests as a user may (`upload.openRequestsPerUser`); complete some first.',
  507: 'The repository is out of disk space; try again later.',
};

/** Error responses a route may give, for the OpenAPI document. */
export function errors(...codes: number[]): Record<number, unknown> {
  return Object.fromEntries(
    codes.map((c) => {
      const response: Record<string, unknown> = { ...ref('Error'), description: errorDescriptions[c] ?? 'An error.' };
      if (c === 401) response.headers = { 'WWW-Authenticate': { type: 'string', description: 'Bearer realm="preservd"' } };
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
