/**
 * What a refusal tells (security-probe.md, finding 14): a 403 for a package asked for by
 * external_id names what the caller asked, never the bag_id behind it (API and page); the
 * admin-only audits answer a regular user the same 403 whether the audit exists or not.
 */
import { randomUUID } from 'node:crypto';
import t from 'tap';
import { TestDaemon } from '../helpers/daemon.js';
import { getPage, Jar, logIn } from '../helpers/session.js';

t.test('refusals say nothing the caller did not already know', async (t) => {
  const d = await TestDaemon.start(t);
  const bob = d.addUser('bob');
  const mallory = d.addUser('mallory');
  const bagId = randomUUID();
  await d.createRequest(bob, { bag_id: bagId, external_id: '39015012345678' });

  const api = await d.request('GET', '/v1/packages/39015012345678', { token: mallory });
  t.equal(api.status, 403);
  t.same(api.json, { error: 'package "39015012345678" belongs to another user' });
  t.notOk(api.text.includes(bagId), 'the bag_id behind the external_id stays unsaid');
  const byId = await d.request('GET', `/v1/requests/${bagId}`, { token: mallory });
  t.same(
    [byId.status, byId.json],
    [403, { error: `package "${bagId}" belongs to another user` }],
    'asked by bag_id: the bag_id asked for',
  );

  const jar = new Jar();
  t.equal((await logIn(d, jar, mallory)).res.status, 303);
  const page = await getPage(d, jar, '/packages/39015012345678');
  t.equal(page.status, 403);
  t.notOk(page.text.includes(bagId), 'the page does not name it either');

  const started = await d.request('POST', '/v1/audits');
  t.equal(started.status, 201);
  const existing = await d.request('GET', `/v1/audits/${started.json.id}`, { token: mallory });
  const missing = await d.request('GET', '/v1/audits/999', { token: mallory });
  t.same([existing.status, missing.status], [403, 403], 'admins only, whether the audit exists or not');
  t.equal(existing.text, missing.text, 'the same answer');
  t.same(
    [
      (await getPage(d, jar, `/audits/${started.json.id}`)).status,
      (await getPage(d, jar, '/audits/999')).status,
    ],
    [403, 403],
    'and the pages',
  );
  t.equal(
    (await d.request('GET', '/v1/audits/999')).status,
    404,
    'an admin still gets 404 for an unknown audit',
  );
});
