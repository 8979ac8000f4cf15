/**
 * The fastify application: body parsing, authentication, error mapping, the OpenAPI document,
 * one plugin of routes per resource in the API's scope, and the web pages (pages/) in theirs.
 */
import Fastify, {
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifySchema,
} from 'fastify';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import formbody from '@fastify/formbody';
import swagger from '@fastify/swagger';
import { authenticate, authenticatePage, Unauthorized, WWW_AUTHENTICATE } from './auth.js';
import type { HttpContext } from './context.js';
import { bodyFields, HttpError, unprocessable } from './errors.js';
import { type FailureCounter, registerFailureLimit, TooManyFailures } from './failed-auth.js';
import { pageRoutes } from './pages/pages.js';
import { sessionRoutes } from './pages/session.js';
import { deaccessionPages } from './pages/deaccessions.js';
import { registerPageHeaders, registerSite, renderErrorPage, wantsPage } from './pages/site.js';
import { requestIdOf, requestLogSerializers } from './request-log.js';
import { sharedSerializers } from './serializers.js';
import { auditRoutes } from './routes/audits.js';
import { deaccessionRoutes } from './routes/deaccessions.js';
import { downloadRoutes } from './routes/downloads.js';
import { eventRoutes } from './routes/events.js';
import { queueRoutes } from './routes/queue.js';
import { repairRoutes } from './routes/repair.js';
import { requestRoutes } from './routes/requests.js';
import { errors, sharedSchemas } from './schemas.js';

const API_VERSION = '1.0.0';

/** Each resource's routes, registered in a scope of its own in this order (the downloads' wildcard last). */
const API_ROUTES = [
  requestRoutes,
  queueRoutes,
  eventRoutes,
  auditRoutes,
  repairRoutes,
  deaccessionRoutes,
  downloadRoutes,
];

/** One registered route: method and URL template as fastify knows them. */
export interface RouteEntry {
  method: string;
  url: string;
}

const routeTables = new WeakMap<FastifyInstance, RouteEntry[]>();

/** Every route `buildServer` registered on `app` (HEAD routes fastify derives from GET included). */
export function registeredRoutes(app: FastifyInstance): RouteEntry[] {
  return [...(routeTables.get(app) ?? [])];
}

/** The OpenAPI document's frame; the routes' schemas fill it in. */
const OPENAPI: Parameters<typeof swagger>[1] = {
  openapi: {
    openapi: '3.1.0',
    info: {
      title: 'preservd',
      version: API_VERSION,
      description: 'A digital-preservation repository: the v1 API.',
    },
    components: {
      securitySchemes: {
        bearer: {
          type: 'http',
          scheme: 'bearer',
          description:
            'A token from `preservd user add` or `preservd token issue`. chipmunk-client’s `Token token=<token>` is accepted too.',
        },
      },
    },
    security: [{ bearer: [] }],
    tags: [
      {
        name: 'requests',
        description: 'Requests and packages (one object, two names); /v1/bags is the deprecated name.',
      },
      { name: 'queue', description: 'Ingest attempts started by complete.' },
      { name: 'downloads', description: 'Stored packages, file by file or as one zip.' },
      { name: 'events', description: 'PREMIS events of packages.' },
      { name: 'audits', description: 'Fixity audits of the whole repository (administrators only).' },
      {
        name: 'replicas',
        description: 'Repair of a package from its copies on replicas (administrators only).',
      },
      {
        name: 'deaccessions',
        description:
          'Taking a package out: asked for with a reason, decided by a second admin; the package stays as a tombstone.',
      },
      { name: 'meta', description: 'This document and the metrics.' },
    ],
  },
  refResolver: {
    buildLocalReference: (json, _baseUri, _fragment, i) =>
      typeof json.$id === 'string' ? json.$id : `def-${i}`,
  },
};

