/**
 * Finding a resource for a caller: 404 when it does not exist, then 403 when the caller may not
 * see it (the rule itself is auth/access.ts); what a caller's lists may hold (`scopeOf`, the
 * same rule as data for the catalog's indexes); and the package as the caller may see it.
 */
import type { FastifyRequest } from 'fastify';
import type { Access } from '../../auth/access.js';
import type { Scope } from '../../catalog/scan.js';
import type { Package } from '../../catalog/types.js';
import type { UploadProgress } from '../../ingest/watcher.js';
import { access } from '../auth.js';
import type { HttpContext } from '../context.js';
import type { KeptLists } from '../kept-lists.js';
import { forbidden, notFound } from '../errors.js';
import { packageParts, packageView, type PackageParts } from '../views.js';

export function loadPackage(ctx: HttpContext, request: FastifyRequest, idOrExternalId: string): Package {
  const pkg = ctx.catalog.packages.find(idOrExternalId);
  if (pkg === undefined) throw notFound(`no package "${idOrExternalId}"`);
  if (!access(request).canSee(pkg)) throw forbidden(`package ${pkg.bagId} belongs to another user`);
  return pkg;
}

/**
 * What a caller's lists may hold: everything, or what they own plus the content types they hold
 * a role on. The catalog reads exactly the indexes a scope names (owners, content types), so a
 * regular user's list never scans anyone else's packages.
 */
export function scopeOf(request: FastifyRequest): Scope {
  return scopeFor(access(request));
}

/** The catalog scope of what these rights may see. */
export function scopeFor(rights: Access): Scope {
  const v = rights.visibility;
  return v.everything ? { kind: 'all' } : { kind: 'some', users: [v.owner], contentTypes: [...v.contentTypes] };
}

/** How many packages the caller may see: an index count for who sees everything. */
export function visibleCount(ctx: HttpContext, request: FastifyRequest): number {
  const scope = scopeOf(request);
  if (scope.kind === 'all') return ctx.catalog.packages.count();
  let n = 0;
  for (const _ of ctx.catalog.packages.list({ scope })) n++;
  return n;
}

/** The package as the caller may see it, without `files` (as lists show it); `upload` for a show. */
export function viewPackage(ctx: HttpContext, request: FastifyRequest, pkg: Package, upload?: UploadProgress): Record<string, unknown> {
  const storageVisible = access(request).canSeeStorage(pkg);
  return packageView(pkg, {
    storageVisible,
    uploadLink: ctx.uploadLink(pkg),
    storageLocation: storageVisible && pkg.storagePath !== undefined ? ctx.storage.packageDir(pkg.storagePath) : undefined,
    replicas: storageVisible ? ctx.config.replicas.map(({ name }) => ({ name, copy: ctx.catalog.replication.get(pkg.bagId, name) })) : undefined,
    fixity: storageVisible && pkg.stored ? ctx.catalog.fixity.get(pkg.bagId) : undefined,
    upload,
  });
}

/**
 * One package as the caller may see it, with `files` (and, for an open request, what has
 * arrived): JSON text in parts (views.ts, packageParts). A stored package's file list is the one
 * serialised at ingest: one catalog read, no list built, and none while `lists` holds it.
 */
export async function packageDocument(ctx: HttpContext, request: FastifyRequest, pkg: Package, lists: KeptLists): Promise<PackageParts> {
  if (pkg.stored) return packageParts(viewPackage(ctx, request, pkg), lists.of(pkg, () => ctx.catalog.packages.payloadListJson(pkg.bagId)));
  return packageParts(viewPackage(ctx, request, pkg, await ctx.uploadProgress(pkg)), EMPTY_LIST);
}

const EMPTY_LIST = Buffer.from('[]');
