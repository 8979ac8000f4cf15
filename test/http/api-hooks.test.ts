/**
 * The API's routes run none of the pages' per-request hooks (docs/decisions.md, "The pages'
 * plugins in the pages' scope"): no cookie parsing or writing (@fastify/cookie), no view locals
 * (@fastify/view), no helmet, only their headers and authentication; the pages keep every one of
 * theirs. Read from fastify's own table of each route's hooks (`printRoutes({ includeHooks })`).
 */
import type { FastifyInstance } from 'fastify';
import t from 'tap';
import { offlineServer } from '../../src/http/offline.js';

type Hooks = Record<string, string[]>;

/** Every route of `method`, by URL, with its hooks (hook name → its functions' names, in order). */
function routeHooks(app: FastifyInstance, method: string): Map<string, Hooks> {
  const routes = new Map<string, Hooks>();
  const path: string[] = [];
  let hooks: Hooks = {};
  for (const line of app.printRoutes({ method, includeHooks: true, commonPrefix: false }).split('\n')) {
    const hook = /• \((\w+)\) (\[.*\])$/.exec(line);
    if (hook !== null) {
      hooks[hook[1]!] = JSON.parse(hook[2]!) as string[];
      continue;
    }
    // `│   ├── segment (GET)`: four characters per level of the tree.
    const node = /^(.*?)[├└]── (.*?)(?: \(([A-Z, ]+)\))?$/.exec(line);
    if (node === null) continue;
    path.length = node[1]!.length / 4;
    path.push(node[2]!);
    hooks = {};
    if (node[3] !== undefined) routes.set(path.join(''), hooks);
  }
  return routes;
}

t.test("the API's routes run only the API's hooks; the pages run theirs", async (t) => {
  const server = await offlineServer({ metrics: { access: 'admin' } });
  t.teardown(() => server.close());
  const isApi = (url: string) => url.startsWith('/v1/') || url === '/metrics';
  let api = 0;
  let pages = 0;
  for (const method of ['GET', 'HEAD', 'POST', 'PUT', 'DELETE']) {
    for (const [url, hooks] of routeHooks(server.app, method)) {
      if (isApi(url)) {
        api++;
        t.same(
          hooks,
          {
            onRequest: ['apiHeaders()', 'authenticate()'],
            // fastify's own, which drops the body of a HEAD it answers from the GET route.
            ...(method === 'HEAD' ? { onSend: ['headRouteOnSendHandler()'] } : {}),
            onResponse: ['countResponse()'],
          },
          `${method} ${url}: its headers, authentication and the metrics only`,
        );
      } else if (!url.startsWith('/assets/')) {
        pages++;
        t.match(
          hooks,
          {
            onRequest: [
              'apiHeaders()',
              'fastifyCookieHandler()',
              String,
              'authenticatePage()',
              'helmetConfigureReply()',
              'helmetApplyHeaders()',
            ],
            onSend: ['fastifyCookieOnSendHandler()'],
          },
          `${method} ${url}: cookies, views, the session and helmet`,
        );
      }
    }
  }
  t.ok(api >= 30, `the API's routes were all read (${api})`);
  t.ok(pages >= 8, `the pages were all read (${pages})`);
  t.ok(routeHooks(server.app, 'GET').has('/v1/packages/:bag_id'), 'the show among them');
});