export async function buildServer(ctx: HttpContext, logger?: FastifyBaseLogger): Promise<FastifyInstance> {
  const app = Fastify({
    // Request lines name the route template and never carry a credential (request-log.ts).
    ...(logger === undefined
      ? { logger: false }
      : { loggerInstance: logger.child({}, { serializers: requestLogSerializers }) }),
    bodyLimit: ctx.config.http.bodyLimit,
    // X-Forwarded-For and -Proto are believed from the configured proxies only.
    trustProxy: ctx.config.http.trustedProxies.length > 0 ? ctx.config.http.trustedProxies : false,
    requestIdHeader: false,
    genReqId: requestIdOf,
    // Every problem of a body at once (422 `fields`, errors.ts), with the schema that failed;
    // bodies are bounded by bodyLimit, so allErrors costs little.
    ajv: {
      customOptions: { removeAdditional: false, coerceTypes: false, allErrors: true, verbose: true },
      onCreate: (ajv) => ajv.addVocabulary(['problem']),
    },
    schemaController: { compilersFactory: { buildSerializer: sharedSerializers() } },
    routerOptions: { maxParamLength: 2048 },
    ...connectionLimits(ctx.config.http.requestTimeoutMs),
    clientErrorHandler,
    // The router's own refusals (an undecodable URL, a path parameter over maxParamLength) in
    // the API's error shape, without echoing the URL back.
    frameworkErrors: (error, _request, reply) => {
      const tooLong = error.statusCode === 414;
      void (reply as unknown as FastifyReply)
        .code(tooLong ? 414 : 400)
        .send({ error: tooLong ? 'a path segment is too long' : 'the URL cannot be decoded' });
    },
  });
  const routeTable: RouteEntry[] = [];
  routeTables.set(app, routeTable);
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) routeTable.push({ method, url: route.url });
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
  await app.register(swagger, OPENAPI);

  // The API's answers are for the caller alone (downloads say `private` themselves, send-download.ts),
  // and never sniffed; on the root, so the 404s of /v1 (the pages' scope answers them) get them too.
  // The pages get theirs from helmet, in their own scope below.
  app.addHook('onRequest', function apiHeaders(request, reply, done) {
    if (request.url.startsWith('/v1/'))
      reply.header('x-content-type-options', 'nosniff').header('cache-control', 'no-store');
    done();
  });
  const countFailure = await registerFailureLimit(app, ctx.config);
  if (ctx.observeResponse !== undefined) {
    const observe = ctx.observeResponse;
    // Callback style: an async hook costs every request a promise and a microtask for nothing.
    app.addHook('onResponse', function countResponse(request, reply, done) {
      observe(
        request.routeOptions.url ?? 'unmatched',
        request.method,
        reply.statusCode,
        reply.elapsedTime / 1000,
      );
      done();
    });
  }

  app.setErrorHandler(errorHandler(ctx));

  await app.register(async (api) => apiScope(api, ctx, countFailure));
  await app.register(async (site) => siteScope(site, ctx, countFailure));
  return app;
}

/**
 * The API (and /metrics): bearer tokens, and none of the pages' hooks (cookies, views, helmet),
 * which would cost every request (docs/decisions.md, "The pages' plugins in the pages' scope").
 */
async function apiScope(api: FastifyInstance, ctx: HttpContext, countFailure: FailureCounter): Promise<void> {
  api.addHook('onRequest', authenticate(ctx.catalog, ctx.config, countFailure));
  metaRoutes(api, ctx);
  for (const routes of API_ROUTES) await api.register(async (scope) => routes(scope, ctx));
}

/**
 * The pages, their assets and the 404 of every unknown URL: cookies, CSRF and views, then the
 * session's authentication (it reads the parsed cookie), and helmet's headers for the pages.
 */
async function siteScope(
  site: FastifyInstance,
  ctx: HttpContext,
  countFailure: FailureCounter,
): Promise<void> {
  await registerSite(site, ctx);
  site.addHook('onRequest', authenticatePage(ctx.catalog, ctx.config));
  await site.register(async (pages) => {
    await registerPageHeaders(pages);
    await pages.register(async (scope) => sessionRoutes(scope, ctx, countFailure));
    await pages.register(async (scope) => pageRoutes(scope, ctx));
    await pages.register(async (scope) => deaccessionPages(scope, ctx));
    pages.setNotFoundHandler((request, reply) => {
      if (wantsPage(request))
        return renderErrorPage(request, reply, 404, 'There is no page at this address.');
      return reply.code(404).send({ error: `no such route: ${request.method} ${request.url.split('?')[0]}` });
    });
  });
}

/**
 * How long a client may hold a connection without finishing its request (docs/decisions.md):
 * a slowloris client trickling headers gets 408 once `requestTimeoutMs` has passed (checked every
 * quarter of it), an idle keep-alive connection is closed after 72 s, and a socket on which
 * nothing moves for two minutes (a download nobody reads) is dropped. Responses themselves have
 * no time limit: a zip of a terabyte takes as long as it takes.
 */
function connectionLimits(requestTimeoutMs: number) {
  return {
    requestTimeout: requestTimeoutMs,
    // fastify's default: longer than the idle timeout of the proxies in front (nginx 75 s keeps
    // its own side; AWS ALB 60 s), so the server never closes a connection a client is reusing.
    keepAliveTimeout: 72_000,
    connectionTimeout: 120_000,
    http: {
      headersTimeout: requestTimeoutMs,
      connectionsCheckingInterval: Math.min(30_000, Math.max(50, Math.floor(requestTimeoutMs / 4))),
    },
  };
}

/**
 * What Node's HTTP parser refuses before fastify sees a request (headers over 16 KiB, a request
 * that took longer than `requestTimeoutMs` to arrive, bytes that are not HTTP) is answered in the
 * API's error shape too, then the connection is closed.
 */
