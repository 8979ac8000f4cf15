/**
 * The OpenAPI document against the real daemon: served without a token, a valid OpenAPI 3.1
 * document, the same one the route table was built with, and the routes and the document agree
 * both ways: every registered route is documented, and every documented operation is answered by
 * a handler (never the router's "no such route"). Each operation has a summary, the statuses
 * API.md names, Location / WWW-Authenticate headers where they are sent, and the bearer scheme
 * unless it is public, which is checked by asking without a token.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Validator } from '@seriousme/openapi-schema-validator';
import t from 'tap';
import { offlineServer } from '../../src/http/offline.js';
import { registeredRoutes } from '../../src/http/server.js';
import { repoRoot, TestDaemon } from '../helpers/daemon.js';

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'] as const;
const ROUTER_NOT_FOUND = /^no such route: /;

interface Operation {
  summary?: string;
  security?: Array<Record<string, string[]>>;
  parameters?: Array<{ in: string; name: string; required?: boolean }>;
  responses: Record<string, { description?: string; headers?: Record<string, unknown> }>;
}
type Document = {
  openapi: string;
  security?: Array<Record<string, string[]>>;
  components: { securitySchemes: Record<string, { type: string; scheme?: string }> };
  paths: Record<string, Partial<Record<(typeof METHODS)[number], Operation>>>;
};

/** A fastify URL template as an OpenAPI path: `:x` → `{x}`; the one wildcard is API.md's {file}. */
function documentedPath(url: string): string {
  return url.replace(/:([A-Za-z0-9_]+)/g, '{$1}').replace(/\*$/, '{file}');
}

/** A concrete URL for a documented path, with ids that name nothing. */
function bogusUrl(path: string): string {
  return path
    .replace('{bag_id}', randomUUID())
    .replace('{id}', '987654321')
    .replace('{file}', 'no/such-file.txt');
}

/** The statuses API.md names for each operation (all of them must be documented). */
const API_MD_STATUSES: Record<string, number[]> = {
  'get /v1/requests': [200, 401],
  'get /v1/packages': [200, 401],
  'get /v1/bags': [200, 401],
  'get /v1/requests/{bag_id}': [200, 401, 403, 404],
  'get /v1/packages/{bag_id}': [200, 401, 403, 404],
  'get /v1/bags/{bag_id}': [200, 401, 403, 404],
  'post /v1/requests': [201, 303, 400, 401, 409, 413, 422],
  'post /v1/requests/{bag_id}/complete': [201, 303, 401, 403, 404],
  'get /v1/queue': [200, 401],
  'get /v1/queue/{id}': [200, 400, 401, 403, 404],
  'get /v1/packages/{bag_id}/{file}': [200, 206, 304, 401, 403, 404, 416],
  'get /v1/packages/{bag_id}/download': [200, 401, 403, 404],
  'get /v1/packages/{bag_id}/events': [200, 401, 403, 404],
  'get /v1/bags/{bag_id}/events': [200, 401, 403, 404],
  'get /v1/events': [200, 401],
  'post /v1/audits': [201, 303, 401, 403],
  'post /v1/packages/{bag_id}/repair': [202, 401, 403, 404],
  'get /v1/audits': [200, 401, 403],
  'get /v1/audits/{id}': [200, 400, 401, 403, 404],
  'post /v1/packages/{bag_id}/deaccession': [201, 303, 401, 403, 404, 409, 422],
  'get /v1/deaccessions': [200, 401],
  'get /v1/deaccessions/{id}': [200, 401, 403, 404],
  'post /v1/deaccessions/{id}/approve': [200, 401, 403, 404, 409],
  'post /v1/deaccessions/{id}/reject': [200, 401, 403, 404, 409, 422],
};

/** Operations answered without credentials (and documented with `security: []`). */
const PUBLIC = new Set(['get /v1/openapi.json', 'get /metrics']);

function operations(doc: Document): Array<{ key: string; method: string; path: string; op: Operation }> {
  const out = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const method of METHODS) {
      const op = item[method];
      if (op !== undefined) out.push({ key: `${method} ${path}`, method, path, op });
    }
  }
  return out;
}

