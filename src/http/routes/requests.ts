/**
 * Requests and packages: create, list, show (also under the deprecated /v1/bags), and complete.
 */
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import { Nullable } from '../../json-schema.js';
import { isUuid } from '../../catalog/keys.js';
import { newCapability } from '../../ingest/capability.js';
import { access, caller } from '../auth.js';
import type { HttpContext } from '../context.js';
import { conflict, forbidden, notFound, tooMany, unprocessable } from '../errors.js';
import { bagIdParam, created, errors, listOf, ref, seeOther } from '../schemas.js';
import { packageFilters, pagingOf, pagingQuery, sendList, storedFilterOf } from '../lists.js';
import { KeptShows } from '../kept-shows.js';
import { queueItemView } from '../views.js';
import { revisionRoutes } from './revisions.js';
import { packageToShow, requestView, scopeOf, storedPackageBody, viewPackage } from './access.js';

interface ListQuery {
  limit?: string;
  after?: string;
  content_type?: string;
  stored?: string;
}

/**
 * A create body (JSON or a form). Checked by fastify's ajv, every problem at once, answered as
 * 422 with `fields` (server.ts, errors.ts); `problem` says what a failed pattern means.
 */
const CreateBody = Type.Object({
  bag_id: Type.String({
    format: 'uuid',
    pattern: '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$',
    problem: 'must be a UUID',
  }),
  content_type: Type.String({ pattern: '\\S', problem: 'must not be empty' }),
  external_id: Type.String({
    description: 'At most 1024 bytes in UTF-8 (it is a catalog key).',
    allOf: [
      { pattern: '\\S', problem: 'must not be empty' },
      // It appears in paths and file names: keep it printable.
      {
        pattern: '^[^\\u0000-\\u001f\\u007f/\\\\]*$',
        problem: 'must not contain control characters or slashes',
      },
      // A validator gets it as an argument, where a leading "-" would make it an option.
      { pattern: '^(?!-)', problem: 'must not begin with "-"' },
    ],
  }),
  user: Type.Optional(
    Nullable(Type.String(), {
      description: 'Admins only: the owner of the new request. Ignored for regular users.',
    }),
  ),
});
type CreateBody = Static<typeof CreateBody>;

/** What the schema cannot check of a create body: the external_id's length in bytes, and the configured content types. */
function checkCreateBody(body: CreateBody, contentTypes: string[]): void {
  const fields: Record<string, string[]> = {};
  if (!contentTypes.includes(body.content_type))
    fields.content_type = [`must be one of ${contentTypes.join(', ')}`];
  // Bytes, not characters: it is a catalog key (LMDB keys are at most ~1,978 bytes).
  if (Buffer.byteLength(body.external_id) > 1024)
    fields.external_id = ['must be at most 1024 bytes in UTF-8'];
  if (Object.keys(fields).length > 0) throw unprocessable(fields);
}

/** At most this much of shown packages, rendered, is held in memory (kept-shows.ts). */
const KEPT_SHOWS_BYTES = 16 * 1024 * 1024;
const JSON_TYPE = 'application/json; charset=utf-8';

