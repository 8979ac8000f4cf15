/**
 * What one authenticated user can make the daemon do (issue 23, finding 12): parallel GETs of an
 * open request with many files share one walk of its upload (counted by
 * `preservd_upload_scans_total`), and a user's open requests are capped
 * (`upload.openRequestsPerUser`, 429 beyond it). Real daemon, real HTTP, real rsync.
 */
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { rsyncUpload, TestDaemon } from '../helpers/daemon.js';
import { makeBag } from '../helpers/make-bag.js';

async function scans(d: TestDaemon): Promise<number> {
  const res = await d.request('GET', '/metrics', { token: null });
  const line = /^preservd_upload_scans_total (\d+)$/m.exec(res.text);
  if (line === null) throw new Error(`no preservd_upload_scans_total in /metrics (${res.status})`);
  return Number(line[1]);
}

t.test('parallel GETs of an open request with many files walk its upload once', async (t) => {
  const d = await TestDaemon.start(t);
  const bagId = randomUUID();
  const req = await d.createRequest(d.adminToken, {
    bag_id: bagId,
    external_id: `many-${bagId.slice(0, 8)}`,
  });
  const landing = join(d.dataDir, 'landing', req.upload_link.split('/').at(-2));
  const FILES = 5_000;
  for (let dir = 0; dir < 50; dir++) {
    await mkdir(join(landing, 'data', `d${dir}`), { recursive: true });
    await Promise.all(
      Array.from({ length: FILES / 50 }, (_, f) => writeFile(join(landing, 'data', `d${dir}`, `f${f}`), 'x')),
    );
  }
  const before = await scans(d);
  const answers = await Promise.all(
    Array.from({ length: 40 }, () => d.request('GET', `/v1/requests/${bagId}`)),
  );
  t.ok(
    answers.every((a) => a.status === 200),
    'every GET answers 200',
  );
  t.ok(
    answers.every((a) => a.json.upload?.files === FILES),
    `every answer counts the ${FILES} files`,
  );
  t.equal((await scans(d)) - before, 1, 'forty GETs, one walk');
});

t.test(
  'a user may hold upload.openRequestsPerUser open requests; one more is 429, and nothing is created',
  async (t) => {
    const LIMIT = 3;
    const d = await TestDaemon.start(t, { config: { upload: { quietMs: 200, openRequestsPerUser: LIMIT } } });
    const bob = d.addUser('bob');
    const alice = d.addUser('alice');
    const mine: Array<{ bag_id: string; external_id: string; upload_link: string }> = [];
    for (let i = 0; i < LIMIT; i++) {
      const bagId = randomUUID();
      mine.push(await d.createRequest(bob, { bag_id: bagId, external_id: `cap-${i}-${bagId.slice(0, 8)}` }));
    }
    const extra = randomUUID();
    const refused = await d.request('POST', '/v1/requests', {
      token: bob,
      json: { bag_id: extra, external_id: `cap-x-${extra.slice(0, 8)}`, content_type: 'digital' },
    });
    t.equal(refused.status, 429);
    t.match(refused.json, { error: /you hold 3 open requests, as many as a user may: complete them/ });
    t.equal(
      (await d.request('GET', `/v1/requests/${extra}`, { token: bob })).status,
      404,
      'nothing was created',
    );
    const again = await d.request('POST', '/v1/requests', {
      token: bob,
      json: { bag_id: mine[0]!.bag_id, external_id: mine[0]!.external_id, content_type: 'digital' },
    });
    t.equal(again.status, 303, 'declaring an existing request again still answers 303');
    const forBob = await d.request('POST', '/v1/requests', {
      json: {
        bag_id: extra,
        external_id: `cap-a-${extra.slice(0, 8)}`,
        content_type: 'digital',
        user: 'bob',
      },
    });
    t.equal(forBob.status, 429, "an admin's request for bob counts for bob");
    t.equal(
      (
        await d.request('POST', '/v1/requests', {
          token: alice,
          json: { bag_id: extra, external_id: `cap-y-${extra.slice(0, 8)}`, content_type: 'digital' },
        })
      ).status,
      201,
      'another user is not affected',
    );

    // Once one of bob's requests is stored, he may declare one more.
    const scratch = await mkdtemp(join(tmpdir(), 'preservd-cap-'));
    t.teardown(() => rm(scratch, { recursive: true, force: true }));
    const first = mine[0]!;
    await makeBag(scratch, {
      files: { 'a.txt': 'a\n' },
      chipmunkInfo: { externalId: first.external_id, bagId: first.bag_id, contentType: 'digital' },
    });
    t.equal(rsyncUpload(scratch, first.upload_link).code, 0);
    const complete = await d.request('POST', `/v1/requests/${first.bag_id}/complete`, { token: bob });
    t.equal((await d.waitForQueueItem(complete.json.id, bob)).status, 'DONE');
    const next = randomUUID();
    t.equal(
      (
        await d.request('POST', '/v1/requests', {
          token: bob,
          json: { bag_id: next, external_id: `cap-z-${next.slice(0, 8)}`, content_type: 'digital' },
        })
      ).status,
      201,
      'a stored request frees its place',
    );
  },
);
