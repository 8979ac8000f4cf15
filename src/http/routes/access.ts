/**
 * Finding a resource for a caller: 404 when it does not exist, then 403 when the caller may not
 * see it (the rule itself is auth/access.ts); what a caller's lists may hold (`scopeOf`, the
 * same rule as data for the catalog's indexes); and the package as the caller may see it.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Access } from '../../auth/access.js';
import type { Scope } from '../../catalog/scan.js';
import type { Package } from '../../catalog/types.js';
import type { UploadProgress } from '../../ingest/watcher.js';
import { access } from '../auth.js';
import type { HttpContext } from '../context.js';
import type { KeptShows, StorageBytes, StorageState } from '../kept-shows.js';
import { forbidden, notFound } from '../errors.js';
import { packageView } from '../views.js';

export function loadPackage(ctx: HttpContext, request: FastifyRequest, idOrExternalId: string): Package {
  return visible(request, ctx.catalog.packages.find(idOrExternalId), idOrExternalId);
}

/** The package if the caller may see it: 404 when there is none, 403 when it is another's. */
function visible(request: FastifyRequest, pkg: Package | undefined, idOrExternalId: string): Package {
  if (pkg === undefined) throw notFound(`no package "${idOrExternalId}"`);
  // In the caller's own words: asked by external_id, the bag_id behind it stays unsaid (docs/access.md).
  if (!access(request).canSee(pkg)) throw forbidden(`package "${idOrExternalId}" belongs to another user`);
  return pkg;
}

/** A package to show, and the bytes of its record (a copy) when it was decoded now rather than held. */
export interface ToShow {
  pkg: Package;
  record: Buffer | undefined;
}

/**
 * The package to show, as `loadPackage` finds it (the same 404 and 403), read as stored bytes
 * first: a stored package whose record is unchanged since its show was held is the one held,
 * not decoded again (kept-shows.ts).
 */
export function packageToShow(
  ctx: HttpContext,
  request: FastifyRequest,
  idOrExternalId: string,
  shows: KeptShows,
): ToShow {
  const raw = ctx.catalog.packages.recordBytes(idOrExternalId);
  const held = raw === undefined ? undefined : shows.package(raw.bagId, raw.bytes);
  if (held !== undefined) return { pkg: visible(request, held, idOrExternalId), record: undefined };
  // Copied before the next read of the catalog overwrites lmdb's buffer.
  const record = raw === undefined ? undefined : Buffer.from(raw.bytes);
  return { pkg: loadPackage(ctx, request, idOrExternalId), record };
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
  return v.everything
    ? { kind: 'all' }
    : { kind: 'some', users: [v.owner], contentTypes: [...v.contentTypes] };
}

/** How many packages the caller may see: an index count for who sees everything. */
export function visibleCount(ctx: HttpContext, request: FastifyRequest): number {
  const scope = scopeOf(request);
  if (scope.kind === 'all') return ctx.catalog.packages.count();
  let n = 0;
  for (const _ of ctx.catalog.packages.list({ scope })) n++;
  return n;
}

/** The package as the caller may see it: without `files` (as lists show it), or with them (a new request's answer). */
export function viewPackage(
  ctx: HttpContext,
  request: FastifyRequest,
  pkg: Package,
  files?: string[],
): Record<string, unknown> {
  return packageViewFor(
    ctx,
    pkg,
    storageStateFor(ctx, request, pkg),
    linkFor(ctx, request, pkg),
    undefined,
    files,
  );
}

/** The upload link if the caller may write into the upload, else null (auth/access.ts decides). */
function linkFor(ctx: HttpContext, request: FastifyRequest, pkg: Package): string | null {
  return access(request).canSeeUploadLink(pkg) ? ctx.uploadLink(pkg) : null;
}

/** The storage details the caller may see of the package, read now (undefined: the caller may see none). */
function storageStateFor(ctx: HttpContext, request: FastifyRequest, pkg: Package): StorageState | undefined {
  if (!access(request).canSeeStorage(pkg)) return undefined;
  return {
    fixity: pkg.stored ? ctx.catalog.fixity.get(pkg.bagId) : undefined,
    replicas: ctx.config.replicas.map(({ name }) => ({
      name,
      copy: ctx.catalog.replication.get(pkg.bagId, name),
    })),
    ...(pkg.deaccessioned === undefined
      ? {}
      : {
          removals: ctx.catalog.deaccessions.removalsOf(pkg.bagId),
          abandoned: ctx.catalog.deaccessions.abandonedOf(pkg.bagId),
        }),
  };
}

function packageViewFor(
  ctx: HttpContext,
  pkg: Package,
  storage: StorageState | undefined,
  uploadLink: string | null,
  upload?: UploadProgress,
  files?: string[],
): Record<string, unknown> {
  return packageView(pkg, {
    storageVisible: storage !== undefined,
    uploadLink,
    storageLocation:
      storage !== undefined && pkg.storagePath !== undefined
        ? ctx.storage.locationOf(pkg.storagePath)
        : undefined,
    replicas: storage?.replicas,
    removals: storage?.removals,
    abandoned: storage?.abandoned,
    fixity: storage?.fixity,
    files,
    upload,
  });
}

/**
 * A stored package as the caller may see it, with `files`, as the body to send: serialised by
 * the route's response schema (`reply.serialize`) once per view flavour and held in `shows` while
 * what it shows is unchanged; per show only the storage records' bytes are read, for a caller who
 * may see them. No promise: the show of a stored package is the hot path.
 */
export function storedPackageBody(
  ctx: HttpContext,
  request: FastifyRequest,
  reply: FastifyReply,
  { pkg, record }: ToShow,
  shows: KeptShows,
): Buffer {
  const storage = access(request).canSeeStorage(pkg) ? storageBytesOf(ctx, pkg.bagId) : undefined;
  const held = record === undefined ? shows.get(pkg, storage) : undefined;
  if (held !== undefined) return held;
  const files = JSON.parse(ctx.catalog.files.payloadListJson(pkg.bagId).toString('utf8')) as string[];
  // A stored package's upload_link is null for every caller (views.ts).
  const view = packageViewFor(ctx, pkg, storageStateFor(ctx, request, pkg), null, undefined, files);
  const body = Buffer.from(reply.serialize(view) as string, 'utf8');
  // A tombstone's removals are not among the bytes compared: its show is rendered each time.
  return pkg.deaccessioned === undefined ? shows.keep(pkg, record, storage, body) : body;
}

/** The bytes of the storage records a show with storage details shows (kept-shows.ts), read now. */
function storageBytesOf(ctx: HttpContext, bagId: string): StorageBytes {
  const bytes: StorageBytes = [ctx.catalog.fixity.stateBytes(bagId)];
  for (const { name } of ctx.config.replicas) bytes.push(ctx.catalog.replication.copyBytes(bagId, name));
  return bytes;
}

/** An open request as the caller may see it, with what has arrived, and no files yet. */
export async function requestView(
  ctx: HttpContext,
  request: FastifyRequest,
  pkg: Package,
): Promise<Record<string, unknown>> {
  return packageViewFor(
    ctx,
    pkg,
    storageStateFor(ctx, request, pkg),
    linkFor(ctx, request, pkg),
    await ctx.uploadProgress(pkg),
    [],
  );
}
