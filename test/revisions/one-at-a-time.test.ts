/**
 * One change in flight per package (API.md, "Deaccession": a revision or deaccession on a
 * package that has another in flight answers 409): a deaccession is refused while a revision is
 * open, a revision while a deaccession is requested, each with a message saying why; once the
 * other is abandoned or decided, the refused one can go on. Through the real daemon.
 */
import t from 'tap';
import { TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';
import { assertInvariants } from '../helpers/invariants.js';

t.test('a revision and a deaccession of one package never both in flight', async (t) => {
  const d = await TestDaemon.start(t);
  const { request } = await ingestBag(d, d.adminToken, { 'a.txt': 'alpha\n' });
  const bagId: string = request.bag_id;

  const revision = await d.request('POST', `/v1/packages/${bagId}/revisions`, { json: {} });
  t.equal(revision.status, 201, revision.text);
  const asked = await d.request('POST', `/v1/packages/${bagId}/deaccession`, {
    json: { reason: 'a rights claim' },
  });
  t.equal(asked.status, 409, 'no deaccession while a revision is open');
  t.match(asked.json.error, /open revision/);

  const abandoned = await d.request('DELETE', `/v1/packages/${bagId}/revisions/${revision.json.version}`);
  t.equal(abandoned.status, 204, abandoned.text);
  const requested = await d.request('POST', `/v1/packages/${bagId}/deaccession`, {
    json: { reason: 'a rights claim' },
  });
  t.equal(requested.status, 201, `asked again once the revision is abandoned: ${requested.text}`);

  const refused = await d.request('POST', `/v1/packages/${bagId}/revisions`, { json: {} });
  t.equal(refused.status, 409, 'no revision while a deaccession is requested');
  t.match(refused.json.error, /deaccession requested/);

  const bob = d.addUser('bob', true);
  const rejected = await d.request('POST', `/v1/deaccessions/${requested.json.id}/reject`, {
    token: bob,
    json: { reason: 'the claim was withdrawn' },
  });
  t.equal(rejected.status, 200, rejected.text);
  const reopened = await d.request('POST', `/v1/packages/${bagId}/revisions`, { json: {} });
  t.equal(reopened.status, 201, `a revision once the deaccession is rejected: ${reopened.text}`);
  t.equal(await d.stop(), 0);
  await assertInvariants(t, d.dataDir, 'the invariants hold with the revision open, its upload pre-filled');
});
