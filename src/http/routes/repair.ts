/** Repair of one package from its copies (API.md, Replicas): admins only. */
import type { FastifyInstance } from 'fastify';
import { requireAdmin } from '../auth.js';
import type { HttpContext } from '../context.js';
import { gone, notFound } from '../errors.js';
import { bagIdParam, errors } from '../schemas.js';
import { loadPackage } from './access.js';

export async function repairRoutes(app: FastifyInstance, ctx: HttpContext): Promise<void> {
  app.post<{ Params: { bag_id: string } }>(
    '/v1/packages/:bag_id/repair',
    {
      schema: {
        tags: ['replicas'],
        summary: 'Restore damaged or missing files of a package from a copy that matches the catalog',
        description:
          'Starts at once and answers 202; each restored file becomes a `recovery` event of the package (its events list, the Location).',
        params: bagIdParam,
        response: {
          202: {
            type: 'object',
            description: "The repair has started; its results are the package's recovery events.",
            properties: {
              bag_id: { type: 'string', format: 'uuid' },
              repair: { type: 'string', enum: ['started'] },
            },
          },
          ...errors(401, 403, 404, 410),
        },
      },
    },
    async (request, reply) => {
      const user = requireAdmin(request);
      const pkg = loadPackage(ctx, request, request.params.bag_id);
      if (!pkg.stored) throw notFound(`package ${pkg.bagId} is not stored yet`);
      if (pkg.deaccessioned !== undefined)
        throw gone(`package ${pkg.bagId} was deaccessioned: there is nothing to repair`);
      if (ctx.repairPackage === undefined)
        throw notFound('no replicas are configured, so there is nothing to repair from');
      ctx.repairPackage(pkg.bagId, user.name);
      return reply
        .code(202)
        .header('location', `/v1/packages/${pkg.bagId}/events`)
        .send({ bag_id: pkg.bagId, repair: 'started' });
    },
  );
}
