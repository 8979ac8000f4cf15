/**
 * Finding a resource for a caller: 404 when it does not exist, then 403 when the caller may not
 * see it (the rule itself is auth/access.ts).
 */
import type { FastifyRequest } from 'fastify';
import type { Package } from '../../catalog/types.js';
import { access } from '../auth.js';
import type { HttpContext } from '../context.js';
import { forbidden, notFound } from '../errors.js';
import { packageView } from '../views.js';

export function loadPackage(ctx: HttpContext, request: FastifyRequest, idOrExternalId: string): Package {
  const pkg = ctx.catalog.packages.find(idOrExternalId);
  if (pkg === undefined) throw notFound(`no package "${idOrExternalId}"`);
  if (!access(request).canSee(pkg)) throw forbidden(`package ${pkg.bagId} belongs to another user`);
  return pkg;
}

/** The package as the caller may see it; `single` adds `files` (and upload progress). */
export function viewPackage(ctx: HttpContext, request: FastifyRequest, pkg: Package, single: boolean): Record<string, unknown> {
  const storageVisible = access(request).canSeeStorage(pkg);
  return packageView(pkg, {
    storageVisible,
    uploadLink: ctx.uploadLink(pkg),
    storageLocation: storageVisible && pkg.storagePath !== undefined ? ctx.storage.packageDir(pkg.storagePath) : undefined,
    replicas: storageVisible ? ctx.config.replicas.map(({ name }) => ({ name, copy: ctx.catalog.replication.get(pkg.bagId, name) })) : undefined,
    files: single ? (pkg.stored ? ctx.catalog.packages.payloadPaths(pkg.bagId) : []) : undefined,
    upload: single && !pkg.stored ? ctx.uploadProgress(pkg) : undefined,
  });
}

/** Every package the caller may see, oldest first. */
export function visiblePackages(ctx: HttpContext, request: FastifyRequest): Package[] {
  const rights = access(request);
  const all = ctx.catalog.packages.list();
  return rights.visibility.everything ? [...all] : [...all].filter((pkg) => rights.canSee(pkg));
}

/** The bag_ids of every package the caller may see; undefined when that is every package. */
export function visibleBagIds(ctx: HttpContext, request: FastifyRequest): Set<string> | undefined {
  if (access(request).visibility.everything) return undefined;
  return new Set(visiblePackages(ctx, request).map((p) => p.bagId));
}
