/**
 * A deaccession's removal owed to a replica that leaves the configuration, with the real daemon
 * and a dir replica: approved while the replica is unreachable (its folder gone, as an unmounted
 * volume), its removal stays `removing`; after a restart without the replica that removal is
 * abandoned, with a warning and a `deaccession` failure event naming it, and the tombstone shows
 * that copy `unknown` (never `removed`) in the API, on its page and in `preservd deaccessions`,
 * while the primary's removal is done.
 */
import { existsSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { packageObjectPath } from '../../src/ocfl/layout.js';
import { TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';
import { getPage, Jar, logIn } from '../helpers/session.js';
import { replicaFolder, waitForCopies } from '../replicas/fixtures/replica-world.js';

t.test(
  'a removal owed to a replica no longer configured is abandoned at start, never called removed',
  async (t) => {
    const mirror = replicaFolder(t);
    const away = `${mirror}-unmounted`;
    t.teardown(() => rmSync(away, { recursive: true, force: true }));
    const first = await TestDaemon.start(t, {
      keepDataDir: true,
      config: { replicas: [{ name: 'mirror', kind: 'dir', path: mirror }], storage: { recordDelayMs: 100 } },
    });
    const { dataDir } = first;
    t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
    const second = first.addUser('second', true);
    const bagId = (await ingestBag(first, first.adminToken, { 'a.txt': 'to be removed\n' })).request
      .bag_id as string;
    await waitForCopies(first, bagId, 'verified');

    renameSync(mirror, away); // unreachable
    const asked = await first.request('POST', `/v1/packages/${bagId}/deaccession`, {
      token: second,
      json: { reason: 'deposited in error' },
    });
    t.equal(asked.status, 201);
    t.equal(
      (await first.request('POST', `${asked.headers.get('location')}/approve`, { json: {} })).status,
      200,
    );
    await new Promise((r) => setTimeout(r, 2000));
    t.match((await first.request('GET', `/v1/packages/${bagId}`)).json.replicas, [
      { name: 'mirror', status: 'removing' },
    ]);
    await first.stop();

    const after = await TestDaemon.start(t, { dataDir, keepDataDir: true, config: {} });
    const shown = (await after.request('GET', `/v1/packages/${bagId}`)).json;
    t.same(
      shown.replicas,
      [
        {
          name: 'mirror',
          status: 'unknown',
          verified_at: null,
          error: 'not removed: replica no longer configured',
        },
      ],
      'the dropped copy shows unknown, never removed',
    );
    t.notOk(
      existsSync(join(dataDir, 'storage', packageObjectPath(bagId))),
      'the primary holds no object of it',
    );
    t.ok(existsSync(join(away, packageObjectPath(bagId))), 'the unreachable copy was indeed never removed');
    t.match(after.output, /replica mirror is no longer configured/, 'a warning names the replica');

    const events = (await after.request('GET', `/v1/packages/${bagId}/events`)).json as any[];
    const deaccession = events.filter((e) => e.type === 'deaccession');
    t.equal(deaccession.length, 2);
    t.match(
      deaccession.find((e) => e.outcome === 'failure'),
      {
        executor: 'preservd',
        detail: /replica mirror .*no longer configured/,
      },
    );

    const jar = new Jar();
    await logIn(after, jar, after.adminToken);
    const page = await getPage(after, jar, `/packages/${bagId}`);
    t.match(
      page.text,
      /<td>mirror<\/td>\s*<td class="replica-unknown">unknown<\/td>/,
      'its page shows it unknown',
    );
    t.match(page.text, 'not removed: replica no longer configured');

    const listed = after.cli(['deaccessions']);
    t.equal(listed.code, 0);
    t.match(listed.stdout, /approved.*mirror unknown \(not removed: replica no longer configured\)/);
    t.notMatch(listed.stdout, /\tremoved\t/, 'never listed as removed');

    // A second start records nothing more.
    await after.stop();
    const third = await TestDaemon.start(t, { dataDir, keepDataDir: true, config: {} });
    const again = (await third.request('GET', `/v1/packages/${bagId}/events`)).json as any[];
    t.equal(again.filter((e) => e.type === 'deaccession').length, 2, 'no second abandonment event');
  },
);
