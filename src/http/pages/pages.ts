/**
 * The web pages that show things (API.md, "The browser side"): the overview, the status report,
 * the package search and the package page, and the audits (admins). Each asks auth/access.ts what
 * the caller may see, exactly as the API does: something the caller may not see is a 403 page,
 * something that does not exist a 404 page. Logging in and out is session.ts.
 */
import type { FastifyInstance } from 'fastify';
import { errorsOf, type Package } from '../../catalog/types.js';
import { summarizeReplicas } from '../../replicas/index.js';
import { access, requireAdmin } from '../auth.js';
import type { HttpContext } from '../context.js';
import { decodeCursor } from '../../catalog/scan.js';
import { badRequest, notFound } from '../errors.js';
import { parseTime, queueReport, queueSummary } from '../queue-report.js';
import { loadPackage, scopeFor, visibleCount } from '../routes/access.js';
import { searchPackages, SEARCH_BUDGET } from './search.js';
import { errorText } from '../views.js';
import { renderPage } from './site.js';

const PAGE = { config: { page: true }, schema: { hide: true } } as const;

/** What a non-administrator is told on the audit pages (the API's words are for programs). */
const AUDITS_ARE_FOR_ADMINS = 'Audits are for administrators.';

/** Characters a path segment may hold as they are in a URL. */
const URL_SAFE = /^[A-Za-z0-9._~/-]*$/;

/** Each path segment percent-encoded, the slashes kept: a payload path as a download URL. */
const fileUrl = (bagId: string, path: string) =>
  `/v1/packages/${bagId}/${URL_SAFE.test(path) ? path : path.split('/').map(encodeURIComponent).join('/')}`;

