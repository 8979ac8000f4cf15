/**
 * What the security probe (research/security-probe.md, findings 8, 9, 10, 15, 16, 17) found, re-run
 * against the real daemon over real HTTP: wrong tokens from one address get 429 with Retry-After
 * past the limit while a correct token from the same address goes on; the CSRF secret is
 * replaced at login and logout; the per-user cap and the idle limit of sessions; cookies are
 * Secure when a trusted proxy says https (and a loud warning when nothing can make them so);
 * /metrics in loopback mode refuses forwarded requests; a forged X-Request-Id is not the log's
 * request id; the security headers of pages and of the API.
 */
import t from 'tap';
import { TestDaemon } from '../helpers/daemon.js';
import { csrfField, getPage, Jar, logIn } from '../helpers/session.js';

t.test('wrong tokens: 429 with Retry-After past the limit, a correct token is never held back', async (t) => {
  const d = await TestDaemon.start(t, {
    config: { auth: { maxFailedAttempts: 5, failedAttemptsWindowSeconds: 60 } },
  });
  const wrong = () => d.request('GET', '/v1/packages', { token: 'not-a-token-at-all' });
  const statuses: number[] = [];
  for (let i = 0; i < 5; i++) statuses.push((await wrong()).status);
  t.same(statuses, [401, 401, 401, 401, 401], 'within the limit: 401');
  const limited = await wrong();
  t.equal(limited.status, 429, 'past it: 429');
  t.ok(
    Number(limited.headers.get('retry-after')) >= 1 && Number(limited.headers.get('retry-after')) <= 60,
    `Retry-After: ${limited.headers.get('retry-after')}`,
  );
  t.match(limited.json.error, /too many wrong tokens from this address/);

  const ok = await Promise.all(Array.from({ length: 50 }, () => d.request('GET', '/v1/packages')));
  t.same(
    [...new Set(ok.map((r) => r.status))],
    [200],
    'the admin token from the same address: 200, 50 times',
  );
  t.equal(
    (await d.request('GET', '/v1/packages', { token: null })).status,
    401,
    'no token at all is a 401, not counted as a guess',
  );

  const jar = new Jar();
  const login = await logIn(d, jar, 'still-not-a-token');
  t.equal(login.res.status, 429, 'the login form too');
  t.ok(Number(login.res.headers.get('retry-after')) >= 1);
  t.match(login.res.text, /Too many wrong tokens from this address/);
  t.notOk(jar.cookies.has('preservd_session'));
  t.equal(
    (await logIn(d, new Jar(), d.adminToken)).res.status,
    303,
    'a correct login from the same address goes through',
  );
});

t.test('the default limit leaves a test suite’s worth of correct requests alone', async (t) => {
  const d = await TestDaemon.start(t);
  for (let i = 0; i < 3; i++)
    t.equal((await d.request('GET', '/v1/packages', { token: 'wrong' })).status, 401);
  const many = await Promise.all(Array.from({ length: 300 }, () => d.request('GET', '/v1/queue/status')));
  t.same([...new Set(many.map((r) => r.status))], [200]);
});

