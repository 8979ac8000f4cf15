/**
 * The pages' sessions and their cookie rules (API.md, "The browser side"), over real HTTP: login
 * with a token through the CSRF-protected form, a wrong token is a 401 with no session cookie,
 * the cookie's attributes, the cookie accepted on /v1 for GET and HEAD only (a cookie alone never
 * POSTs), CSRF on the pages' forms, logout, revoking the token, and expiry.
 */
import { createHash } from 'node:crypto';
import t from 'tap';
import { TestDaemon } from '../helpers/daemon.js';
import { csrfField, Jar, logIn } from '../helpers/session.js';

t.test('login, the cookie rules, CSRF, logout, revocation', async (t) => {
  const d = await TestDaemon.start(t);
  const alice = d.addUser('alice');
  const withCookie = (
    jar: Jar,
    method: string,
    path: string,
    extra: Parameters<TestDaemon['request']>[2] = {},
  ) => d.request(method, path, { token: null, ...extra, headers: { cookie: jar.header, ...extra.headers } });

  const anonymous = await d.request('GET', '/', { token: null });
  t.same(
    [anonymous.status, anonymous.headers.get('location')],
    [303, '/login'],
    'a page without a session: 303 to /login',
  );
  t.equal((await d.request('GET', '/packages', { token: null })).headers.get('location'), '/login');

  const page = await d.request('GET', '/login', { token: null });
  t.equal(page.status, 200);
  t.match(page.headers.get('content-type'), /^text\/html; charset=utf-8/);
  t.match(page.text, /<label for="token">Token<\/label>/);
  t.match(page.headers.get('content-security-policy'), /default-src 'none'/);

  const wrongJar = new Jar();
  const wrong = await logIn(d, wrongJar, 'not-a-token');
  t.equal(wrong.res.status, 401, 'a wrong token: 401');
  t.match(wrong.res.text, /That token is unknown or revoked/);
  t.match(wrong.res.text, /<form method="post" action="\/login"/, 'with the form again');
  t.notOk(wrongJar.cookies.has('preservd_session'), 'and no session cookie');

  const noCsrfJar = new Jar();
  const noCsrf = await logIn(d, noCsrfJar, alice, { csrf: false });
  t.equal(noCsrf.res.status, 403, 'the login form without its CSRF token is refused');
  t.notOk(noCsrfJar.cookies.has('preservd_session'));

  const jar = new Jar();
  const ok = await logIn(d, jar, alice);
  t.same([ok.res.status, ok.res.headers.get('location')], [303, '/']);
  const session = ok.setCookies.find((c) => c.startsWith('preservd_session='))!;
  t.match(
    session,
    /; Max-Age=43200; Path=\/; HttpOnly; SameSite=Strict$/,
    'HttpOnly, SameSite=Strict, Path=/, 12 hours, not Secure by default',
  );
  t.notOk(JSON.stringify(ok.setCookies).includes(alice), 'the cookie is not the token');

  const overview = await withCookie(jar, 'GET', '/');
  t.equal(overview.status, 200);
  t.match(overview.text, /Signed in as <strong>alice<\/strong>/);
  t.equal(
    (await withCookie(jar, 'GET', '/login')).headers.get('location'),
    '/',
    'logged in: /login goes to /',
  );

  // On /v1 the cookie stands for the token on GET and HEAD only.
  t.equal((await withCookie(jar, 'GET', '/v1/packages')).status, 200);
  t.equal((await withCookie(jar, 'HEAD', '/v1/queue/status')).status, 200);
  const body = {
    json: {
      bag_id: '0b5e2a2e-3c4f-4d6e-8f70-8192a3b4c5d6',
      external_id: 'by-cookie',
      content_type: 'digital',
    },
  };
  const post = await withCookie(jar, 'POST', '/v1/requests', body);
  t.equal(post.status, 401, 'a cookie alone cannot POST');
  t.equal(post.headers.get('www-authenticate'), 'Bearer realm="preservd"');
  const withCsrf = await withCookie(jar, 'POST', '/v1/requests', {
    ...body,
    headers: { 'x-csrf-token': csrfField(overview.text) },
  });
  t.equal(withCsrf.status, 401, 'not even with a CSRF token');
  t.equal((await withCookie(jar, 'POST', '/v1/audits')).status, 401);
  t.equal((await withCookie(jar, 'GET', '/v1/requests')).json.length, 0, 'nothing was created');
  t.equal(
    (await d.request('GET', '/v1/packages', { token: null, headers: { cookie: 'preservd_session=forged' } }))
      .status,
    401,
    'a made-up session is nobody',
  );

  await t.test('an admin’s form posts need the CSRF token', async (t) => {
    const adminJar = new Jar();
    t.equal((await logIn(d, adminJar, d.adminToken)).res.status, 303);
    const audits = await withCookie(adminJar, 'GET', '/audits');
    const refused = await withCookie(adminJar, 'POST', '/audits', { form: { other: 'x' } });
    t.equal(refused.status, 403, 'no CSRF token: 403');
    t.match(refused.text, /The form had expired or did not come from this site/);
    t.equal((await d.request('GET', '/v1/audits')).json.length, 0, 'no audit was started');
    const started = await withCookie(adminJar, 'POST', '/audits', {
      form: { _csrf: csrfField(audits.text) },
    });
    t.same([started.status, started.headers.get('location')], [303, '/audits/1']);
    t.equal((await d.request('GET', '/v1/audits')).json.length, 1);
    const aliceTries = await withCookie(jar, 'POST', '/audits', {
      form: { _csrf: csrfField(overview.text) },
    });
    t.equal(aliceTries.status, 403, 'a regular user may not start audits from the page either');
    t.match(aliceTries.text, /Audits are for administrators/);
  });

  await t.test('logout ends the session', async (t) => {
    const other = new Jar();
    t.equal((await logIn(d, other, alice)).res.status, 303);
    const before = await withCookie(other, 'GET', '/');
    const stale = new Map(other.cookies);
    const out = await withCookie(other, 'POST', '/logout', { form: { _csrf: csrfField(before.text) } });
    t.same([out.status, out.headers.get('location')], [303, '/login']);
    t.match(
      other.take(out.headers).join('\n'),
      /preservd_session=; Max-Age=0; Path=\/; Expires=Thu, 01 Jan 1970 00:00:00 GMT; HttpOnly; SameSite=Strict/,
    );
    t.notOk(other.cookies.has('preservd_session'), 'the cookie is cleared');
    const replay = [...stale].map(([k, v]) => `${k}=${v}`).join('; ');
    t.equal(
      (await d.request('GET', '/', { token: null, headers: { cookie: replay } })).status,
      303,
      'the old cookie opens nothing',
    );
    t.equal(
      (await d.request('GET', '/v1/packages', { token: null, headers: { cookie: replay } })).status,
      401,
    );
  });

  await t.test('revoking the token ends its sessions', async (t) => {
    const bobToken = d.addUser('bob');
    const bobJar = new Jar();
    t.equal((await logIn(d, bobJar, bobToken)).res.status, 303);
    t.equal((await withCookie(bobJar, 'GET', '/')).status, 200);
    // A token's public id is the first 16 hex digits of its digest (catalog/users.ts).
    const firstId = createHash('sha256').update(bobToken).digest('hex').slice(0, 16);
    t.equal(d.cli(['token', 'revoke', firstId]).code, 0);
    t.equal((await withCookie(bobJar, 'GET', '/')).status, 303, 'the session went with its token');
  });
});

t.test(
  'sessions expire; http.secureCookies marks the cookies Secure; the cookie is for /v1 only',
  async (t) => {
    const d = await TestDaemon.start(t, {
      config: { auth: { sessionHours: 0.0005 }, http: { secureCookies: true }, metrics: { access: 'admin' } },
    });
    const jar = new Jar();
    const { res, setCookies } = await logIn(d, jar, d.adminToken);
    t.equal(res.status, 303);
    t.match(
      setCookies.find((c) => c.startsWith('preservd_session='))!,
      /; Max-Age=1; Path=\/; HttpOnly; Secure; SameSite=Strict$/,
    );
    t.equal((await d.request('GET', '/', { token: null, headers: { cookie: jar.header } })).status, 200);
    t.equal(
      (await d.request('GET', '/metrics', { token: null, headers: { cookie: jar.header } })).status,
      401,
      'an admin’s cookie does not open /metrics',
    );
    t.equal((await d.request('GET', '/metrics')).status, 200, 'the admin token does');
    await new Promise((r) => setTimeout(r, 2000));
    t.equal(
      (await d.request('GET', '/', { token: null, headers: { cookie: jar.header } })).status,
      303,
      'expired after sessionHours',
    );
  },
);
