/**
 * The fastify application: body parsing, authentication, error mapping, the OpenAPI document,
 * and one plugin of routes per resource.
 */
import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyInstance } from 'fastify';
import formbody from '@fastify/formbody';
import swagger from '@fastify/swagger';
import { authenticate, Unauthorized, WWW_AUTHENTICATE } from './auth.js';
import type { HttpContext } from './context.js';
import { HttpError } from './errors.js';
import { auditRoutes } from './routes/audits.js';
import { downloadRoutes } from './routes/downloads.js';
import { eventRoutes } from './routes/events.js';
import { queueRoutes } from './routes/queue.js';
import { requestRoutes } from './routes/requests.js';
import { sharedSchemas } from './schemas.js';

export const API_VERSION = '1.0.0';

export async function buildServer(ctx: HttpContext, logger?: FastifyBaseLogger): Promise<FastifyInstance> {
  const app = Fastify({
    ...(logger === undefined ? { logger: false } : { loggerInstance: logger }),
    bodyLimit: ctx.config.http.bodyLimit,
    requestIdHeader: 'x-request-id',
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false } },
    routerOptions: { maxParamLength: 2048 },
  });

  // An empty body is no body (chipmunk-client posts `complete` with none); bad JSON is a 400.
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    const text = (body as string).trim();
    if (text === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch (err) {
      done(new HttpError(400, `the body is not valid JSON: ${(err as Error).message}`), undefined);
    }
  });
  await app.register(formbody, { bodyLimit: ctx.config.http.bodyLimit });

  for (const schema of sharedSchemas) app.addSchema(schema);
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'preservd', version: API_VERSION, description: 'A digital-preservation repository: the v1 API.' },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
      security: [{ bearer: [] }],
    },
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`) },
  });

  app.addHook('onRequest', authenticate(ctx.catalog));
  if (ctx.observeResponse !== undefined) {
    const observe = ctx.observeResponse;
    app.addHook('onResponse', async (request, reply) => {
      observe(request.routeOptions.url ?? 'unmatched', request.method, reply.statusCode, reply.elapsedTime / 1000);
    });
  }

  app.setErrorHandler((error: FastifyError | HttpError, request, reply) => {
    if (error instanceof Unauthorized) reply.header('www-authenticate', WWW_AUTHENTICATE);
    if (ctx.storage.isOutOfSpace(error)) {
      // A full disk: the catalog (or a landing folder) could not be written; the client may retry.
      request.log.error({ err: error }, 'request failed: the disk is full');
      return reply.code(507).send({ error: 'the repository is out of disk space; try again later' });
    }
    const status = error.statusCode ?? 500;
    if (status >= 500) {
      request.log.error({ err: error }, 'request failed');
      return reply.code(500).send({ error: 'internal error; the operator can find it in the log by request id ' + request.id });
    }
    if ('validation' in error && error.validation !== undefined) {
      return reply.code(400).send({ error: `invalid ${error.validationContext ?? 'request'}: ${error.message}` });
    }
    const body: Record<string, unknown> = { error: error.message };
    if (error instanceof HttpError && error.fields !== undefined) body.fields = error.fields;
    return reply.code(status).send(body);
  });

  app.setNotFoundHandler((request, reply) => {
    reply.code(404).send({ error: `no such route: ${request.method} ${request.url.split('?')[0]}` });
  });

  app.get('/v1/openapi.json', { config: { public: true }, schema: { hide: true } }, async () => app.swagger());
  if (ctx.metrics !== undefined && ctx.config.metrics.access !== 'off') {
    const metrics = ctx.metrics;
    const access = ctx.config.metrics.access;
    app.get('/metrics', { config: { public: access === 'loopback' }, schema: { hide: true } }, async (request, reply) => {
      if (access === 'loopback' && !isLoopback(request.socket.remoteAddress)) {
        return reply.code(403).send({ error: 'metrics are served to loopback clients only' });
      }
      if (access === 'admin' && request.user?.admin !== true) return reply.code(403).send({ error: 'only administrators may read metrics' });
      const m = await metrics();
      return reply.type(m.contentType).send(m.body);
    });
  }

  await app.register(async (scope) => requestRoutes(scope, ctx));
  await app.register(async (scope) => queueRoutes(scope, ctx));
  await app.register(async (scope) => eventRoutes(scope, ctx));
  await app.register(async (scope) => auditRoutes(scope, ctx));
  await app.register(async (scope) => downloadRoutes(scope, ctx));
  return app;
}

function isLoopback(address: string | undefined): boolean {
  return address !== undefined && (address.startsWith('127.') || address === '::1' || address.startsWith('::ffff:127.'));
}