t.test('the OpenAPI document', async (t) => {
  const d = await TestDaemon.start(t);
  const res = await fetch(`${d.url}/v1/openapi.json`);
  t.equal(res.status, 200, 'served without a token');
  t.match(res.headers.get('content-type'), /^application\/json/);
  const doc = (await res.json()) as Document;
  const ops = operations(doc);

  await t.test('is a valid OpenAPI 3.1 document', async (t) => {
    t.equal(doc.openapi, '3.1.0');
    const result = await new Validator().validate(doc);
    t.same(result.errors ?? [], [], 'no validation errors');
    t.equal(result.valid, true);
    // The schema checks shapes; path templates and their parameters must also agree.
    for (const { key, path, op } of ops) {
      const inTemplate = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]).sort();
      const declared = (op.parameters ?? []).filter((p) => p.in === 'path');
      t.same(declared.map((p) => p.name).sort(), inTemplate, `${key}: path parameters match the template`);
      t.ok(
        declared.every((p) => p.required === true),
        `${key}: path parameters are required`,
      );
    }
  });

  await t.test('is the document of the route table (checked in-process with buildServer)', async (t) => {
    const offline = await offlineServer();
    t.teardown(() => offline.close());
    t.same(offline.app.swagger(), doc, 'the daemon serves what buildServer documents');

    const routes = registeredRoutes(offline.app);
    t.ok(routes.length >= 20, `${routes.length} routes registered`);
    const documented = new Set(ops.map((o) => o.key));
    const gets = new Set(routes.filter((r) => r.method === 'GET').map((r) => r.url));
    // The browser side (API.md): HTML pages and their assets, outside /v1 and not part of the API.
    const pages = [
      '/',
      '/login',
      '/logout',
      '/queue',
      '/packages',
      '/packages/:bag_id',
      '/audits',
      '/audits/:id',
      '/deaccessions',
      '/deaccessions/:id/approve',
      '/deaccessions/:id/reject',
      '/assets/preservd.css',
      '/assets/audit-progress.js',
      '/assets/favicon.svg',
    ];
    for (const route of routes) {
      if (route.method === 'HEAD') {
        t.ok(
          gets.has(route.url),
          `HEAD ${route.url} is fastify's twin of a GET route (not documented separately)`,
        );
        continue;
      }
      if (pages.includes(route.url)) {
        t.notOk(
          documented.has(`${route.method.toLowerCase()} ${documentedPath(route.url)}`),
          `${route.method} ${route.url} is a page, not in the API document`,
        );
        continue;
      }
      const key = `${route.method.toLowerCase()} ${documentedPath(route.url)}`;
      t.ok(documented.has(key), `${route.method} ${route.url} is documented`);
    }
    const registered = new Set(
      routes
        .filter((r) => r.method !== 'HEAD')
        .map((r) => `${r.method.toLowerCase()} ${documentedPath(r.url)}`),
    );
    for (const key of documented) t.ok(registered.has(key), `${key} is a registered route`);

    const file = join(repoRoot, 'docs', 'openapi.json');
    if (existsSync(file))
      t.same(
        JSON.parse(readFileSync(file, 'utf8')),
        doc,
        'docs/openapi.json is current (npm run openapi rewrites it)',
      );
  });

  await t.test('every documented operation is answered by its handler', async (t) => {
    const admin = d.adminToken;
    // The control: a path nobody registered gets the router's answer.
    const unrouted = await d.request('GET', '/v1/no-such-thing', { token: admin });
    t.equal(unrouted.status, 404);
    t.match(unrouted.json?.error, ROUTER_NOT_FOUND, 'the router says "no such route"');

    for (const { key, method, path } of ops) {
      const url = bogusUrl(path);
      const options = method === 'post' ? { token: admin, form: {} } : { token: admin };
      const answer = await d.request(method.toUpperCase(), url, options);
      t.ok(answer.status < 500, `${key}: ${answer.status} for ${url}`);
      if (answer.status === 404) {
        t.type(answer.json?.error, 'string', `${key}: a JSON 404`);
        t.notMatch(
          answer.json.error,
          ROUTER_NOT_FOUND,
          `${key}: the handler's 404, not the router's (${answer.json.error})`,
        );
      }
    }
  });

  await t.test('summaries, statuses and security', async (t) => {
    t.same(doc.components.securitySchemes.bearer, {
      ...doc.components.securitySchemes.bearer,
      type: 'http',
      scheme: 'bearer',
    });
    t.same(doc.security, [{ bearer: [] }], 'bearer by default');
    for (const { key, method, path, op } of ops) {
      t.ok(typeof op.summary === 'string' && op.summary.length > 3, `${key} has a summary`);
      const codes = Object.keys(op.responses);
      for (const code of API_MD_STATUSES[key] ?? [])
        t.ok(codes.includes(String(code)), `${key} documents ${code}`);
      for (const [code, response] of Object.entries(op.responses)) {
        t.ok(
          response.description !== undefined && response.description !== 'Default Response',
          `${key} ${code} says when it is given`,
        );
        if (code === '201' || code === '303')
          t.ok(response.headers?.Location, `${key} ${code} documents Location`);
        if (code === '401')
          t.ok(response.headers?.['WWW-Authenticate'], `${key} 401 documents WWW-Authenticate`);
      }

      const security = op.security ?? doc.security;
      const anonymous = await d.request(method.toUpperCase(), bogusUrl(path), {
        token: null,
        ...(method === 'post' ? { form: {} } : {}),
      });
      if (PUBLIC.has(key)) {
        t.same(op.security, [], `${key} is documented as public`);
        t.not(anonymous.status, 401, `${key} answers without a token`);
      } else {
        t.same(security, [{ bearer: [] }], `${key} needs the bearer token`);
        t.equal(anonymous.status, 401, `${key} refuses a request without a token`);
        t.equal(anonymous.headers.get('www-authenticate'), 'Bearer realm="preservd"');
      }
    }
    t.ok(
      ops.some((o) => o.key === 'get /v1/openapi.json'),
      'the document documents itself',
    );
    t.same(
      Object.keys(API_MD_STATUSES).filter((k) => !ops.some((o) => o.key === k)),
      [],
      'every operation API.md names is in the document',
    );
  });
});
