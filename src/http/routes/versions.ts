/**
 * A package's versions (API.md, "Versions"): the list, one version with its files, and a
 * version's file and zip downloads, with the current version's headers, Range and ETag rules.
 * The current version's files are `FileStore`'s; an earlier one's are kept by the revisions store.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { VersionRecord } from '../../catalog/revisions.js';
import type { FileRecord, Package } from '../../catalog/types.js';
import type { FileView } from '../../catalog/files.js';
import { answerZip } from '../../download/index.js';
import type { HttpContext } from '../context.js';
import { notFound } from '../errors.js';
import { sendDownload } from '../send-download.js';
import { errors, ref } from '../schemas.js';
import { versionView } from '../views.js';
import { loadPackage, viewPackage } from './access.js';
import { fileParamSchema, fileSchema, refuseTombstone, sendStoredFile, zipSchema } from './downloads.js';

const versionParams = {
  type: 'object',
  required: ['bag_id', 'n'],
  properties: { bag_id: { type: 'string' }, n: { type: 'string', pattern: '^[0-9]{1,9}$' } },
} as const;
type VersionParams = { bag_id: string; n: string };

/** A stored package and one of its versions' files (404: not stored, or no such version). */
interface AtVersion {
  pkg: Package;
  version: number;
  files: FileView;
  record: VersionRecord;
}

/**
 * The record of a version: kept since revisions were, or for a version 1 stored before, made
 * from the deposit's queue item and its files.
 */
function recordOf(ctx: HttpContext, pkg: Package, version: number, files: FileView): VersionRecord {
  const kept = ctx.catalog.revisions.version(pkg.bagId, version);
  if (kept !== undefined) return kept;
  const deposit = ctx.catalog.queue
    .forPackage(pkg.bagId)
    .find((i) => i.status === 'DONE' && (i.version ?? 1) === 1);
  let count = 0;
  let bytes = 0;
  for (const f of files) {
    count++;
    bytes += f.size;
  }
  return {
    version,
    createdAt: deposit?.updatedAt ?? pkg.updatedAt,
    user: deposit?.user ?? pkg.user,
    note: null,
    files: count,
    bytes,
  };
}

function atVersion(
  ctx: HttpContext,
  request: FastifyRequest,
  params: { bag_id: string; n?: string },
  n: number,
): AtVersion {
  const pkg = loadPackage(ctx, request, params.bag_id);
  const head = pkg.head ?? 1;
  if (!pkg.stored || !Number.isSafeInteger(n) || n < 1 || n > head)
    throw notFound(`package ${pkg.bagId} has no version ${params.n ?? n}`);
  // A tombstone lists no files, of any version: its current list is empty, its content gone.
  const files =
    n === head || pkg.deaccessioned !== undefined
      ? ctx.catalog.files.view(pkg.bagId)
      : ctx.catalog.revisions.view(pkg.bagId, n);
  return { pkg, version: n, files, record: recordOf(ctx, pkg, n, files) };
}

/** The payload paths relative to `data/`, in order. */
function payloadOf(files: Iterable<FileRecord>): string[] {
  const out: string[] = [];
  for (const f of files) if (f.path.startsWith('data/')) out.push(f.path.slice(5));
  return out;
}

// eslint-disable-next-line max-lines-per-function -- the route table of versions: one registration per route, its schema beside it
export async function versionRoutes(app: FastifyInstance, ctx: HttpContext): Promise<void> {
  app.get<{ Params: { bag_id: string } }>(
    '/v1/packages/:bag_id/versions',
    {
      schema: {
        tags: ['versions'],
        summary: 'Every stored version of a package, oldest first',
        params: { type: 'object', required: ['bag_id'], properties: { bag_id: { type: 'string' } } },
        response: {
          200: { type: 'array', items: ref('Version'), description: 'Every stored version, oldest first.' },
          ...errors(401, 403, 404),
        },
      },
    },
    async (request) => {
      const { pkg } = atVersion(ctx, request, request.params, 1);
      const out: VersionRecord[] = [];
      for (let n = 1; n <= (pkg.head ?? 1); n++) out.push(atVersion(ctx, request, request.params, n).record);
      return out.map(versionView);
    },
  );

  app.get<{ Params: VersionParams }>(
    '/v1/packages/:bag_id/versions/:n',
    {
      schema: {
        tags: ['versions'],
        summary: 'The package as it was at version n, with its files',
        params: versionParams,
        response: { 200: ref('Package'), ...errors(401, 403, 404) },
      },
    },
    async (request) => {
      const at = atVersion(ctx, request, request.params, Number(request.params.n));
      const view = viewPackage(ctx, request, at.pkg, payloadOf(at.files));
      return { ...view, version: at.version, updated_at: new Date(at.record.createdAt).toISOString() };
    },
  );

  app.get<{ Params: VersionParams }>(
    '/v1/packages/:bag_id/versions/:n/download',
    { schema: { ...zipSchema, summary: 'Version n of the bag as a zip', params: versionParams } },
    async (request, reply) => {
      const at = atVersion(ctx, request, request.params, Number(request.params.n));
      refuseTombstone(at.pkg);
      const zip = {
        bagId: at.pkg.bagId,
        dir: ctx.storage.objectDir(at.pkg.bagId),
        pathOf: (file: FileRecord) => ctx.storage.storedFilePath(at.pkg.bagId, file),
        files: at.files,
        storedAt: at.record.createdAt,
      };
      return sendDownload(request, reply, answerZip(zip, request.method));
    },
  );

  app.get<{ Params: VersionParams & { '*': string } }>(
    '/v1/packages/:bag_id/versions/:n/*',
    {
      config: {
        swaggerTransform: ({ schema, url }) => ({
          schema: fileParamSchema(schema),
          url: url.replace(/\*$/, '{file}'),
        }),
      },
      schema: {
        ...fileSchema,
        summary: 'One payload file of version n',
        params: {
          type: 'object',
          required: ['bag_id', 'n', '*'],
          properties: { ...versionParams.properties, '*': { type: 'string' } },
        },
      },
    },
    async (request, reply) => {
      const at = atVersion(ctx, request, request.params, Number(request.params.n));
      refuseTombstone(at.pkg);
      const name = request.params['*'];
      const record =
        name === ''
          ? undefined
          : at.version === (at.pkg.head ?? 1)
            ? ctx.catalog.files.get(at.pkg.bagId, `data/${name}`)
            : ctx.catalog.revisions.file(at.pkg.bagId, at.version, `data/${name}`);
      if (record === undefined)
        throw notFound(`version ${at.version} of ${at.pkg.bagId} has no file "${name}"`);
      return sendStoredFile(ctx, request, reply, at.pkg, record);
    },
  );
}
