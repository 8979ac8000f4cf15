/**
 * The HTTP API under attack: wrong methods on every route, garbage ids, bodies that are not what
 * they claim, oversized bodies and headers, slow clients, another user probing a bag ten
 * thousand times, and random tokens. Every answer is JSON with a 4xx status (never HTML, never
 * 500), the daemon keeps serving, and nothing in the catalog or storage changes.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { Agent, request as httpRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import t from 'tap';
import { TestDaemon, type HttpResult } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';
import { assertInvariants } from '../helpers/invariants.js';
import { listTree, snapshot } from './fixtures/attack.js';

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

/** Run `tasks` with at most `concurrency` at once. */
async function pool<T>(count: number, concurrency: number, task: (i: number) => Promise<T>): Promise<T[]> {
  const results: T[] = new Array(count);
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const i = next++;
        results[i] = await task(i);
      }
    }),
  );
  return results;
}

/** A JSON error answer: 4xx, a JSON body with one `error` sentence, no HTML, no server path. */
function isCleanError(res: HttpResult, dataDir: string): boolean {
  return (
    res.status >= 400 &&
    res.status < 500 &&
    /^application\/json/.test(res.headers.get('content-type') ?? '') &&
    typeof res.json?.error === 'string' &&
    !/<html|<body/i.test(res.text) &&
    !res.text.includes(dataDir) &&
    !/\bat .*\.js:\d+/.test(res.text)
  );
}

/** A lean keep-alive request (fetch costs too much per call for ten thousand of them). */
function quickRequest(
  agent: Agent,
  port: number,
  method: string,
  path: string,
  token: string,
  json?: unknown,
): Promise<HttpResult> {
  return new Promise((ok, fail) => {
    const body = json === undefined ? undefined : JSON.stringify(json);
    const req = httpRequest(
      {
        agent,
        host: '127.0.0.1',
        port,
        method,
        path,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown;
          try {
            parsed = text === '' ? undefined : JSON.parse(text);
          } catch {
            parsed = undefined;
          }
          const headers = new Headers();
          for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') headers.set(k, v);
          ok({ status: res.statusCode ?? 0, headers, text, json: parsed });
        });
      },
    );
    req.on('error', fail);
    req.end(body);
  });
}

/** Write `bytes` to a fresh connection and collect whatever comes back until it closes. */
function rawExchange(port: number, bytes: string | Buffer, timeoutMs = 5000): Promise<string> {
  return new Promise((ok) => {
    const socket = connect(port, '127.0.0.1');
    let answer = '';
    socket.on('data', (c) => (answer += c.toString('latin1')));
    socket.on('error', () => undefined);
    socket.on('close', () => ok(answer));
    socket.setTimeout(timeoutMs, () => socket.destroy());
    socket.write(bytes);
  });
}

