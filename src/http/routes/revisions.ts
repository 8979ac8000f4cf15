/**
 * Revisions of a stored package (API.md, "Versions"): open one (its upload pre-filled with the
 * current version), show it, abandon it, complete it (a queue item, as a request's complete).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import type { Revision } from '../../catalog/revisions.js';
import type { Package } from '../../catalog/types.js';
import { newCapability } from '../../ingest/capability.js';
import { access, caller } from '../auth.js';
import type { HttpContext } from '../context.js';
import { conflict, forbidden, notFound, unprocessable } from '../errors.js';
import { created, errors, ref, seeOther } from '../schemas.js';
import { queueItemView, revisionView } from '../views.js';
import { loadPackage } from './access.js';
import { versionRoutes } from './versions.js';

const OpenBody = Type.Object({
  note: Type.Optional(Type.String({ description: 'At most 1024 bytes in UTF-8.' })),
});
type OpenBody = Static<typeof OpenBody>;
const MAX_NOTE_BYTES = 1024;

const revisionParams = {
  type: 'object',
  required: ['bag_id', 'n'],
  properties: { bag_id: { type: 'string' }, n: { type: 'string', pattern: '^[0-9]{1,9}$' } },
} as const;
type RevisionParams = { bag_id: string; n: string };

/** A stored package the caller may revise (404 unknown or not stored, 403 without the right). */
function revisable(ctx: HttpContext, request: FastifyRequest, bagId: string): Package {
  const pkg = loadPackage(ctx, request, bagId);
  if (!pkg.stored) throw notFound(`package ${pkg.bagId} is not stored yet: complete its request instead`);
  if (!access(request).canComplete(pkg))
    throw forbidden(
      `you may not revise package ${pkg.bagId}: ask for the role content_manager on ${pkg.contentType}`,
    );
  return pkg;
}

function revisionOf(ctx: HttpContext, pkg: Package, n: string): Revision {
  const revision = ctx.catalog.revisions.get(pkg.bagId, Number(n));
  if (revision === undefined) throw notFound(`package ${pkg.bagId} has no revision ${n}`);
  return revision;
}

/** The daemon's upload side (absent from an offline server: there are no uploads to make). */
function uploads(ctx: HttpContext): Required<Pick<HttpContext, 'prefillRevision' | 'abandonRevision'>> {
  const { prefillRevision, abandonRevision } = ctx;
  if (prefillRevision === undefined || abandonRevision === undefined)
    throw new Error('revisions need a running daemon');
  return { prefillRevision, abandonRevision };
}

const location = (r: Revision) => `/v1/packages/${r.bagId}/revisions/${r.version}`;

