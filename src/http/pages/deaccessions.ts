/**
 * The deaccession page (admins): every request, those waiting first, each with a form to approve
 * or reject it (CSRF-protected, as every form that changes something); the admin who asked sees
 * theirs without the forms, since a second admin must decide. The decision is the API's
 * (routes/deaccessions.ts), so the same rules answer here.
 */
import type { FastifyInstance } from 'fastify';
import type { Deaccession } from '../../catalog/types.js';
import { access, caller } from '../auth.js';
import type { HttpContext } from '../context.js';
import { forbidden } from '../errors.js';
import { decideDeaccession, type ReasonBody } from '../routes/deaccessions.js';
import { renderPage } from './site.js';

const PAGE = { config: { page: true }, schema: { hide: true } } as const;

export async function deaccessionPages(app: FastifyInstance, ctx: HttpContext): Promise<void> {
  app.get('/deaccessions', PAGE, async (request, reply) => {
    if (!access(request).isAdmin) throw forbidden('Deaccessions are decided by administrators.');
    const all: Deaccession[] = [];
    for (let after = 0; ;) {
      const page = ctx.catalog.deaccessions.page(after, 1000, () => true);
      all.push(...page.items);
      if (page.next === undefined) break;
      after = page.next;
    }
    const row = (d: Deaccession) => ({ d, pkg: ctx.catalog.packages.get(d.bagId) });
    return renderPage(
      request,
      reply,
      'deaccessions',
      { title: 'Deaccessions', section: 'deaccessions' },
      {
        me: caller(request).name,
        waiting: all.filter((d) => d.status === 'requested').map(row),
        decided: all
          .filter((d) => d.status !== 'requested')
          .reverse()
          .map(row),
      },
    );
  });

  for (const decision of ['approve', 'reject'] as const)
    app.post<{ Params: { id: string }; Body: ReasonBody }>(
      `/deaccessions/:id/${decision}`,
      { ...PAGE, preHandler: app.csrfProtection },
      async (request, reply) => {
        const reason = request.body?.reason;
        // An empty field of an approval is no reason at all; a rejection's is refused (422).
        const body = decision === 'approve' && (reason ?? '').trim() === '' ? {} : { reason: reason ?? '' };
        decideDeaccession(ctx, request, request.params.id, decision, body);
        return reply.redirect('/deaccessions', 303);
      },
    );
}