t.test('sessions: CSRF secret replaced at login and logout, per-user cap, idle limit', async (t) => {
  const d = await TestDaemon.start(t, {
    config: { auth: { maxSessionsPerUser: 2, sessionIdleMinutes: 0.05 } },
  });
  const alice = d.addUser('alice');

  const jar = new Jar();
  const loginPage = await getPage(d, jar, '/login');
  jar.take(loginPage.headers);
  const before = jar.cookies.get('_csrf');
  const staleToken = csrfField(loginPage.text);
  t.ok(before);
  t.equal((await logIn(d, jar, alice)).res.status, 303);
  t.not(jar.cookies.get('_csrf'), before, 'login replaced the CSRF secret');
  t.ok(jar.cookies.get('_csrf'), 'with a new one');
  const overview = await getPage(d, jar, '/');
  t.equal(overview.status, 200);
  const refused = await d.request('POST', '/logout', {
    token: null,
    form: { _csrf: staleToken },
    headers: { cookie: jar.header },
  });
  t.equal(refused.status, 403, 'a form token from before the login is refused after it');
  const atLogin = jar.cookies.get('_csrf');
  const out = await d.request('POST', '/logout', {
    token: null,
    form: { _csrf: csrfField(overview.text) },
    headers: { cookie: jar.header },
  });
  t.equal(out.status, 303);
  jar.take(out.headers);
  t.not(jar.cookies.get('_csrf'), atLogin, 'logout replaced it too');

  // The cap: a third login of alice ends her oldest session.
  const jars = [new Jar(), new Jar(), new Jar()];
  for (const j of jars) t.equal((await logIn(d, j, alice)).res.status, 303);
  const pages = await Promise.all(jars.map((j) => getPage(d, j, '/')));
  t.same(
    pages.map((p) => p.status),
    [303, 200, 200],
    'alice keeps her 2 newest sessions',
  );

  // Logging in again from the same browser ends the session it had.
  const browser = new Jar();
  await logIn(d, browser, alice);
  const first = browser.cookies.get('preservd_session')!;
  const again = await d.request('GET', '/login', {
    token: null,
    headers: { cookie: `_csrf=${browser.cookies.get('_csrf')}` },
  });
  const relogin = await d.request('POST', '/login', {
    token: null,
    form: { token: alice, _csrf: csrfField(again.text) },
    headers: { cookie: browser.header },
  });
  t.equal(relogin.status, 303, 'a login from a browser that still has a session');
  browser.take(relogin.headers);
  t.not(browser.cookies.get('preservd_session'), first);
  t.equal(
    (await d.request('GET', '/', { token: null, headers: { cookie: `preservd_session=${first}` } })).status,
    303,
    'the replaced session opens nothing',
  );

  // Idle limit: 3 s unused.
  t.equal((await getPage(d, browser, '/')).status, 200);
  await new Promise((r) => setTimeout(r, 4000));
  t.equal(
    (await getPage(d, browser, '/')).status,
    303,
    'unused past auth.sessionIdleMinutes: back to /login',
  );
});

t.test(
  'cookies are Secure when a trusted proxy says https; a forwarded request is no loopback client for /metrics',
  async (t) => {
    const d = await TestDaemon.start(t, { config: { http: { trustedProxies: ['127.0.0.1', '::1'] } } });
    const viaTls = new Jar();
    const https = { 'x-forwarded-proto': 'https', 'x-forwarded-for': '203.0.113.7' };
    const form = await d.request('GET', '/login', { token: null, headers: https });
    viaTls.take(form.headers);
    const res = await d.request('POST', '/login', {
      token: null,
      form: { token: d.adminToken, _csrf: csrfField(form.text) },
      headers: { ...https, cookie: viaTls.header },
    });
    t.equal(res.status, 303);
    const cookies = res.headers.getSetCookie();
    t.match(
      cookies.find((c) => c.startsWith('preservd_session='))!,
      /; HttpOnly; Secure; SameSite=Strict$/,
      'the session cookie is Secure',
    );
    t.match(
      cookies.find((c) => c.startsWith('_csrf='))!,
      /; Secure;/,
      'the CSRF cookie too',
    );
    const plain = await logIn(d, new Jar(), d.adminToken);
    t.notMatch(
      plain.setCookies.join('\n'),
      /Secure/,
      'a request straight to the daemon over http: not Secure',
    );

    t.equal(
      (await d.request('GET', '/metrics', { token: null })).status,
      200,
      'a local scraper gets the metrics',
    );
    for (const header of [
      { 'x-forwarded-for': '203.0.113.7' },
      { forwarded: 'for=203.0.113.7;proto=https' },
      { 'x-forwarded-for': '127.0.0.1' },
      { 'x-real-ip': '203.0.113.7' },
    ]) {
      const m = await d.request('GET', '/metrics', { token: null, headers: header });
      t.equal(m.status, 403, `forwarded (${Object.keys(header)[0]}): 403`);
    }
  },
);

