/** Finding a resource for a caller: 404 when it does not exist, then 403 when it is not theirs. */
import type { FastifyRequest } from 'fastify';
import type { Package } from '../../catalog/types.js';
import { caller, mayAccess } from '../auth.js';
import type { HttpContext } from '../context.js';
import { forbidden, notFound } from '../errors.js';
import { packageView } from '../views.js';

export function loadPackage(ctx: HttpContext, request: FastifyRequest, idOrExternalId: string): Package {
  const pkg = ctx.catalog.packages.find(idOrExternalId);
  if (pkg === undefined) throw notFound(`no package "${idOrExternalId}"`);
  if (!mayAccess(caller(request), pkg.user)) throw forbidden(`package ${pkg.bagId} belongs to another user`);
  return pkg;
}

/** The package as the caller may see it; `single` adds `files` (and upload progress). */
export function viewPackage(ctx: HttpContext, request: FastifyRequest, pkg: Package, single: boolean): Record<string, unknown> {
  const viewer = caller(request);
  return packageView(pkg, {
    viewer,
    uploadLink: ctx.uploadLink(pkg),
    storageLocation: viewer.admin && pkg.storagePath !== undefined ? ctx.storage.packageDir(pkg.storagePath) : undefined,
    replicas: viewer.admin ? ctx.config.replicas.map(({ name }) => ({ name, copy: ctx.catalog.replication.get(pkg.bagId, name) })) : undefined,
    files: single ? (pkg.stored ? ctx.catalog.packages.payloadPaths(pkg.bagId) : []) : undefined,
    upload: single && !pkg.stored ? ctx.uploadProgress(pkg) : undefined,
  });
}

/** Every package the caller may see, oldest first. */
export function visiblePackages(ctx: HttpContext, request: FastifyRequest): Package[] {
  const user = caller(request);
  return [...ctx.catalog.packages.list(user.admin ? {} : { user: user.name })];
}