t.test('hostile HTTP clients', async (t) => {
  // No limit on wrong tokens here: this test is about what each of 2,000 wrong ones gets, where the
  // limit (test/http/web-hardening.test.ts) would answer 429 past the 30th.
  const d = await TestDaemon.start(t, {
    config: { http: { requestTimeoutMs: 2000 }, auth: { maxFailedAttempts: 0 } },
  });
  const alice = d.addUser('alice');
  const mallory = d.addUser('mallory');
  const { request: bag, item } = await ingestBag(d, alice, { 'a.txt': 'alice secret\n' });
  const aliceBag = bag.bag_id as string;
  const healthy = async (): Promise<void> => {
    const res = await d.request('GET', `/v1/packages/${aliceBag}`, { token: alice });
    t.equal(res.status, 200, 'the daemon still serves');
  };
  const before = await snapshot(d);

  await t.test('wrong methods on every route answer JSON 404, never HTML or 500', async (t) => {
    const doc = (await d.request('GET', '/v1/openapi.json', { token: null })).json;
    const paths = Object.keys(doc.paths).filter((p) => p.startsWith('/v1/'));
    t.ok(paths.length >= 15, `${paths.length} documented paths`);
    const wrong: string[] = [];
    for (const template of paths) {
      const allowed = new Set(Object.keys(doc.paths[template]).map((m) => m.toUpperCase()));
      if (allowed.has('GET')) allowed.add('HEAD');
      const path = template
        .replace('{bag_id}', aliceBag)
        .replace('{id}', '1')
        .replace('{file}', 'a.txt')
        .replace('{*}', 'a.txt');
      for (const method of METHODS.filter((m) => !allowed.has(m))) {
        const res = await d.request(method, path, {
          token: alice,
          json: method === 'GET' || method === 'HEAD' ? undefined : {},
        });
        const clean = method === 'HEAD' ? res.text === '' : isCleanError(res, d.dataDir);
        if (res.status !== 404 || !clean)
          wrong.push(`${method} ${template}: ${res.status} ${res.text.slice(0, 100)}`);
      }
    }
    t.same(wrong, [], 'every wrong method is a JSON 404 (docs/decisions.md)');
  });

  await t.test('garbage ids: 400 or 404, never 500', async (t) => {
    const garbage = [
      'x'.repeat(5000),
      'é💥\u202e',
      '%00',
      'a%00b',
      '..%2f..%2fetc%2fpasswd',
      '..%2F..%2F..%2F',
      "1'%20OR%20'1'='1",
      '1;DROP%20TABLE%20packages',
      '${jndi:ldap:x}',
      '12345',
      '-1',
      '1e3',
      '0x10',
      '99999999999999999999999',
      encodeURIComponent(aliceBag.toUpperCase() + ' '),
      '%ff%fe',
      '%',
    ];
    const routes = [
      (g: string) => ['GET', `/v1/requests/${g}`],
      (g: string) => ['GET', `/v1/packages/${g}`],
      (g: string) => ['GET', `/v1/bags/${g}`],
      (g: string) => ['GET', `/v1/packages/${g}/events`],
      (g: string) => ['GET', `/v1/packages/${g}/download`],
      (g: string) => ['GET', `/v1/packages/${aliceBag}/${g}`],
      (g: string) => ['POST', `/v1/requests/${g}/complete`],
      (g: string) => ['GET', `/v1/queue/${g}`],
      (g: string) => ['GET', `/v1/audits/${g}`],
      (g: string) => ['GET', `/v1/queue?package=${g}`],
      (g: string) => ['GET', `/v1/events?bag_id=${g}`],
    ];
    const bad: string[] = [];
    for (const route of routes) {
      for (const g of garbage) {
        const [method, path] = route(g) as [string, string];
        const res = await d.request(method, path, { token: alice });
        const listOk = res.status === 200 && Array.isArray(res.json) && res.json.length === 0;
        // Audits are admins' only, whatever the id (checked before the audit is looked up).
        const allowed = path.startsWith('/v1/audits/') ? [400, 403, 414] : [400, 404, 414];
        if (!listOk && (!allowed.includes(res.status) || !isCleanError(res, d.dataDir)))
          bad.push(`${method} ${path.slice(0, 80)}: ${res.status} ${res.text.slice(0, 120)}`);
      }
    }
    t.same(bad, [], 'every garbage id is a clean 400, 404 or 414 (or an empty list)');
    const itemAsBag = await d.request('GET', `/v1/packages/${item.id}`, { token: alice });
    t.equal(itemAsBag.status, 404, 'a queue id is not a bag id');
    const bagAsItem = await d.request('GET', `/v1/queue/${aliceBag}`, { token: alice });
    t.equal(bagAsItem.status, 400, 'a bag id is not a queue id');
    const traversal = await rawExchange(
      d.httpPort,
      `GET /v1/packages/${aliceBag}/../../../../etc/passwd HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${alice}\r\nConnection: close\r\n\r\n`,
    );
    t.match(traversal, /^HTTP\/1\.1 404 /, 'a raw ../ path is a 404');
    t.notMatch(traversal, /root:x:0:0/);
    // fetch() resolves %2e%2e as ".." (WHATWG URL); sent raw, it is just an unknown id.
    const dots = await rawExchange(
      d.httpPort,
      `GET /v1/packages/%2e%2e/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${alice}\r\nConnection: close\r\n\r\n`,
    );
    t.match(dots, /^HTTP\/1\.1 404 /, 'an encoded .. is a 404');
  });

  await t.test('bodies that are not what they claim', async (t) => {
    const post = (body: string | Uint8Array, contentType: string) =>
      d.request('POST', '/v1/requests', { token: alice, body, headers: { 'content-type': contentType } });
    const fields = { bag_id: randomUUID(), external_id: 'x', content_type: 'video' };
    const cases: Array<[string, HttpResult, number[]]> = [
      ['a JSON array', await post('[1,2,3]', 'application/json'), [422]],
      ['JSON null', await post('null', 'application/json'), [422]],
      ['a JSON string', await post('"bag"', 'application/json'), [422]],
      [
        'deeply nested JSON',
        await post('['.repeat(30_000) + ']'.repeat(30_000), 'application/json'),
        [400, 422],
      ],
      [
        'invalid UTF-8',
        await post(Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d]), 'application/json'),
        [400, 422],
      ],
      [
        '__proto__ pollution',
        await post(
          `{"__proto__":{"admin":true},"constructor":{"prototype":{"admin":true}},"bag_id":"${randomUUID()}"}`,
          'application/json',
        ),
        [400, 422],
      ],
      [
        'fields of the wrong types',
        await post(
          JSON.stringify({ bag_id: [randomUUID()], external_id: { a: 1 }, content_type: 7, user: true }),
          'application/json',
        ),
        [422],
      ],
      [
        'form fields given twice',
        await post(
          `bag_id=${randomUUID()}&bag_id=${randomUUID()}&external_id=a&content_type=video`,
          'application/x-www-form-urlencoded',
        ),
        [422],
      ],
      // fastify parses text/plain as a string: not an object, so 422.
      ['text/plain', await post(JSON.stringify(fields), 'text/plain'), [415, 422]],
      [
        'multipart',
        await post(
          '--b\r\nContent-Disposition: form-data; name="bag_id"\r\n\r\nx\r\n--b--\r\n',
          'multipart/form-data; boundary=b',
        ),
        [415],
      ],
      [
        'a content type that lies about its charset',
        await post(
          JSON.stringify({ ...fields, bag_id: 'nope' }).replace('"x"', '"\u00e9"'),
          'application/json; charset=latin1',
        ),
        [400, 415, 422],
      ],
      [
        'an oversized form',
        await post(
          `bag_id=${randomUUID()}&external_id=${'x'.repeat(100_000)}&content_type=video`,
          'application/x-www-form-urlencoded',
        ),
        [413],
      ],
    ];
    for (const [what, res, statuses] of cases) {
      t.ok(
        statuses.includes(res.status) && isCleanError(res, d.dataDir),
        `${what}: ${res.status} ${res.text.slice(0, 120)}`,
      );
    }
    t.equal(({} as any).admin, undefined, 'no prototype was polluted (in this process, at least)');
    const me = await d.request('GET', '/v1/audits', { token: alice });
    t.equal(me.status, 403, 'and alice did not become an admin');

    const chunked = await rawExchange(
      d.httpPort,
      `POST /v1/requests HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${alice}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n` +
        `10000\r\n${'x'.repeat(0x10000)}\r\n10000\r\n${'x'.repeat(0x10000)}\r\n0\r\n\r\n`,
    );
    t.match(chunked, /^HTTP\/1\.1 413 /, 'a chunked body over the limit is refused without a Content-Length');
    const smuggle = await rawExchange(
      d.httpPort,
      `POST /v1/requests HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n`,
    );
    t.match(
      smuggle,
      /^HTTP\/1\.1 400 /,
      'Content-Length with Transfer-Encoding is refused (request smuggling)',
    );
    await healthy();
  });

  await t.test('huge headers: 431, and the daemon keeps serving', async (t) => {
    const answer = await rawExchange(
      d.httpPort,
      `GET /v1/requests HTTP/1.1\r\nHost: x\r\nX-Filler: ${'a'.repeat(64 << 10)}\r\n\r\n`,
    );
    t.match(answer, /^HTTP\/1\.1 431 /);
    t.equal(
      JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)).error,
      'the request headers are too large',
      "in the API's error shape",
    );
    const token = await d.request('GET', '/v1/requests', { token: 'x'.repeat(12_000) });
    t.equal(token.status, 401, 'a 12 kB token is just unknown');
    const many = await rawExchange(
      d.httpPort,
      `GET /v1/requests HTTP/1.1\r\nHost: x\r\n${Array.from({ length: 3000 }, (_, i) => `X-H${i}: v`).join('\r\n')}\r\n\r\n`,
    );
    t.match(many, /^HTTP\/1\.1 (431|400) /, 'thousands of headers');
    await healthy();
  });

  await t.test(
    'slowloris: 50 sockets trickling headers are cut off; others are served meanwhile',
    async (t) => {
      const sockets: Socket[] = [];
      const closed: Promise<string>[] = [];
      const opened = Date.now();
      for (let i = 0; i < 50; i++) {
        const socket = connect(d.httpPort, '127.0.0.1');
        socket.on('error', () => undefined);
        let answer = '';
        socket.on('data', (c) => (answer += c.toString()));
        closed.push(new Promise((ok) => socket.on('close', () => ok(answer))));
        socket.write('GET /v1/requests HTTP/1.1\r\nHost: x\r\n');
        sockets.push(socket);
      }
      const trickle = setInterval(() => {
        for (const s of sockets) if (!s.destroyed) s.write('X');
      }, 100);
      try {
        const times: number[] = [];
        for (let i = 0; i < 10; i++) {
          const started = Date.now();
          t.equal((await d.request('GET', '/v1/requests', { token: alice })).status, 200);
          times.push(Date.now() - started);
        }
        t.ok(Math.max(...times) < 1500, `others are served meanwhile (slowest ${Math.max(...times)} ms)`);
        const answers = await Promise.race([
          Promise.all(closed),
          new Promise<null>((ok) => setTimeout(() => ok(null), 8000)),
        ]);
        t.ok(
          answers !== null,
          `every slow socket is closed (after ${Date.now() - opened} ms; requestTimeoutMs is 2000)`,
        );
        if (answers !== null)
          t.ok(
            answers.every((a) => a === '' || /^HTTP\/1\.1 408 /.test(a)),
            'with a 408 or nothing',
          );
      } finally {
        clearInterval(trickle);
        for (const s of sockets) s.destroy();
      }
      await healthy();
    },
  );

  await t.test(
    "10,000 requests with another user's token against a bag: 403/404, nothing leaks",
    async (t) => {
      const probes: Array<[string, string]> = [
        ['GET', `/v1/requests/${aliceBag}`],
        ['GET', `/v1/packages/${aliceBag}`],
        ['GET', `/v1/bags/${aliceBag}`],
        ['GET', `/v1/packages/${aliceBag}/events`],
        ['GET', `/v1/packages/${aliceBag}/download`],
        ['GET', `/v1/packages/${aliceBag}/a.txt`],
        ['HEAD', `/v1/packages/${aliceBag}/a.txt`],
        ['POST', `/v1/requests/${aliceBag}/complete`],
        ['GET', `/v1/queue/${item.id}`],
        ['GET', `/v1/queue?package=${aliceBag}`],
        ['GET', `/v1/events?bag_id=${aliceBag}`],
        ['GET', `/v1/packages/${bag.external_id}`],
        ['POST', '/v1/requests'],
      ];
      const started = Date.now();
      const agent = new Agent({ keepAlive: true, maxSockets: 32 });
      t.teardown(() => agent.destroy());
      const leaks: string[] = [];
      const statuses = new Map<number, number>();
      await pool(10_000, 32, async (i) => {
        const [method, path] = probes[i % probes.length]!;
        const body =
          method === 'POST' && path === '/v1/requests'
            ? { bag_id: aliceBag, external_id: 'x', content_type: 'video' }
            : undefined;
        const res = await quickRequest(agent, d.httpPort, method, path, mallory, body);
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        const emptyList = res.status === 200 && Array.isArray(res.json) && res.json.length === 0;
        const refused =
          [403, 404, 409].includes(res.status) && (method === 'HEAD' || isCleanError(res, d.dataDir));
        // The external_id may come back only to a caller who asked by it (a 403 repeats what was asked).
        const externalIdShown = res.text.includes(bag.external_id) && !path.includes(bag.external_id);
        if (
          (!emptyList && !refused) ||
          res.text.includes('alice secret') ||
          externalIdShown ||
          res.text.includes('storage_location')
        )
          leaks.push(`${method} ${path}: ${res.status} ${res.text.slice(0, 100)}`);
      });
      const seconds = (Date.now() - started) / 1000;
      t.same(
        leaks.slice(0, 10),
        [],
        `no answer leaks (${JSON.stringify(Object.fromEntries(statuses))} in ${seconds} s)`,
      );
      await healthy();
    },
  );

  await t.test('2,000 random tokens: all 401, and none works', async (t) => {
    const forms = [
      (s: string) => `Bearer ${s}`,
      (s: string) => `Token token="${s}"`,
      (s: string) => `Bearer token=${s}`,
      (s: string) => s,
    ];
    const results = await pool(2000, 32, async (i) => {
      const secret =
        i % 10 === 0
          ? alice.slice(0, -1) + (alice.endsWith('A') ? 'B' : 'A')
          : randomBytes(32).toString('base64url');
      const res = await d.request('GET', '/v1/requests', {
        token: null,
        headers: { authorization: forms[i % forms.length]!(secret) },
      });
      return (
        res.status === 401 &&
        res.headers.get('www-authenticate') === 'Bearer realm="preservd"' &&
        isCleanError(res, d.dataDir)
      );
    });
    t.equal(results.filter(Boolean).length, 2000, 'every guess is a clean 401 with WWW-Authenticate');
    const odd = [
      'Bearer',
      'Bearer ',
      'Basic YWxpY2U6eA==',
      `Bearer ${alice}\u0000`,
      `Bearer ${alice} ${alice}`,
      'Token token=',
      `Bearer ${'é'.repeat(10)}`,
    ];
    for (const header of odd) {
      const res = await fetch(`${d.url}/v1/requests`, { headers: { authorization: header } }).catch(
        () => undefined,
      );
      t.ok(
        res === undefined || res.status === 401,
        `${JSON.stringify(header.slice(0, 30))}: ${res?.status ?? 'refused by the client'}`,
      );
    }
    await healthy();
  });

  t.same(await snapshot(d), before, 'no attack changed the catalog or storage');
  await d.stop();
  await assertInvariants(t, d.dataDir);
  t.same(await listTree(join(d.dataDir, 'staging')), []);
});
