/** Event listings: per package (also under the deprecated /v1/bags) and repository-wide. */
import type { FastifyInstance } from 'fastify';
import { access } from '../auth.js';
import type { HttpContext } from '../context.js';
import { pagingOf, pagingQuery, sendList } from '../lists.js';
import { bagIdParam, errors, listOf } from '../schemas.js';
import { eventView } from '../views.js';
import { loadPackage, scopeOf } from './access.js';

const EMPTY = { items: [], next: undefined };

export async function eventRoutes(app: FastifyInstance, ctx: HttpContext): Promise<void> {
  for (const prefix of ['/v1/packages', '/v1/bags']) {
    app.get<{ Params: { bag_id: string }; Querystring: { limit?: string; after?: string } }>(
      `${prefix}/:bag_id/events`,
      {
        schema: {
          tags: ['events'],
          summary: "A package's events, in date order",
          deprecated: prefix === '/v1/bags',
          params: bagIdParam,
          querystring: { type: 'object', properties: pagingQuery },
          response: { 200: listOf('Event'), ...errors(400, 401, 403, 404) },
        },
      },
      async (request, reply) => {
        const pkg = loadPackage(ctx, request, request.params.bag_id);
        const paging = pagingOf(request.query);
        return sendList(
          request,
          reply,
          paging,
          (after, limit) => ctx.catalog.events.page({ bagId: pkg.bagId, after, limit }),
          eventView,
        );
      },
    );
  }

  app.get<{ Querystring: { bag_id?: string; limit?: string; after?: string } }>(
    '/v1/events',
    {
      schema: {
        tags: ['events'],
        summary: 'Every visible event, in date order',
        querystring: {
          type: 'object',
          properties: {
            bag_id: { type: 'string', description: 'Only this package (bag_id or external_id).' },
            ...pagingQuery,
          },
        },
        response: { 200: listOf('Event'), ...errors(400, 401) },
      },
    },
    async (request, reply) => {
      const paging = pagingOf(request.query);
      const filter = request.query.bag_id;
      if (filter !== undefined && filter !== '') {
        const pkg = ctx.catalog.packages.find(filter);
        const visible = pkg !== undefined && access(request).canSee(pkg);
        return sendList(
          request,
          reply,
          paging,
          (after, limit) => (visible ? ctx.catalog.events.page({ bagId: pkg.bagId, after, limit }) : EMPTY),
          eventView,
        );
      }
      const scope = scopeOf(request);
      return sendList(
        request,
        reply,
        paging,
        (after, limit) => ctx.catalog.events.page({ scope, after, limit }),
        eventView,
      );
    },
  );
}
