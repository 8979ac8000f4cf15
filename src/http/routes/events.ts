/** Event listings: per package (also under the deprecated /v1/bags) and repository-wide. */
import type { FastifyInstance } from 'fastify';
import type { PreservationEvent } from '../../catalog/types.js';
import { access } from '../auth.js';
import type { HttpContext } from '../context.js';
import { bagIdParam, errors, listOf } from '../schemas.js';
import { eventView } from '../views.js';
import { loadPackage, visibleBagIds } from './access.js';

export async function eventRoutes(app: FastifyInstance, ctx: HttpContext): Promise<void> {
  for (const prefix of ['/v1/packages', '/v1/bags']) {
    app.get<{ Params: { bag_id: string } }>(
      `${prefix}/:bag_id/events`,
      {
        schema: {
          tags: ['events'],
          summary: "A package's events, in date order",
          deprecated: prefix === '/v1/bags',
          params: bagIdParam,
          response: { 200: listOf('Event'), ...errors(401, 403, 404) },
        },
      },
      async (request) => {
        const pkg = loadPackage(ctx, request, request.params.bag_id);
        return [...ctx.catalog.events.forPackage(pkg.bagId)].map(eventView);
      },
    );
  }

  app.get<{ Querystring: { bag_id?: string } }>(
    '/v1/events',
    {
      schema: {
        tags: ['events'],
        summary: 'Every visible event, in date order',
        querystring: { type: 'object', properties: { bag_id: { type: 'string', description: 'Only this package (bag_id or external_id).' } } },
        response: { 200: listOf('Event'), ...errors(401) },
      },
    },
    async (request) => {
      let events: Iterable<PreservationEvent>;
      const filter = request.query.bag_id;
      const visible = visibleBagIds(ctx, request);
      if (filter !== undefined && filter !== '') {
        const pkg = ctx.catalog.packages.find(filter);
        if (pkg === undefined || !access(request).canSee(pkg)) return [];
        events = ctx.catalog.events.forPackage(pkg.bagId);
      } else if (visible === undefined) {
        events = ctx.catalog.events.list();
      } else {
        events = [...ctx.catalog.events.list()].filter((e) => visible.has(e.bagId));
      }
      return [...events].map(eventView);
    },
  );
}