function clientErrorHandler(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const [status, error] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'the request headers are too large']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'the request took too long to arrive']
        : [400, 'the request is not valid HTTP'];
  const body = JSON.stringify({ error });
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

function isLoopback(address: string | undefined): boolean {
  return (
    address !== undefined &&
    (address.startsWith('127.') || address === '::1' || address.startsWith('::ffff:127.'))
  );
}

/**
 * Whether the client itself is on this host: the TCP peer is loopback and nothing forwarded the
 * request. A proxy in front (the documented local TLS proxy among them) connects from loopback
 * for every client, but says so with one of these headers (docs/metrics.md).
 */
function isLoopbackClient(request: FastifyRequest): boolean {
  const h = request.headers;
  const forwarded =
    h.forwarded !== undefined || h['x-forwarded-for'] !== undefined || h['x-real-ip'] !== undefined;
  return !forwarded && isLoopback(request.socket.remoteAddress);
}

/** Every error as the API's `{error}` (422 with `fields` for a body), or as a page for a browser. */
function errorHandler(ctx: HttpContext) {
  return (error: FastifyError | HttpError, request: FastifyRequest, reply: FastifyReply) => {
    if (error instanceof Unauthorized) reply.header('www-authenticate', WWW_AUTHENTICATE);
    if (error instanceof TooManyFailures) reply.header('retry-after', String(error.retryAfterSeconds));
    if (ctx.storage.isOutOfSpace(error)) {
      // A full disk: the catalog (or a landing folder) could not be written; the client may retry.
      request.log.error({ err: error }, 'request failed: the disk is full');
      return reply.code(507).send({ error: 'the repository is out of disk space; try again later' });
    }
    const status = error.statusCode ?? 500;
    if (status >= 500) {
      request.log.error({ err: error }, 'request failed');
      const message = 'internal error; the operator can find it in the log by request id ' + request.id;
      if (wantsPage(request)) return renderErrorPage(request, reply, 500, message);
      return reply.code(500).send({ error: message });
    }
    if (wantsPage(request)) {
      const csrf = (error as FastifyError).code?.startsWith('FST_CSRF_') === true;
      return renderErrorPage(
        request,
        reply,
        status,
        csrf
          ? 'The form had expired or did not come from this site; load the page again and retry.'
          : error.message,
      );
    }
    if ('validation' in error && error.validation !== undefined) {
      if (error.validationContext === 'body') {
        const problems = unprocessable(
          bodyFields(
            error.validation,
            request.routeOptions.schema?.body as { properties?: object } | undefined,
          ),
        );
        return reply.code(422).send({ error: problems.message, fields: problems.fields });
      }
      return reply
        .code(400)
        .send({ error: `invalid ${error.validationContext ?? 'request'}: ${error.message}` });
    }
    const body: Record<string, unknown> = { error: error.message };
    if (error instanceof HttpError && error.fields !== undefined) body.fields = error.fields;
    return reply.code(status).send(body);
  };
}

/** This API's own document, and the metrics. */
function metaRoutes(app: FastifyInstance, ctx: HttpContext): void {
  app.get(
    '/v1/openapi.json',
    {
      config: { public: true },
      schema: {
        tags: ['meta'],
        summary: 'This document: the OpenAPI 3.1 description of the v1 API',
        security: [],
        response: {
          200: {
            description: 'The OpenAPI document.',
            content: { 'application/json': { schema: { type: 'object', additionalProperties: true } } },
          },
        },
      },
    },
    async () => app.swagger(),
  );
  if (ctx.metrics !== undefined && ctx.config.metrics.access !== 'off') {
    const metrics = ctx.metrics;
    const access = ctx.config.metrics.access;
    const schema: FastifySchema = {
      tags: ['meta'],
      summary: 'Prometheus metrics (text exposition format)',
      description:
        access === 'loopback'
          ? 'Served without credentials, to loopback clients only (metrics.access = "loopback").'
          : 'Administrators only (metrics.access = "admin").',
      // Loopback mode needs no token; admin mode takes the API's bearer token.
      ...(access === 'loopback' ? { security: [] } : {}),
      response: {
        200: {
          description: 'Every metric, in the Prometheus text format.',
          content: { 'text/plain': { schema: { type: 'string' } } },
        },
        ...errors(...(access === 'loopback' ? [403] : [401, 403])),
      },
    };
    app.get('/metrics', { config: { public: access === 'loopback' }, schema }, async (request, reply) => {
      if (access === 'loopback' && !isLoopbackClient(request)) {
        return reply.code(403).send({ error: 'metrics are served to loopback clients only' });
      }
      if (access === 'admin' && request.access?.isAdmin !== true)
        return reply.code(403).send({ error: 'only administrators may read metrics' });
      const m = await metrics();
      return reply.type(m.contentType).send(m.body);
    });
  }
}
