/**
 * A kill -9 at each step of a deaccession's approval (failpoints, as the ingest's crash tests):
 * right after the catalog's transaction, after the replica's and the primary's object were each
 * renamed out of their root,
 * after the first copy's removal and after the second's, before each is cleared in the catalog.
 * After the restart the package is what it will be: a tombstone, its object gone from the primary
 * and the dir replica, nothing left half deleted, both roots valid OCFL roots holding the
 * tombstone, and exactly one `deaccession` event.
 */
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { packageObjectPath } from '../../src/ocfl/layout.js';
import { TOMBSTONES_RECORD } from '../../src/ocfl/record.js';
import { fsReader, validateRoot } from '../../src/ocfl/validate/index.js';
import { TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';
import { replicaFolder, waitForCopies } from '../replicas/fixtures/replica-world.js';

const STEPS = [
  'deaccession:approved',
  'deaccession:replica-renamed',
  'deaccession:primary-renamed',
  'deaccession:copy-removed@1',
  'deaccession:copy-removed@2',
];

for (const failpoint of STEPS)
  t.test(`killed at ${failpoint}: the restart finishes the removal`, async (t) => {
    const mirror = replicaFolder(t);
    const config = {
      replicas: [{ name: 'mirror', kind: 'dir', path: mirror }],
      storage: { recordDelayMs: 100 },
    };
    const first = await TestDaemon.start(t, {
      keepDataDir: true,
      config,
      env: { PRESERVD_FAILPOINT: failpoint },
    });
    const { dataDir } = first;
    t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
    const second = first.addUser('second', true);
    const bagId = (await ingestBag(first, first.adminToken, { 'a.txt': 'to be removed\n' })).request
      .bag_id as string;
    await waitForCopies(first, bagId, 'verified');
    const asked = await first.request('POST', `/v1/packages/${bagId}/deaccession`, {
      token: second,
      json: { reason: 'deposited in error' },
    });
    t.equal(asked.status, 201);
    await first
      .request('POST', `${asked.headers.get('location')}/approve`, { json: {} })
      .catch(() => undefined); // the daemon may die before it answers
    t.ok(await first.exitsWithin(30_000), `the daemon died at ${failpoint}`);
    await first.kill9();

    const after = await TestDaemon.start(t, { dataDir, keepDataDir: true, config });
    const deadline = Date.now() + 60_000;
    let shown: any;
    for (;;) {
      shown = (await after.request('GET', `/v1/packages/${bagId}`)).json;
      if (shown.replicas.every((r: { status: string }) => r.status === 'removed')) break;
      if (Date.now() > deadline) throw new Error(`not removed: ${JSON.stringify(shown)}\n${after.output}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    t.match(shown, { deaccessioned: { reason: 'deposited in error', approved_by: 'admin' }, files: [] });
    const storage = join(dataDir, 'storage');
    for (const [root, what] of [
      [storage, 'the primary'],
      [mirror, 'the replica'],
    ] as const) {
      t.notOk(existsSync(join(root, packageObjectPath(bagId))), `${what} holds no object of it`);
      const tombstones = JSON.parse(readFileSync(join(root, TOMBSTONES_RECORD), 'utf8')).tombstones as any[];
      t.same(
        tombstones.map((x) => x.package.bag_id),
        [bagId],
        `${what} holds its tombstone`,
      );
      const report = await validateRoot(fsReader(root));
      t.same(
        [...report.problems].filter((p) => p.code !== 'W004'),
        [],
        `${what} is a valid OCFL root`,
      );
    }
    t.same(
      readdirSync(join(dataDir, 'staging')).filter((n) => n.endsWith('.removing')),
      [],
      'nothing half deleted in staging/',
    );
    t.same(
      readdirSync(`${mirror}.preservd-tmp`).filter((n) => n.endsWith('.removing')),
      [],
      "nothing half deleted beside the replica's root",
    );
    const events = (await after.request('GET', `/v1/packages/${bagId}/events`)).json as any[];
    t.equal(events.filter((e) => e.type === 'deaccession').length, 1, 'one deaccession event');
    t.equal((await after.request('GET', `/v1/packages/${bagId}/a.txt`)).status, 410);
  });
