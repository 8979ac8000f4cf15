/** Downloads: one payload file (resolved through the catalog only) or the whole bag as a zip. */
import { relative } from 'node:path';
import type { FastifyInstance, FastifyReply, FastifyRequest, FastifySchema } from 'fastify';
import type { FileRecord, Package } from '../../catalog/types.js';
import { answerFile, answerFromCopy, answerZip } from '../../download/index.js';
import type { HttpContext } from '../context.js';
import { gone, notFound } from '../errors.js';
import { sendDownload } from '../send-download.js';
import { bagIdParam, errors } from '../schemas.js';
import { loadPackage } from './access.js';

const binary = (description: string, mediaType: string) => ({
  description,
  content: { [mediaType]: { schema: { type: 'string', format: 'binary' } } },
});

/** GET /v1/packages/{bag_id}/download */
export const zipSchema: FastifySchema = {
  tags: ['downloads'],
  summary: 'The whole bag as a stored (not deflated) ZIP64 under one top folder <bag_id>/',
  params: bagIdParam,
  response: {
    200: binary('The bag as a zip; Content-Length is known in advance.', 'application/zip'),
    ...errors(401, 403, 404, 410),
  },
};

/** GET /v1/packages/{bag_id}/{file} */
export const fileSchema: FastifySchema = {
  tags: ['downloads'],
  summary: 'One payload file (path relative to data/), with Range, ETag and Repr-Digest',
  params: {
    type: 'object',
    required: ['bag_id', '*'],
    properties: {
      bag_id: bagIdParam.properties.bag_id,
      '*': { type: 'string', description: 'A path from the package’s files.' },
    },
  },
  response: {
    200: binary('The file’s bytes; Content-Type from its extension.', '*/*'),
    206: binary('One range of the file.', '*/*'),
    304: { type: 'null', description: 'Not modified (If-None-Match or If-Modified-Since).' },
    ...errors(401, 403, 404, 410, 416),
  },
};

export async function downloadRoutes(app: FastifyInstance, ctx: HttpContext): Promise<void> {
  const { downloads } = ctx;
  // Counted until the response is finished or its connection gone (this scope's routes only).
  if (downloads !== undefined)
    app.addHook('onRequest', async (_request, reply) => {
      reply.raw.once('close', downloads.begin());
    });
  app.get<{ Params: { bag_id: string } }>(
    '/v1/packages/:bag_id/download',
    { schema: zipSchema },
    async (request, reply) => {
      const pkg = storedPackage(ctx, request, request.params.bag_id);
      const zip = {
        bagId: pkg.bagId,
        dir: ctx.storage.objectDir(pkg.bagId),
        pathOf: (file: FileRecord) => ctx.storage.storedFilePath(pkg.bagId, file),
        files: ctx.catalog.files.view(pkg.bagId),
        storedAt: pkg.updatedAt,
      };
      return sendDownload(request, reply, answerZip(zip, request.method));
    },
  );

  app.get<{ Params: { bag_id: string; '*': string } }>(
    '/v1/packages/:bag_id/*',
    {
      // The wildcard is API.md's {file}: name it so in the OpenAPI document.
      config: {
        swaggerTransform: ({ schema, url }) => ({
          schema: fileParamSchema(schema),
          url: url.replace(/\*$/, '{file}'),
        }),
      },
      schema: fileSchema,
    },
    async (request, reply) => {
      const pkg = storedPackage(ctx, request, request.params.bag_id);
      const name = request.params['*'];
      // Only payload files listed in the catalog; the user's string is a lookup key, never a path.
      const record = name === '' ? undefined : ctx.catalog.files.get(pkg.bagId, `data/${name}`);
      if (record === undefined) throw notFound(`package ${pkg.bagId} has no file "${name}"`);
      return sendStoredFile(ctx, request, reply, pkg, record);
    },
  );
}

/** The package to download from: visible to the caller, not deaccessioned (410), stored (else 404). */
function storedPackage(ctx: HttpContext, request: FastifyRequest, bagId: string): Package {
  const pkg = loadPackage(ctx, request, bagId);
  refuseTombstone(pkg);
  if (!pkg.stored || pkg.storagePath === undefined) throw notFound(`package ${pkg.bagId} is not stored yet`);
  return pkg;
}

/** A deaccessioned package's downloads answer 410 Gone, whatever file is asked for. */
export function refuseTombstone(pkg: Package): void {
  const d = pkg.deaccessioned;
  if (d !== undefined)
    throw gone(
      `package ${pkg.bagId} was deaccessioned on ${new Date(d.at).toISOString()} (${d.reason}): its content is no longer held`,
    );
}

/** One stored file's answer (Range, ETag, Repr-Digest), from a verified replica when the primary cannot be read. */
export async function sendStoredFile(
  ctx: HttpContext,
  request: FastifyRequest,
  reply: FastifyReply,
  pkg: Package,
  record: FileRecord,
): Promise<FastifyReply> {
  const absPath = ctx.storage.storedFilePath(pkg.bagId, record);
  const file = {
    absPath,
    storageRelativePath: relative(ctx.storage.storageRoot, absPath),
    record,
  };
  const answer = await answerFile(file, request, { offload: ctx.config.download.offload });
  // The primary cannot be read as the catalog says: serve a verified replica's copy instead.
  const openFromReplica = ctx.openFromReplica;
  if (answer.kind === 'error' && answer.status === 500 && openFromReplica !== undefined) {
    const fallback = await answerFromCopy(record, request, (range) =>
      openFromReplica(pkg.bagId, record, range),
    );
    if (fallback !== undefined) {
      request.log.warn(
        { bagId: pkg.bagId, path: record.path, err: answer.message },
        `${record.path} of ${pkg.bagId} served from a replica: ${answer.message}`,
      );
      return sendDownload(request, reply, fallback);
    }
  }
  return sendDownload(request, reply, answer);
}

/** The route's schema with its `*` path parameter renamed `file` (for the document only). */
export function fileParamSchema(schema: FastifySchema): FastifySchema {
  const params = schema.params as { properties: Record<string, unknown> } | undefined;
  if (params === undefined) return schema;
  const { '*': file, ...rest } = params.properties;
  return {
    ...schema,
    params: { ...params, required: [...Object.keys(rest), 'file'], properties: { ...rest, file } },
  };
}
