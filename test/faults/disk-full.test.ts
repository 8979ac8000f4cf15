/**
 * The disk fills up. The daemon's data directory lives on a small filesystem of its own (tmpfs,
 * or an ext4 loop device where tmpfs cannot be mounted), and a filler file takes the space away:
 *
 * - an upload bigger than the free space: rsync fails with "No space left on device", the
 *   daemon keeps serving, and once space is freed the same upload link takes the bag;
 * - the disk fills between upload and ingest, so the catalog cannot take the bag's file records:
 *   the ingest FAILS with the problem `disk-full`, the upload is back in its landing folder and
 *   the link open; after freeing space, completing again stores the bag;
 * - the disk is completely full, the catalog itself cannot grow: writes answer 507 with a clear
 *   message (never a crash or a 500), reads go on, nothing half-written is left; after a restart
 *   with space the catalog is whole and ingest works.
 *
 * Mounting needs root (or CAP_SYS_ADMIN); without it the test is skipped and says why.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { rsyncUpload, TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';
import { assertInvariants } from '../helpers/invariants.js';
import { makeBag } from '../helpers/make-bag.js';
import { fill, mountSmallFilesystem, type SmallFilesystem } from '../helpers/small-fs.js';
import { stagingWhileRunning } from '../helpers/walk.js';

const SIZE_MB = 64;

const mounted = mountSmallFilesystem(SIZE_MB);
const skip = 'skip' in mounted ? mounted.skip : false;

t.test('a full disk fails uploads and ingests clearly, and nothing is lost', { skip }, async (t) => {
  const outer = t;
  const fs = mounted as SmallFilesystem;
  t.teardown(() => fs.unmount()); // after the daemons' own teardowns (last in, first out)
  t.comment(`data directory on ${fs.kind} of ${SIZE_MB} MB`);
  const dataDir = join(fs.dir, 'data');
  mkdirSync(dataDir);
  const scratch = mkdtempSync(join(tmpdir(), 'preservd-diskfull-bags-'));
  t.teardown(() => rmSync(scratch, { recursive: true, force: true }));

  // No limit on open requests: below, the catalog's room must be what refuses a new one (LMDB
  // reuses the pages of what earlier subtests freed, so how many fit varies from run to run).
  const options = {
    dataDir,
    keepDataDir: true,
    config: { upload: { quietMs: 200, openRequestsPerUser: 0 } },
  };
  let d = await TestDaemon.start(t, options);
  // If the daemon dies on the full disk, its own last words are what a reader needs.
  t.teardown(() => {
    if (!t.passing())
      t.comment(
        `daemon exit ${d.proc.exitCode} ${d.proc.signalCode}; its output ends:\n${d.output.slice(-3000)}`,
      );
  });
  const token = d.addUser('alice');

  async function newRequest(
    files: Record<string, Buffer | string>,
  ): Promise<{ bagId: string; link: string; bagDir: string; capability: string }> {
    const bagId = randomUUID();
    const req = await d.createRequest(token, {
      bag_id: bagId,
      external_id: `full-${bagId.slice(0, 8)}`,
      content_type: 'video',
    });
    const bagDir = join(scratch, bagId);
    await makeBag(bagDir, {
      files,
      chipmunkInfo: { externalId: req.external_id, bagId, contentType: 'video' },
    });
    return { bagId, link: req.upload_link, bagDir, capability: req.upload_link.split('/').at(-2) };
  }

  async function complete(t: Test, bagId: string): Promise<any> {
    const res = await d.request('POST', `/v1/requests/${bagId}/complete`, { token });
    t.equal(res.status, 201, 'completed');
    return d.waitForQueueItem(res.json.id, token);
  }

  await t.test(
    'an upload bigger than the free space fails; after freeing space it goes through',
    async (t) => {
      const r = await newRequest({
        'one.bin': Buffer.alloc(6_000_000, 1),
        'two.bin': Buffer.alloc(6_000_000, 2),
      });
      const filler = fill(fs.dir, 8_000_000);
      const up = rsyncUpload(r.bagDir, r.link);
      t.not(up.code, 0, 'rsync fails');
      t.match(up.output, /No space left on device/, 'and says why');
      const view = await d.request('GET', `/v1/requests/${r.bagId}`, { token });
      t.equal(view.status, 200, 'the daemon keeps serving');
      t.equal(view.json.stored, false);

      rmSync(filler);
      t.equal(
        rsyncUpload(r.bagDir, r.link).code,
        0,
        'the same upload link takes the bag once there is space',
      );
      const item = await complete(t, r.bagId);
      t.equal(item.status, 'DONE', JSON.stringify(item));
    },
  );

  await t.test(
    'the disk fills before the catalog takes the file records: disk-full, upload kept',
    async (t) => {
      // Thousands of files with long names: their catalog records need far more than what is left.
      const files: Record<string, string> = {};
      for (let i = 0; i < 3000; i++)
        files[`records/${String(i).padStart(5, '0')}-${'x'.repeat(120)}.txt`] = `${i}\n`;
      const r = await newRequest(files);
      t.equal(rsyncUpload(r.bagDir, r.link).code, 0, 'uploaded while there was space');
      const filler = fill(fs.dir, 256 * 1024);
      const item = await complete(t, r.bagId);
      t.equal(item.status, 'FAILED', 'the ingest fails');
      t.same(
        item.errors.map((e: any) => e.code),
        ['disk-full'],
        'with the single problem disk-full',
      );
      t.match(item.error, /out of disk space.*upload is kept/);
      // Given back under a new link (security-probe.md, finding 1): the catalog had the room for it.
      const reopened: string = (await d.request('GET', `/v1/requests/${r.bagId}`, { token })).json
        .upload_link;
      t.not(reopened, r.link, 'under a new link');
      t.equal(
        readdirSync(join(dataDir, 'landing', reopened.split('/').at(-2)!, 'data/records')).length,
        3000,
        'the upload is back in its landing folder, whole',
      );
      t.same(stagingWhileRunning(dataDir), [], 'nothing left in staging');
      t.equal((await d.request('GET', `/v1/packages/${r.bagId}`, { token })).json.stored, false);
      t.equal((await d.request('GET', '/v1/requests', { token })).status, 200, 'the daemon keeps serving');

      rmSync(filler);
      t.equal(rsyncUpload(r.bagDir, reopened).code, 0, 'the link is open again');
      const again = await complete(t, r.bagId);
      t.equal(
        again.status,
        'DONE',
        `completing again after freeing space stores the bag ${JSON.stringify(again).slice(0, 300)}`,
      );
    },
  );

  await t.test(
    'a completely full disk: catalog writes answer 507, reads go on, nothing is corrupted',
    async (t) => {
      const late = await newRequest({ 'late.txt': 'uploaded before the disk filled\n' });
      t.equal(rsyncUpload(late.bagDir, late.link).code, 0, 'uploaded while there was space');
      const filler = fill(fs.dir);
      // The catalog claimed disk blocks ahead of its file before the disk filled (catalog/space.ts):
      // create requests, 16 at a time, until that room is used up and a write is refused.
      const created: string[] = [];
      const refused: string[] = [];
      for (let batch = 0; batch < 1000 && refused.length === 0; batch++) {
        await Promise.all(
          Array.from({ length: 16 }, async () => {
            const bagId = randomUUID();
            // Long external ids fill the claimed room sooner.
            const res = await d.request('POST', '/v1/requests', {
              token,
              json: { bag_id: bagId, external_id: `full-${bagId}-${'x'.repeat(200)}`, content_type: 'video' },
            });
            if (res.status === 201) created.push(bagId);
            else {
              t.equal(res.status, 507, `a refused write answers 507 (${res.status} ${res.text})`);
              t.match(res.json?.error, /out of disk space/, 'saying why');
              refused.push(bagId);
            }
          }),
        );
      }
      t.ok(refused.length > 0, `the catalog could not grow (after ${created.length} more requests)`);
      t.comment(`${created.length} requests fitted in the catalog's claimed room`);
      for (const bagId of refused) {
        const res = await d.request('GET', `/v1/requests/${bagId}`, { token });
        if (res.status !== 404) t.fail(`the refused request ${bagId} exists: ${res.status}`);
      }
      t.equal((await d.request('GET', '/v1/requests', { token })).status, 200, 'reads go on');
      const audit = await d.request('POST', '/v1/audits');
      t.ok([201, 507].includes(audit.status), `starting an audit answers ${audit.status}, never a 500`);

      // Completing now either is refused, or queues an ingest that cannot even record its
      // failure: it must stay PENDING (retried) or fail as disk-full, and end once there is space.
      const completed = await d.request('POST', `/v1/requests/${late.bagId}/complete`, { token });
      t.ok([201, 507].includes(completed.status), `complete on a full disk answers ${completed.status}`);
      if (completed.status === 201) {
        await new Promise((r) => setTimeout(r, 1000));
        const item = (await d.request('GET', `/v1/queue/${completed.json.id}`, { token })).json;
        t.ok(
          item.status === 'PENDING' || item.errors?.[0]?.code === 'disk-full',
          `the ingest waits or fails as disk-full: ${JSON.stringify(item)}`,
        );
      }

      const stopping = Date.now();
      await d.stop();
      t.ok(Date.now() - stopping < 10_000, 'and stops promptly on SIGTERM');
      rmSync(filler);
      d = await TestDaemon.start(outer, options);
      for (const bagId of created) {
        const res = await d.request('GET', `/v1/requests/${bagId}`, { token });
        if (res.status !== 200)
          t.fail(`request ${bagId}, created while the disk filled, is gone: ${res.status}`);
      }
      t.equal(
        (await d.request('GET', `/v1/requests/${refused[0]}`, { token })).status,
        404,
        'the refused one still does not exist',
      );
      let item = completed.status === 201 ? await d.waitForQueueItem(completed.json.id, token) : undefined;
      if (item === undefined || item.status === 'FAILED') item = await complete(t, late.bagId);
      t.equal(item.status, 'DONE', 'the request completed on the full disk is stored once there is space');
      const done = await ingestBag(d, token, { 'after.txt': 'space again\n' });
      t.equal(done.item.status, 'DONE', 'ingest works again');
    },
  );

  await waitAuditsFinished(t, d);
  await d.stop();
  await assertInvariants(t, dataDir);
});

async function waitAuditsFinished(t: Test, d: TestDaemon): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    const audits = (await d.request('GET', '/v1/audits')).json as any[];
    if (audits.every((a) => a.finished_at !== null)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  t.fail('the audits did not finish');
}
