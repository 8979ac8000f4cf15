/** The ingest queue: one item per completion attempt. */
import type { FastifyInstance } from 'fastify';
import type { Package, QueueItem } from '../../catalog/types.js';
import { caller, mayAccess } from '../auth.js';
import type { HttpContext } from '../context.js';
import { badRequest, forbidden, notFound } from '../errors.js';
import { pagingOf, pagingQuery, sendList } from '../lists.js';
import { errors, idParam, listOf, ref } from '../schemas.js';
import { queueItemView, queueStatusItemView } from '../views.js';
import { scopeOf } from './access.js';

const EMPTY = { items: [], next: undefined };

export async function queueRoutes(app: FastifyInstance, ctx: HttpContext): Promise<void> {
  app.get<{ Querystring: { package?: string; limit?: string; after?: string } }>(
    '/v1/queue',
    {
      schema: {
        tags: ['queue'],
        summary: 'Queue items of visible packages, oldest first',
        querystring: { type: 'object', properties: { package: { type: 'string', description: 'Only this package (bag_id or external_id).' }, ...pagingQuery } },
        response: { 200: listOf('QueueItem'), ...errors(400, 401) },
      },
    },
    async (request, reply) => {
      const user = caller(request);
      const paging = pagingOf(request.query);
      const filter = request.query.package;
      if (filter !== undefined && filter !== '') {
        const pkg = ctx.catalog.packages.find(filter);
        const visible = pkg !== undefined && mayAccess(user, pkg.user);
        return sendList(request, reply, paging, (after, limit) => (visible ? ctx.catalog.queue.page({ bagId: pkg.bagId, after, limit }) : EMPTY), queueItemView);
      }
      const scope = scopeOf(user);
      return sendList(request, reply, paging, (after, limit) => ctx.catalog.queue.page({ scope, after, limit }), queueItemView);
    },
  );

  app.get<{ Querystring: { before?: string; after?: string } }>(
    '/v1/queue/status',
    {
      schema: {
        tags: ['queue'],
        summary: "Chipmunk's status report: visible queue items by outcome, newest first",
        querystring: {
          type: 'object',
          properties: {
            before: { type: 'string', description: 'RFC 3339 time: only items updated strictly before it (no offset: UTC).' },
            after: { type: 'string', description: 'RFC 3339 time: only items updated strictly after it (no offset: UTC).' },
          },
        },
        response: { 200: ref('QueueStatus'), ...errors(400, 401) },
      },
    },
    async (request) => {
      const user = caller(request);
      const before = parseTime(request.query.before, 'before');
      const after = parseTime(request.query.after, 'after');
      const report: Record<'done' | 'pending' | 'failed', QueueItem[]> = { done: [], pending: [], failed: [] };
      const packages = new Map<string, Package | undefined>();
      for (const item of ctx.catalog.queue.list()) {
        if (before !== undefined && !(item.updatedAt < before)) continue;
        if (after !== undefined && !(item.updatedAt > after)) continue;
        if (!packages.has(item.bagId)) packages.set(item.bagId, ctx.catalog.packages.get(item.bagId));
        const pkg = packages.get(item.bagId);
        if (pkg === undefined || !mayAccess(user, pkg.user)) continue;
        report[item.status === 'DONE' ? 'done' : item.status === 'FAILED' ? 'failed' : 'pending'].push(item);
      }
      const view = (items: QueueItem[]) =>
        items.sort((a, b) => b.updatedAt - a.updatedAt || b.id - a.id).map((item) => queueStatusItemView(item, packages.get(item.bagId)!));
      return { done: view(report.done), pending: view(report.pending), failed: view(report.failed) };
    },
  );

  app.get<{ Params: { id: string } }>(
    '/v1/queue/:id',
    { schema: { tags: ['queue'], summary: 'One queue item', params: idParam, response: { 200: ref('QueueItem'), ...errors(400, 401, 403, 404) } } },
    async (request) => {
      const item = ctx.catalog.queue.get(Number(request.params.id));
      if (item === undefined) throw notFound(`no queue item ${request.params.id}`);
      const pkg = ctx.catalog.packages.get(item.bagId);
      if (pkg === undefined || !mayAccess(caller(request), pkg.user)) throw forbidden(`queue item ${item.id} belongs to another user`);
      return queueItemView(item);
    },
  );
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}(?:[Tt ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?)?(?:[Zz]|[+-]\d{2}:\d{2})?$/;

/** Epoch ms of an RFC 3339 date or date-time (UTC when it has no offset); 400 when it is not one. */
function parseTime(text: string | undefined, name: string): number | undefined {
  if (text === undefined || text === '') return undefined;
  const iso = text.replace(' ', 'T');
  // Date.parse reads a date-time without an offset as local time, a bare date as UTC: say UTC.
  const utc = /T/i.test(iso) && !/(?:Z|[+-]\d{2}:\d{2})$/i.test(iso) ? `${iso}Z` : iso;
  const ms = RFC3339.test(text) ? Date.parse(utc) : NaN;
  if (Number.isNaN(ms)) throw badRequest(`${name}: ${JSON.stringify(text)} is not an RFC 3339 time, e.g. 2026-11-25T10:00:00Z`);
  return ms;
}
