/** Audits: admins only. */
import type { FastifyInstance } from 'fastify';
import type { PreservationEvent } from '../../catalog/types.js';
import { requireAdmin } from '../auth.js';
import type { HttpContext } from '../context.js';
import { notFound } from '../errors.js';
import { pagingOf, pagingQuery, sendList } from '../lists.js';
import { created, errors, idParam, listOf, ref, seeOther } from '../schemas.js';
import { auditSummaryView, eventView } from '../views.js';

export async function auditRoutes(app: FastifyInstance, ctx: HttpContext): Promise<void> {
  app.get<{ Querystring: { limit?: string; after?: string } }>(
    '/v1/audits',
    {
      schema: {
        tags: ['audits'],
        summary: 'Every audit, oldest first',
        querystring: { type: 'object', properties: pagingQuery },
        response: { 200: listOf('AuditSummary'), ...errors(400, 401, 403) },
      },
    },
    async (request, reply) => {
      requireAdmin(request);
      const paging = pagingOf(request.query);
      return sendList(
        request,
        reply,
        paging,
        (after, limit) => ctx.catalog.audits.page({ after, limit }),
        auditSummaryView,
      );
    },
  );

  app.post(
    '/v1/audits',
    {
      schema: {
        tags: ['audits'],
        summary: 'Start a fixity audit of every stored package',
        response: {
          201: created('AuditSummary', 'The new audit.', '/v1/audits/{id}'),
          303: seeOther('An audit is in progress.', '/v1/audits/{id} of that audit'),
          ...errors(400, 401, 403, 413, 507),
        },
      },
    },
    async (request, reply) => {
      const user = requireAdmin(request);
      const result = ctx.startAudit(user.name);
      if ('existing' in result)
        return reply.code(303).header('location', `/v1/audits/${result.existing.id}`).send();
      return reply
        .code(201)
        .header('location', `/v1/audits/${result.created.id}`)
        .send(auditSummaryView(result.created));
    },
  );

  app.get<{ Params: { id: string } }>(
    '/v1/audits/:id',
    {
      schema: {
        tags: ['audits'],
        summary: 'One audit, with its successes and failures as events',
        params: idParam,
        response: { 200: ref('Audit'), ...errors(400, 401, 403, 404) },
      },
    },
    async (request) => {
      requireAdmin(request); // before looking: a non-admin learns nothing of which audits exist
      const audit = ctx.catalog.audits.get(Number(request.params.id));
      if (audit === undefined) throw notFound(`no audit ${request.params.id}`);
      const successes: unknown[] = [];
      const failures: unknown[] = [];
      for (const event of ctx.catalog.events.forAudit(audit.id)) {
        (event.outcome === 'success' ? successes : failures).push(auditEventView(ctx, event));
      }
      return { ...auditSummaryView(audit), successes, failures };
    },
  );
}

function auditEventView(ctx: HttpContext, event: PreservationEvent): Record<string, unknown> {
  const pkg = ctx.catalog.packages.get(event.bagId);
  return { ...eventView(event), bag_id: event.bagId, external_id: pkg?.externalId ?? null };
}
