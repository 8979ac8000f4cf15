/**
 * Deaccession (API.md, "Deaccession: taking a package out, with two people"): a `content_manager`
 * of the type (or an admin) asks with a reason; an admin other than the one who asked approves
 * or rejects. The approval makes the package a tombstone in one catalog transaction, then the
 * remover empties storage (replicas/removals.ts).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Deaccession } from '../../catalog/types.js';
import { failpoint } from '../../failpoints.js';
import { access, caller } from '../auth.js';
import type { HttpContext } from '../context.js';
import { conflict, forbidden, notFound, unprocessable } from '../errors.js';
import { pagingOf, pagingQuery, sendList } from '../lists.js';
import { bagIdParam, created, errors, idParam, listOf, ref, seeOther } from '../schemas.js';
import { deaccessionView } from '../views.js';
import { loadPackage } from './access.js';

/** A reason's longest, in UTF-8 bytes (API.md). */
const REASON_BYTES = 4096;

export interface ReasonBody {
  reason?: string;
}

const reasonBody = (required: boolean) => ({
  type: 'object',
  ...(required ? { required: ['reason'] } : {}),
  properties: { reason: { type: 'string', description: `1–${REASON_BYTES} bytes of UTF-8.` } },
});

/** The body's reason, checked (422 when it is required and missing, empty or too long); undefined when absent and optional. */
function reasonOf(body: ReasonBody | undefined, required: boolean): string | undefined {
  const reason = body?.reason;
  if (reason === undefined && !required) return undefined;
  const bytes = reason === undefined ? 0 : Buffer.byteLength(reason);
  if (reason === undefined || reason.trim() === '' || bytes > REASON_BYTES)
    throw unprocessable({ reason: [`is required: say why, in 1 to ${REASON_BYTES} bytes`] });
  return reason;
}

/** The request, if the caller may see its package: 404 when there is none, 403 when they may not. */
function loadDeaccession(ctx: HttpContext, request: FastifyRequest, id: string): Deaccession {
  const d = ctx.catalog.deaccessions.get(Number(id));
  if (d === undefined) throw notFound(`no deaccession ${id}`);
  const pkg = ctx.catalog.packages.get(d.bagId);
  if (pkg === undefined || !access(request).canSee(pkg))
    throw forbidden(`deaccession ${id} concerns a package you may not see`);
  return d;
}

const decisionResponses = {
  200: { ...ref('Deaccession'), description: 'The request, decided.' },
  ...errors(400, 401, 403, 404, 409, 422),
};

// eslint-disable-next-line max-lines-per-function -- the route table of deaccessions: one registration per route, its schema beside it
export async function deaccessionRoutes(app: FastifyInstance, ctx: HttpContext): Promise<void> {
  app.post<{ Params: { bag_id: string }; Body: ReasonBody }>(
    '/v1/packages/:bag_id/deaccession',
    {
      schema: {
        tags: ['deaccessions'],
        summary:
          'Ask for a package to be taken out (content_manager of its type, or admin); a second admin decides',
        params: bagIdParam,
        body: reasonBody(true),
        response: {
          201: created('Deaccession', 'The new request, status requested.', '/v1/deaccessions/{id}'),
          303: seeOther(
            'A request on this package is already waiting for a decision.',
            '/v1/deaccessions/{id} of that request',
          ),
          ...errors(400, 401, 403, 404, 409, 413, 422),
        },
      },
    },
    async (request, reply) => {
      const user = caller(request);
      const pkg = loadPackage(ctx, request, request.params.bag_id);
      if (!access(request).canRequestDeaccession(pkg))
        throw forbidden(
          `you may not ask for a deaccession of ${pkg.bagId}: ask for the role content_manager on ${pkg.contentType}`,
        );
      const reason = reasonOf(request.body, true)!;
      const result = ctx.catalog.deaccessions.request(pkg.bagId, user.name, reason);
      if ('refused' in result) throw conflict(result.refused);
      if ('existing' in result)
        return reply.code(303).header('location', `/v1/deaccessions/${result.existing.id}`).send();
      return reply
        .code(201)
        .header('location', `/v1/deaccessions/${result.created.id}`)
        .send(deaccessionView(result.created));
    },
  );

  app.get<{ Querystring: { limit?: string; after?: string } }>(
    '/v1/deaccessions',
    {
      schema: {
        tags: ['deaccessions'],
        summary: 'Deaccession requests, oldest first: admins all, others those on packages they may see',
        querystring: { type: 'object', properties: pagingQuery },
        response: { 200: listOf('Deaccession'), ...errors(400, 401) },
      },
    },
    async (request, reply) => {
      const rights = access(request);
      const visible = (d: Deaccession) => {
        const pkg = ctx.catalog.packages.get(d.bagId);
        return pkg !== undefined && rights.canSee(pkg);
      };
      return sendList(
        request,
        reply,
        pagingOf(request.query),
        (after, limit) => ctx.catalog.deaccessions.page(after, limit, visible),
        deaccessionView,
      );
    },
  );

  app.get<{ Params: { id: string } }>(
    '/v1/deaccessions/:id',
    {
      schema: {
        tags: ['deaccessions'],
        summary: 'One deaccession request',
        params: idParam,
        response: { 200: ref('Deaccession'), ...errors(400, 401, 403, 404) },
      },
    },
    async (request) => deaccessionView(loadDeaccession(ctx, request, request.params.id)),
  );

  for (const decision of ['approve', 'reject'] as const) {
    const approve = decision === 'approve';
    app.post<{ Params: { id: string }; Body: ReasonBody | undefined }>(
      `/v1/deaccessions/:id/${decision}`,
      {
        schema: {
          tags: ['deaccessions'],
          summary: approve
            ? "Approve: the package's content is removed from every copy, and it becomes a tombstone (admins; never the requester)"
            : 'Reject, with a reason: the package stays as it is (admins; never the requester)',
          params: idParam,
          ...(approve ? {} : { body: reasonBody(true) }),
          response: decisionResponses,
        },
      },
      async (request) =>
        deaccessionView(
          decideDeaccession(ctx, request, request.params.id, decision, request.body ?? undefined),
        ),
    );
  }
}

/**
 * Approves or rejects a request (the API's routes and the pages' forms alike): admins only, never
 * the one who asked (403 saying a second admin must decide), a reason required to reject.
 */
export function decideDeaccession(
  ctx: HttpContext,
  request: FastifyRequest,
  id: string,
  decision: 'approve' | 'reject',
  body: ReasonBody | undefined,
): Deaccession {
  const approve = decision === 'approve';
  const user = caller(request);
  const d = loadDeaccession(ctx, request, id);
  if (!access(request).isAdmin)
    throw forbidden('only an administrator may decide a deaccession: a second admin must decide it');
  if (d.requestedBy === user.name)
    throw forbidden(
      `you asked for deaccession ${d.id} yourself: a second admin, not the one who asked, must decide it`,
    );
  const reason = reasonOf(body, !approve);
  const copies = ctx.deaccessionCopies ?? ['primary'];
  const result = approve
    ? ctx.catalog.deaccessions.approve(d.id, user.name, reason, copies)
    : ctx.catalog.deaccessions.reject(d.id, user.name, reason!);
  if ('refused' in result)
    throw result.refused === 'own-request'
      ? forbidden(`you asked for deaccession ${d.id} yourself: a second admin must decide it`)
      : conflict(`deaccession ${d.id} was ${ctx.catalog.deaccessions.get(d.id)?.status} already`);
  if (approve) {
    failpoint('deaccession:approved');
    ctx.wakeRemover?.();
  }
  return result.decided;
}
