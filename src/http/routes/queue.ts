/** The ingest queue: one item per completion attempt. */
import type { FastifyInstance } from 'fastify';
import { caller, mayAccess } from '../auth.js';
import type { HttpContext } from '../context.js';
import { forbidden, notFound } from '../errors.js';
import { errors, idParam, listOf, ref } from '../schemas.js';
import { queueItemView } from '../views.js';

export async function queueRoutes(app: FastifyInstance, ctx: HttpContext): Promise<void> {
  app.get<{ Querystring: { package?: string } }>(
    '/v1/queue',
    {
      schema: {
        tags: ['queue'],
        summary: 'Queue items of visible packages, oldest first',
        querystring: { type: 'object', properties: { package: { type: 'string', description: 'Only this package (bag_id or external_id).' } } },
        response: { 200: listOf('QueueItem'), ...errors(401) },
      },
    },
    async (request) => {
      const user = caller(request);
      let bagIds: Set<string> | undefined;
      const filter = request.query.package;
      if (filter !== undefined && filter !== '') {
        const pkg = ctx.catalog.packages.find(filter);
        if (pkg === undefined || !mayAccess(user, pkg.user)) return [];
        bagIds = new Set([pkg.bagId]);
      } else if (!user.admin) {
        bagIds = new Set([...ctx.catalog.packages.list({ user: user.name })].map((p) => p.bagId));
      }
      return [...ctx.catalog.queue.list({ bagIds })].map(queueItemView);
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