t.test(
  'without trusted proxies X-Forwarded-Proto is not believed, and a daemon open beyond this host warns loudly',
  async (t) => {
    const d = await TestDaemon.start(t, { config: { http: { host: '0.0.0.0' } } });
    const form = await d.request('GET', '/login', { token: null });
    const jar = new Jar();
    jar.take(form.headers);
    const res = await d.request('POST', '/login', {
      token: null,
      form: { token: d.adminToken, _csrf: csrfField(form.text) },
      headers: { 'x-forwarded-proto': 'https', cookie: jar.header },
    });
    t.equal(res.status, 303);
    t.notMatch(res.headers.getSetCookie().join('\n'), /Secure/, 'a client cannot make itself https');
    t.match(d.output, /INSECURE COOKIES: the API listens on 0\.0\.0\.0/, 'the start-up warning');
    const deadline = Date.now() + 10_000;
    while (!d.output.includes('a proxy says this login came over https') && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 25));
    t.match(
      d.output,
      /INSECURE COOKIES: a proxy says this login came over https/,
      'and the warning at the first proxied login',
    );
    t.equal(
      (await d.request('GET', '/metrics', { token: null, headers: { 'x-forwarded-for': '203.0.113.7' } }))
        .status,
      403,
      'forwarded: no metrics',
    );
  },
);

t.test('security headers: pages (helmet, the same CSP), the API (nosniff, no-store)', async (t) => {
  const d = await TestDaemon.start(t);
  const page = await d.request('GET', '/login', { token: null });
  const h = (name: string) => page.headers.get(name);
  t.equal(
    h('content-security-policy'),
    "default-src 'none';style-src 'self';script-src 'self';img-src 'self';connect-src 'self';form-action 'self';frame-ancestors 'none';base-uri 'none'",
  );
  t.equal(h('x-content-type-options'), 'nosniff');
  t.equal(h('referrer-policy'), 'same-origin');
  t.equal(h('cache-control'), 'no-store');
  t.equal(h('x-frame-options'), 'DENY');
  t.equal(h('cross-origin-opener-policy'), 'same-origin');
  t.equal(h('strict-transport-security'), null, 'HSTS is the TLS proxy’s');
  const notFound = await d.request('GET', '/no-such-page', { token: null, headers: { accept: 'text/html' } });
  t.equal(notFound.status, 404);
  t.equal(notFound.headers.get('x-frame-options'), 'DENY', 'error pages too');

  for (const path of ['/v1/packages', '/v1/queue/status', '/v1/no-such-route']) {
    const api = await d.request('GET', path);
    t.equal(api.headers.get('x-content-type-options'), 'nosniff', `${path}: nosniff`);
    t.equal(api.headers.get('cache-control'), 'no-store', `${path}: no-store`);
  }
  const unauthorized = await d.request('GET', '/v1/packages', { token: 'wrong' });
  t.equal(unauthorized.headers.get('cache-control'), 'no-store', 'a 401 too');
});

t.test('a client’s X-Request-Id: taken when plain, else logged beside our own id, escaped', async (t) => {
  const d = await TestDaemon.start(t, { config: { logLevel: 'info' } });
  const forged = 'req-1 forged "admin" login ok';
  await d.request('GET', '/v1/packages', { headers: { 'x-request-id': forged } });
  await d.request('GET', '/v1/packages', { headers: { 'x-request-id': 'req-1' } });
  await d.request('GET', '/v1/packages', { headers: { 'x-request-id': 'trace-42' } });
  const deadline = Date.now() + 10_000;
  const lines = () =>
    d.output
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map(
        (l) =>
          JSON.parse(l) as {
            msg?: string;
            reqId?: string;
            req?: { route: string; clientRequestId?: string };
          },
      )
      .filter((l) => l.msg === 'incoming request' && l.req?.route === '/v1/packages');
  while (lines().length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
  const [first, second, third] = lines();
  t.notOk(d.output.includes('"reqId":"req-1 forged'), 'the forged text is not the request id of any line');
  t.match(first?.reqId, /^req-[0-9a-z]+$/, 'ours');
  t.equal(first?.req?.clientRequestId, 'req-1 forged ?admin? login ok', 'the client’s, escaped, beside it');
  t.not(second?.reqId, 'req-1', 'an id that could pass for ours is not taken');
  t.equal(second?.req?.clientRequestId, 'req-1');
  t.equal(third?.reqId, 'trace-42', 'a plain one is the request id');
  t.equal(third?.req?.clientRequestId, undefined);
});
