/**
 * Finding a resource for a caller: 404 when it does not exist, then 403 when it is not theirs;
 * what a caller's lists may hold (`scopeOf`); and the package as the caller may see it.
 */
import type { FastifyRequest } from 'fastify';
import type { Scope } from '../../catalog/scan.js';
import type { Package, User } from '../../catalog/types.js';
import type { UploadProgress } from '../../ingest/watcher.js';
import { caller, mayAccess } from '../auth.js';
import type { HttpContext } from '../context.js';
import { forbidden, notFound } from '../errors.js';
import { packageBody, packageView } from '../views.js';

export function loadPackage(ctx: HttpContext, request: FastifyRequest, idOrExternalId: string): Package {
  const pkg = ctx.catalog.packages.find(idOrExternalId);
  if (pkg === undefined) throw notFound(`no package "${idOrExternalId}"`);
  if (!mayAccess(caller(request), pkg.user)) throw forbidden(`package ${pkg.bagId} belongs to another user`);
  return pkg;
}

/**
 * What a caller's lists may hold: everything for an admin, else what they own. The catalog
 * reads exactly the indexes a scope names (owners, content types), so a regular user's list
 * never scans anyone else's packages.
 */
export function scopeOf(user: User): Scope {
  return user.admin ? { kind: 'all' } : { kind: 'some', users: [user.name], contentTypes: [] };
}

/** The package as the caller may see it, without `files` (as lists show it); `upload` for a show. */
export function viewPackage(ctx: HttpContext, request: FastifyRequest, pkg: Package, upload?: UploadProgress): Record<string, unknown> {
  const viewer = caller(request);
  return packageView(pkg, {
    viewer,
    uploadLink: ctx.uploadLink(pkg),
    storageLocation: viewer.admin && pkg.storagePath !== undefined ? ctx.storage.packageDir(pkg.storagePath) : undefined,
    fixity: viewer.admin && pkg.stored ? ctx.catalog.fixity.get(pkg.bagId) : undefined,
    upload,
  });
}

/**
 * One package as the caller may see it, with `files` (and, for an open request, what has
 * arrived): JSON text. A stored package's file list is the one serialised at ingest: one
 * catalog read, no list built.
 */
export async function packageDocument(ctx: HttpContext, request: FastifyRequest, pkg: Package): Promise<Buffer> {
  if (pkg.stored) return packageBody(viewPackage(ctx, request, pkg), ctx.catalog.packages.payloadListJson(pkg.bagId));
  return packageBody(viewPackage(ctx, request, pkg, await ctx.uploadProgress(pkg)), EMPTY_LIST);
}

const EMPTY_LIST = Buffer.from('[]');