// eslint-disable-next-line max-lines-per-function -- the route table of requests/packages/bags: one registration per route, its schema beside it
export async function requestRoutes(app: FastifyInstance, ctx: HttpContext): Promise<void> {
  const list = {
    tags: ['requests'],
    querystring: { type: 'object', properties: { ...pagingQuery, ...packageFilters } },
    response: { 200: listOf('Package'), ...errors(400, 401) },
  };
  const show = {
    tags: ['requests'],
    params: bagIdParam,
    response: { 200: ref('Package'), ...errors(401, 403, 404) },
  };
  const keptShows = new KeptShows(KEPT_SHOWS_BYTES);

  for (const prefix of ['/v1/requests', '/v1/packages', '/v1/bags']) {
    const deprecated = prefix === '/v1/bags';
    app.get<{ Querystring: ListQuery }>(
      prefix,
      { schema: { ...list, summary: 'Every visible request or package, without files', deprecated } },
      async (request, reply) => {
        const paging = pagingOf(request.query);
        const stored = storedFilterOf(request.query.stored);
        const contentType = request.query.content_type === '' ? undefined : request.query.content_type;
        const scope = scopeOf(request);
        return sendList(
          request,
          reply,
          paging,
          (after, limit) => ctx.catalog.packages.page({ scope, contentType, stored, after, limit }),
          (pkg) => viewPackage(ctx, request, pkg),
        );
      },
    );
    app.get<{ Params: { bag_id: string } }>(
      `${prefix}/:bag_id`,
      { schema: { ...show, summary: 'One request or package, with its files', deprecated } },
      (request, reply) => {
        const shown = packageToShow(ctx, request, request.params.bag_id, keptShows);
        reply.type(JSON_TYPE);
        // Without a promise for a stored package (the hot path); the handler's throws are answered as errors all the same.
        // Its body is held already serialised (by this route's schema, on a miss), so fastify sends the Buffer as it is.
        if (shown.pkg.stored)
          return void reply.send(storedPackageBody(ctx, request, reply, shown, keptShows));
        return requestView(ctx, request, shown.pkg).then((view) => reply.send(view));
      },
    );
  }

  app.post<{ Body: CreateBody }>(
    '/v1/requests',
    {
      schema: {
        tags: ['requests'],
        summary: 'Declare a bag to upload',
        // chipmunk-client posts forms; both are parsed to the same fields.
        consumes: ['application/json', 'application/x-www-form-urlencoded'],
        body: CreateBody,
        response: {
          201: created('Package', 'The new request, with its upload_link.', '/v1/requests/{bag_id}'),
          303: seeOther(
            'A package with this bag_id or external_id exists and the caller may see it; nothing was created.',
            '/v1/requests/{bag_id} of that package',
          ),
          ...errors(400, 401, 403, 409, 413, 422, 429, 507),
        },
      },
    },
    async (request, reply) => {
      const user = caller(request);
      const rights = access(request);
      checkCreateBody(request.body, Object.keys(ctx.config.contentTypes));
      const fields = {
        bagId: request.body.bag_id.toLowerCase(),
        contentType: request.body.content_type,
        externalId: request.body.external_id,
        user: request.body.user === '' || request.body.user === null ? undefined : request.body.user,
      };
      if (!rights.canCreate(fields.contentType))
        throw forbidden(
          `you may not deposit ${fields.contentType}: ask for the role content_manager on it (preservd grant)`,
        );
      let owner = user.name;
      if (rights.isAdmin && fields.user !== undefined) {
        if (ctx.catalog.users.get(fields.user) === undefined)
          throw unprocessable({ user: [`no user "${fields.user}"`] });
        owner = fields.user;
      }
      const openLimit = ctx.config.upload.openRequestsPerUser;
      const result = ctx.catalog.packages.create(
        {
          bagId: fields.bagId,
          externalId: fields.externalId,
          contentType: fields.contentType,
          user: owner,
          capability: newCapability(),
        },
        openLimit > 0 ? { openPerOwner: openLimit } : {},
      );
      if ('overLimit' in result)
        throw tooMany(
          `${owner === user.name ? 'you hold' : `${owner} holds`} ${result.overLimit} open requests, as many as a user may: complete them (or wait until they are stored) before declaring more`,
        );
      if ('existing' in result) {
        const existing = result.existing;
        if (!rights.canSee(existing))
          throw conflict(
            existing.bagId === fields.bagId
              ? 'this bag_id is already in use'
              : 'this external_id is already in use',
          );
        return reply.code(303).header('location', `/v1/requests/${existing.bagId}`).send();
      }
      await ctx.openLanding(result.created);
      return reply
        .code(201)
        .header('location', `/v1/requests/${result.created.bagId}`)
        .type(JSON_TYPE)
        .send(viewPackage(ctx, request, result.created, []));
    },
  );

  app.post<{ Params: { bag_id: string } }>(
    '/v1/requests/:bag_id/complete',
    {
      schema: {
        tags: ['requests'],
        summary: 'Say the upload is complete: queue the bag for ingest',
        params: bagIdParam,
        response: {
          201: created('QueueItem', 'A new PENDING queue item.', '/v1/queue/{id}'),
          303: seeOther(
            'A PENDING or DONE queue item exists for this request.',
            '/v1/queue/{id} of that item',
          ),
          ...errors(400, 401, 403, 404, 413, 507),
        },
      },
    },
    async (request, reply) => {
      const user = caller(request);
      const rights = access(request);
      // By bag_id only (not external_id), as chipmunk.
      const pkg = isUuid(request.params.bag_id) ? ctx.catalog.packages.get(request.params.bag_id) : undefined;
      if (pkg === undefined) throw notFound(`no request with bag_id "${request.params.bag_id}"`);
      if (!rights.canSee(pkg)) throw forbidden(`request ${pkg.bagId} belongs to another user`);
      if (!rights.canComplete(pkg)) {
        // One who may only see it still learns of an attempt under way or done (chipmunk: 303).
        const blocking = ctx.catalog.queue.forPackage(pkg.bagId).find((i) => i.status !== 'FAILED');
        if (blocking !== undefined)
          return reply.code(303).header('location', `/v1/queue/${blocking.id}`).send();
        throw forbidden(
          `you may not complete request ${pkg.bagId}: ask for the role content_manager on ${pkg.contentType}`,
        );
      }
      const result = ctx.catalog.queue.enqueue(pkg.bagId, user.name);
      if ('existing' in result)
        return reply.code(303).header('location', `/v1/queue/${result.existing.id}`).send();
      ctx.wakeIngest();
      return reply
        .code(201)
        .header('location', `/v1/queue/${result.created.id}`)
        .send(queueItemView(result.created));
    },
  );
  // A stored package's revisions, under /v1/packages/{bag_id}/revisions.
  await revisionRoutes(app, ctx);
}