// eslint-disable-next-line max-lines-per-function -- the pages' route table: one registration per page, each with its checks beside it
export async function pageRoutes(app: FastifyInstance, ctx: HttpContext): Promise<void> {
  app.get('/', PAGE, async (request, reply) => {
    const rights = access(request);
    const summary = queueSummary(ctx.catalog, rights, 5);
    const lastAudit = rights.isAdmin ? ctx.catalog.audits.latest() : undefined;
    return renderPage(
      request,
      reply,
      'overview',
      { title: 'Overview', section: 'overview' },
      {
        counts: summary.counts,
        failures: summary.failures.map(({ item, pkg }) => ({
          item,
          pkg,
          error: errorText(errorsOf(item.errors ?? [])),
        })),
        audit: lastAudit ?? null,
        packages: visibleCount(ctx, request),
        replicas: rights.isAdmin
          ? summarizeReplicas(
              ctx.catalog,
              ctx.config.replicas.map((r) => r.name),
            )
          : [],
      },
    );
  });

  app.get<{ Querystring: { before?: string; after?: string } }>('/queue', PAGE, async (request, reply) => {
    const before = request.query.before ?? '';
    const after = request.query.after ?? '';
    const report = queueReport(ctx.catalog, access(request), {
      before: parseTime(before, 'before'),
      after: parseTime(after, 'after'),
    });
    const withErrors = report.failed.map(({ item, pkg }) => ({
      item,
      pkg,
      error: errorText(errorsOf(item.errors ?? [])),
    }));
    return renderPage(
      request,
      reply,
      'queue',
      { title: 'Status report', section: 'queue' },
      { report, failed: withErrors, before, after },
    );
  });

  app.get<{ Querystring: { q?: string; content_type?: string; before?: string } }>(
    '/packages',
    PAGE,
    async (request, reply) => {
      const q = (request.query.q ?? '').trim();
      const contentType = request.query.content_type ?? '';
      const cursor = request.query.before ?? '';
      const before = cursor === '' ? undefined : decodeCursor(cursor);
      if (cursor !== '' && before === undefined)
        throw badRequest('before: not a cursor of this search (follow its "Older packages" link)');
      const rights = access(request);
      // Newest first: the package just deposited is the one looked for.
      const found = searchPackages(ctx.catalog, {
        scope: scopeFor(rights),
        canSee: (p) => rights.canSee(p),
        q,
        contentType: contentType === '' ? undefined : contentType,
        before,
      });
      const link = (params: Record<string, string>) =>
        `/packages?${new URLSearchParams({ q, content_type: contentType, ...params }).toString()}`;
      return renderPage(
        request,
        reply,
        'packages',
        { title: 'Packages', section: 'packages' },
        {
          q,
          contentType,
          contentTypes: Object.keys(ctx.config.contentTypes),
          packages: found.exact === undefined ? found.matches : [found.exact, ...found.matches],
          exact: found.exact !== undefined,
          budgetSpent: found.budgetSpent,
          budget: SEARCH_BUDGET,
          continued: before !== undefined,
          newest: before === undefined ? null : link({}),
          older: found.older === undefined ? null : link({ before: found.older }),
        },
      );
    },
  );

  app.get<{ Params: { bag_id: string } }>('/packages/:bag_id', PAGE, async (request, reply) => {
    const pkg = loadPackage(ctx, request, request.params.bag_id);
    const rights = access(request);
    const storageVisible = rights.canSeeStorage(pkg);
    // A tombstone's file records go once its content is gone; none shows meanwhile either.
    const files = pkg.stored && pkg.deaccessioned === undefined ? ctx.catalog.files.list(pkg.bagId) : [];
    // Not `{ ...file }`: copying 2,000 catalog records doubles the page's cost.
    const payload = files
      .filter((f) => f.path.startsWith('data/'))
      .map((file) => ({ file, name: file.path.slice(5), url: fileUrl(pkg.bagId, file.path.slice(5)) }));
    const tags = files.filter((f) => !f.path.startsWith('data/'));
    return renderPage(
      request,
      reply,
      'package',
      { title: `Package ${pkg.externalId}`, section: 'packages' },
      {
        pkg,
        storageVisible,
        storageLocation:
          storageVisible && pkg.storagePath !== undefined ? ctx.storage.locationOf(pkg.storagePath) : null,
        replicas: storageVisible ? replicaRows(ctx, pkg) : [],
        payload,
        tags,
        // Every stored version, once a revision made more than one (catalog/revisions.ts).
        versions: (pkg.head ?? 1) > 1 ? ctx.catalog.revisions.versionsOf(pkg.bagId) : [],
        totalBytes: files.reduce((sum, f) => sum + f.size, 0),
        attempts: ctx.catalog.queue
          .forPackage(pkg.bagId)
          .map((item) => ({ item, error: errorText(errorsOf(item.errors ?? [])) })),
        events: [...ctx.catalog.events.forPackage(pkg.bagId)],
      },
    );
  });

  app.get('/audits', PAGE, async (request, reply) => {
    requireAdmin(request, AUDITS_ARE_FOR_ADMINS);
    const audits = [...ctx.catalog.audits.list()].reverse();
    return renderPage(
      request,
      reply,
      'audits',
      { title: 'Audits', section: 'audits' },
      { audits, running: audits.some((a) => a.finishedAt === undefined) },
    );
  });

  app.post('/audits', { ...PAGE, preHandler: app.csrfProtection }, async (request, reply) => {
    const user = requireAdmin(request, AUDITS_ARE_FOR_ADMINS);
    const result = ctx.startAudit(user.name);
    const audit = 'created' in result ? result.created : result.existing;
    return reply.redirect(`/audits/${audit.id}`, 303);
  });

  app.get<{ Params: { id: string } }>('/audits/:id', PAGE, async (request, reply) => {
    requireAdmin(request, AUDITS_ARE_FOR_ADMINS); // before looking: a non-admin learns nothing of which audits exist
    const id = /^[0-9]{1,15}$/.test(request.params.id) ? Number(request.params.id) : NaN;
    const audit = Number.isNaN(id) ? undefined : ctx.catalog.audits.get(id);
    if (audit === undefined) throw notFound(`There is no audit ${request.params.id}.`);
    const failures = [];
    let successes = 0;
    for (const event of ctx.catalog.events.forAudit(audit.id)) {
      if (event.outcome === 'success') successes++;
      else failures.push({ event, pkg: ctx.catalog.packages.get(event.bagId) });
    }
    return renderPage(
      request,
      reply,
      'audit',
      { title: `Audit ${audit.id}`, section: 'audits' },
      { audit, successes, failures },
    );
  });
}

/** Each configured replica and the package's copy there (none yet: pending, as the API says); a tombstone's removal state instead. */
function replicaRows(ctx: HttpContext, pkg: Package) {
  const removals =
    pkg.deaccessioned === undefined ? undefined : ctx.catalog.deaccessions.removalsOf(pkg.bagId);
  const rows = ctx.config.replicas.map(({ name }) => {
    if (removals === undefined) return { name, copy: ctx.catalog.replication.get(pkg.bagId, name) };
    const removal = removals.find((r) => r.copy === name);
    if (removal === undefined) return { name, removal: 'removed' };
    if (removal.retainedUntil === undefined) return { name, removal: 'removing' };
    return { name, removal: 'retained', retainedUntil: removal.retainedUntil };
  });
  if (removals === undefined) return rows;
  const abandoned = ctx.catalog.deaccessions.abandonedOf(pkg.bagId);
  return [...rows, ...abandoned.map((a) => ({ name: a.copy, removal: 'unknown', problem: a.reason }))];
}
