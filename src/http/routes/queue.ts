/** The ingest queue: one item per completion attempt. */
import type { FastifyInstance } from 'fastify';
import { access } from '../auth.js';
import type { HttpContext } from '../context.js';
import { forbidden, notFound } from '../errors.js';
import { parseTime, queueReport, type ReportItem } from '../queue-report.js';
import { pagingOf, pagingQuery, sendList } from '../lists.js';
import { errors, idParam, listOf, ref } from '../schemas.js';
import { queueItemView, queueStatusItemView } from '../views.js';
import { scopeOf } from './access.js';

const EMPTY = { items: [], next: undefined };

/** GET /v1/queue */
const listSchema = {
  tags: ['queue'],
  summary: 'Queue items of visible packages, oldest first',
  querystring: {
    type: 'object',
    properties: {
      package: { type: 'string', description: 'Only this package (bag_id or external_id).' },
      ...pagingQuery,
    },
  },
  response: { 200: listOf('QueueItem'), ...errors(400, 401) },
};

/** GET /v1/queue/status */
const statusSchema = {
  tags: ['queue'],
  summary: "Chipmunk's status report: visible queue items by outcome, newest first",
  querystring: {
    type: 'object',
    properties: {
      before: {
        type: 'string',
        description: 'RFC 3339 time: only items updated strictly before it (no offset: UTC).',
      },
      after: {
        type: 'string',
        description: 'RFC 3339 time: only items updated strictly after it (no offset: UTC).',
      },
    },
  },
  response: { 200: ref('QueueStatus'), ...errors(400, 401) },
};

/** GET /v1/queue/{id} */
const itemSchema = {
  tags: ['queue'],
  summary: 'One queue item',
  params: idParam,
  response: { 200: ref('QueueItem'), ...errors(400, 401, 403, 404) },
};

export async function queueRoutes(app: FastifyInstance, ctx: HttpContext): Promise<void> {
  app.get<{ Querystring: { package?: string; limit?: string; after?: string } }>(
    '/v1/queue',
    { schema: listSchema },
    async (request, reply) => {
      const paging = pagingOf(request.query);
      const filter = request.query.package;
      if (filter !== undefined && filter !== '') {
        const pkg = ctx.catalog.packages.find(filter);
        const visible = pkg !== undefined && access(request).canSee(pkg);
        return sendList(
          request,
          reply,
          paging,
          (after, limit) => (visible ? ctx.catalog.queue.page({ bagId: pkg.bagId, after, limit }) : EMPTY),
          queueItemView,
        );
      }
      const scope = scopeOf(request);
      return sendList(
        request,
        reply,
        paging,
        (after, limit) => ctx.catalog.queue.page({ scope, after, limit }),
        queueItemView,
      );
    },
  );

  app.get<{ Querystring: { before?: string; after?: string } }>(
    '/v1/queue/status',
    { schema: statusSchema },
    async (request) => {
      const bounds = {
        before: parseTime(request.query.before, 'before'),
        after: parseTime(request.query.after, 'after'),
      };
      const report = queueReport(ctx.catalog, access(request), bounds);
      const view = (items: ReportItem[]) => items.map(({ item, pkg }) => queueStatusItemView(item, pkg));
      return { done: view(report.done), pending: view(report.pending), failed: view(report.failed) };
    },
  );

  app.get<{ Params: { id: string } }>('/v1/queue/:id', { schema: itemSchema }, async (request) => {
    const item = ctx.catalog.queue.get(Number(request.params.id));
    if (item === undefined) throw notFound(`no queue item ${request.params.id}`);
    const pkg = ctx.catalog.packages.get(item.bagId);
    if (pkg === undefined || !access(request).canSee(pkg))
      throw forbidden(`queue item ${item.id} belongs to another user`);
    return queueItemView(item);
  });
}