// eslint-disable-next-line max-lines-per-function -- the route table of revisions: one registration per route, its schema beside it
export async function revisionRoutes(app: FastifyInstance, ctx: HttpContext): Promise<void> {
  const view = (request: FastifyRequest, pkg: Package, revision: Revision) => {
    const pending = ctx.catalog.queue
      .forPackage(pkg.bagId)
      .some((i) => i.status === 'PENDING' && i.version === revision.version);
    const open = revision.status === 'open' && !pending;
    const link = open && access(request).canComplete(pkg) ? ctx.uploadLink(pkg) : null;
    return revisionView(revision, pending ? 'pending' : revision.status, link);
  };

  app.post<{ Params: { bag_id: string }; Body: OpenBody | null }>(
    '/v1/packages/:bag_id/revisions',
    {
      schema: {
        tags: ['versions'],
        summary: 'Open a revision of a stored package: an upload link pre-filled with its current version',
        params: { type: 'object', required: ['bag_id'], properties: { bag_id: { type: 'string' } } },
        body: Type.Union([OpenBody, Type.Null()]),
        response: {
          201: created(
            'Revision',
            'The new revision, with its upload_link.',
            '/v1/packages/{bag_id}/revisions/{n}',
          ),
          303: seeOther(
            'The package has a revision open already.',
            '/v1/packages/{bag_id}/revisions/{n} of it',
          ),
          ...errors(400, 401, 403, 404, 409, 422, 507),
        },
      },
    },
    async (request, reply) => {
      const user = caller(request);
      const pkg = revisable(ctx, request, request.params.bag_id);
      if (pkg.deaccessioned !== undefined)
        throw conflict(`package ${pkg.bagId} was deaccessioned: it cannot be revised`);
      // One change in flight per package (API.md).
      if (ctx.catalog.deaccessions.inFlight(pkg.bagId) !== undefined)
        throw conflict(
          `package ${pkg.bagId} has a deaccession requested: it cannot be revised until it is decided`,
        );
      const note = request.body?.note ?? null;
      if (note !== null && Buffer.byteLength(note) > MAX_NOTE_BYTES)
        throw unprocessable({ note: [`must be at most ${MAX_NOTE_BYTES} bytes in UTF-8`] });
      const fresh = newCapability();
      const result = ctx.catalog.revisions.create(
        { bagId: pkg.bagId, version: (pkg.head ?? 1) + 1, note, user: user.name },
        () => ctx.catalog.packages.replaceCapability(pkg.bagId, fresh),
      );
      if ('existing' in result) return reply.code(303).header('location', location(result.existing)).send();
      const opened = ctx.catalog.packages.get(pkg.bagId)!;
      await uploads(ctx).prefillRevision(opened);
      return reply
        .code(201)
        .header('location', location(result.created))
        .send(view(request, opened, result.created));
    },
  );

  const one = { tags: ['versions'], params: revisionParams };
  app.get<{ Params: RevisionParams }>(
    '/v1/packages/:bag_id/revisions/:n',
    {
      schema: {
        ...one,
        summary: 'One revision',
        response: { 200: ref('Revision'), ...errors(401, 403, 404) },
      },
    },
    async (request) => {
      const pkg = loadPackage(ctx, request, request.params.bag_id);
      return view(request, pkg, revisionOf(ctx, pkg, request.params.n));
    },
  );

  app.delete<{ Params: RevisionParams }>(
    '/v1/packages/:bag_id/revisions/:n',
    {
      schema: {
        ...one,
        summary: 'Abandon an open revision: its upload is removed, the package stays as it is',
        response: { 204: { type: 'null', description: 'Abandoned.' }, ...errors(401, 403, 404, 409) },
      },
    },
    async (request, reply) => {
      const pkg = revisable(ctx, request, request.params.bag_id);
      const revision = revisionOf(ctx, pkg, request.params.n);
      const pending = ctx.catalog.queue
        .forPackage(pkg.bagId)
        .some((i) => i.status === 'PENDING' && i.version === revision.version);
      if (revision.status !== 'open' || pending)
        throw conflict(
          `revision ${revision.version} of ${pkg.bagId} is ${pending ? 'being ingested' : revision.status}: it cannot be abandoned`,
        );
      await uploads(ctx).abandonRevision(pkg, revision.version);
      return reply.code(204).send();
    },
  );

  app.post<{ Params: RevisionParams }>(
    '/v1/packages/:bag_id/revisions/:n/complete',
    {
      schema: {
        ...one,
        summary: 'Say the revision’s upload is complete: queue it for ingest as the next version',
        response: {
          201: created('QueueItem', 'A new PENDING queue item.', '/v1/queue/{id}'),
          303: seeOther(
            'A PENDING or DONE queue item exists for this revision.',
            '/v1/queue/{id} of that item',
          ),
          ...errors(401, 403, 404, 409, 507),
        },
      },
    },
    async (request, reply) => {
      const user = caller(request);
      const pkg = revisable(ctx, request, request.params.bag_id);
      const revision = revisionOf(ctx, pkg, request.params.n);
      if (revision.status === 'abandoned')
        throw conflict(`revision ${revision.version} of ${pkg.bagId} was abandoned`);
      const result = ctx.catalog.queue.enqueue(pkg.bagId, user.name, revision.version);
      if ('existing' in result)
        return reply.code(303).header('location', `/v1/queue/${result.existing.id}`).send();
      ctx.wakeIngest();
      return reply
        .code(201)
        .header('location', `/v1/queue/${result.created.id}`)
        .send(queueItemView(result.created));
    },
  );
  // What the revisions make: the versions, their shows and downloads.
  await versionRoutes(app, ctx);
}
