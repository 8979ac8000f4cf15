/**
 * The deaccession page with the real daemon: an admin sees the requests and decides there with
 * CSRF-protected forms (a form without the token changes nothing); the admin who asked gets no
 * forms for their own, and a post of one anyway is refused with the second-admin message; others
 * get 403; the package page of a tombstone says so and offers no download.
 */
import t from 'tap';
import { TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';
import { csrfField, getPage, Jar, logIn } from '../helpers/session.js';

function post(d: TestDaemon, jar: Jar, path: string, form: Record<string, string>) {
  return d.request('POST', path, { token: null, headers: { cookie: jar.header }, form });
}

t.test('an admin decides on the deaccession page, with CSRF-protected forms', async (t) => {
  const d = await TestDaemon.start(t, { config: { storage: { recordDelayMs: 100 } } });
  const second = d.addUser('second', true);
  const carol = d.addUser('carol');
  const bagId = (await ingestBag(d, d.adminToken, { 'a.txt': 'out\n' })).request.bag_id as string;
  const other = (await ingestBag(d, d.adminToken, { 'b.txt': 'in\n' })).request.bag_id as string;
  const asked = await d.request('POST', `/v1/packages/${bagId}/deaccession`, {
    token: second,
    json: { reason: 'a <takedown>' },
  });
  const id = asked.json.id as number;
  const askedOther = await d.request('POST', `/v1/packages/${other}/deaccession`, {
    token: d.adminToken,
    json: { reason: 'my own' },
  });

  const carolJar = new Jar();
  await logIn(d, carolJar, carol);
  t.equal((await getPage(d, carolJar, '/deaccessions')).status, 403, 'not for others');

  const jar = new Jar();
  t.equal((await logIn(d, jar, d.adminToken)).res.status, 303);
  const page = await getPage(d, jar, '/deaccessions');
  t.equal(page.status, 200);
  t.match(page.text, 'a &lt;takedown&gt;', 'the reason, escaped');
  t.match(page.text, `action="/deaccessions/${id}/approve"`, 'a form to approve what another asked');
  t.notMatch(
    page.text,
    `action="/deaccessions/${askedOther.json.id}/approve"`,
    'none for what this admin asked',
  );
  t.match(page.text, 'a second admin must decide');
  const csrf = csrfField(page.text);

  const forged = await post(d, jar, `/deaccessions/${id}/approve`, { reason: '' });
  t.equal(forged.status, 403, 'no CSRF token: refused');
  t.equal((await d.request('GET', `/v1/deaccessions/${id}`)).json.status, 'requested', 'and nothing changed');
  const own = await post(d, jar, `/deaccessions/${askedOther.json.id}/approve`, { _csrf: csrf, reason: '' });
  t.equal(own.status, 403);
  t.match(own.text, 'second admin');
  t.equal(
    (await post(d, jar, `/deaccessions/${askedOther.json.id}/reject`, { _csrf: csrf, reason: '' })).status,
    403,
  );

  const approved = await post(d, jar, `/deaccessions/${id}/approve`, { _csrf: csrf, reason: '' });
  t.equal(approved.status, 303);
  t.equal(approved.headers.get('location'), '/deaccessions');
  t.match((await d.request('GET', `/v1/deaccessions/${id}`)).json, {
    status: 'approved',
    decided_by: 'admin',
    decision_reason: null,
  });
  const after = await getPage(d, jar, '/deaccessions');
  t.match(after.text, /Decided[^]*approved[^]*second[^]*admin/);

  const tombstone = await getPage(d, jar, `/packages/${bagId}`);
  t.equal(tombstone.status, 200);
  t.match(tombstone.text, 'Deaccessioned');
  t.notMatch(tombstone.text, `/v1/packages/${bagId}/download`, 'no download offered');
});
