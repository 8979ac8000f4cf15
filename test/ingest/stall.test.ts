/**
 * One depositor cannot stall everyone's ingest (issue 23, finding 3): an item waiting for its
 * upload to be quiet holds no ingest slot, and the wait ends at `upload.quietTimeoutMs` with
 * `upload-still-writing` (the upload given back, its link open again). A file merely named like
 * an rsync temp file, with our gate closed and no transfer running, is just a file.
 * Real daemon, real rsync.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import t, { type Test } from 'tap';
import { rsyncUpload, TestDaemon } from '../helpers/daemon.js';
import { assertInvariants } from '../helpers/invariants.js';
import { makeBag } from '../helpers/make-bag.js';

const QUIET_TIMEOUT_MS = 20_000;

async function scratchDir(t: Test): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'preservd-stall-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A request with a valid bag ready to upload (and `extra` tag files in it). */
async function prepare(d: TestDaemon, token: string, scratch: string, extra: Record<string, string> = {}) {
  const bagId = randomUUID();
  const request = await d.createRequest(token, { bag_id: bagId, external_id: `stall-${bagId.slice(0, 8)}` });
  const bagDir = join(scratch, bagId);
  await makeBag(bagDir, {
    files: { 'a.txt': 'a\n' },
    extraTagFiles: extra,
    chipmunkInfo: { externalId: request.external_id, bagId, contentType: 'digital' },
  });
  return { bagId, bagDir, link: request.upload_link as string };
}

async function complete(d: TestDaemon, token: string, bagId: string): Promise<number> {
  const res = await d.request('POST', `/v1/requests/${bagId}/complete`, { token });
  if (res.status !== 201) throw new Error(`complete ${bagId}: ${res.status} ${res.text}`);
  return res.json.id as number;
}

t.test(
  'two trickling uploads do not stall a third depositor; they fail upload-still-writing at the deadline',
  async (t) => {
    const d = await TestDaemon.start(t, {
      config: { upload: { quietMs: 200, quietTimeoutMs: QUIET_TIMEOUT_MS }, ingest: { concurrency: 2 } },
    });
    const bob = d.addUser('bob');
    const alice = d.addUser('alice');
    const scratch = await scratchDir(t);
    const trickle = join(scratch, 'trickle.bin');
    await writeFile(trickle, Buffer.alloc(300_000, 7));

    // Bob: two requests, each with an rsync at 1 KiB/s running into it (admitted before complete).
    const trickling: ChildProcess[] = [];
    t.teardown(() => trickling.forEach((c) => c.kill('SIGKILL')));
    const bobs = [await prepare(d, bob, scratch), await prepare(d, bob, scratch)];
    for (const r of bobs)
      trickling.push(spawn('rsync', ['--bwlimit=1', trickle, r.link], { stdio: 'ignore' }));
    const active = join(d.dataDir, 'rsyncd', 'active');
    for (
      const deadline = Date.now() + 30_000;
      (await readdir(active)).filter((n) => /^\d+$/.test(n)).length < 2;
    ) {
      if (Date.now() > deadline) throw new Error('the two trickling transfers were not admitted');
      await sleep(50);
    }
    const bobItems = [];
    for (const r of bobs) bobItems.push(await complete(d, bob, r.bagId));
    await sleep(1_000); // both items are now waiting for their uploads

    // Alice deposits meanwhile: DONE long before bob's waits end (before: never, while they trickle).
    const mine = await prepare(d, alice, scratch);
    t.equal(rsyncUpload(mine.bagDir, mine.link).code, 0, 'alice uploads');
    const started = Date.now();
    const item = await d.waitForQueueItem(await complete(d, alice, mine.bagId), alice, QUIET_TIMEOUT_MS);
    const seconds = (Date.now() - started) / 1000;
    t.equal(item.status, 'DONE', `alice's bag is DONE after ${seconds} s`);
    for (const id of bobItems) {
      t.equal(
        (await d.request('GET', `/v1/queue/${id}`, { token: bob })).json.status,
        'PENDING',
        "bob's item still waits for its upload",
      );
    }
    t.ok(
      trickling.every((c) => c.exitCode === null),
      'the trickles still run',
    );

    // Bob's items end at the deadline (plus a poll and a loaded machine), FAILED with a clear code.
    for (const [i, id] of bobItems.entries()) {
      const done = await d.waitForQueueItem(id, bob, QUIET_TIMEOUT_MS + 30_000);
      t.equal(done.status, 'FAILED');
      t.same(
        done.errors.map((e: any) => e.code),
        ['upload-still-writing'],
      );
      t.match(done.error, /still being written 20 seconds after complete.*new upload_link.*complete again/);
      const pkg = (await d.request('GET', `/v1/requests/${bobs[i]!.bagId}`, { token: bob })).json;
      t.equal(pkg.stored, false);
    }
    // The upload is handed back under a new link, as after any FAILED item (ingest/rotation.ts): the
    // old link is retired and the transfers still trickling through it are stopped.
    for (
      const deadline = Date.now() + 30_000;
      trickling.some((c) => c.exitCode === null && c.signalCode === null);
    ) {
      if (Date.now() > deadline) throw new Error('the trickles through the retired links still run');
      await sleep(100);
    }
    t.pass('the transfers through the retired links were stopped');
    const r = bobs[0]!;
    t.not(rsyncUpload(r.bagDir, r.link).code, 0, 'the old link is refused');
    const fresh = (await d.request('GET', `/v1/requests/${r.bagId}`, { token: bob })).json
      .upload_link as string;
    t.not(fresh, r.link, 'a new link');
    t.equal(rsyncUpload(r.bagDir, fresh).code, 0, 'the new link takes the bag');
    const again = await d.waitForQueueItem(await complete(d, bob, r.bagId), bob, 60_000);
    // The killed trickle may leave its temp file behind: a file for validation to judge.
    t.ok(['DONE', 'FAILED'].includes(again.status), `a new complete ends (${again.status})`);
  },
);

t.test(
  'a file named like an rsync temp file, with no transfer behind it, does not hold the ingest',
  async (t) => {
    const d = await TestDaemon.start(t, {
      config: { upload: { quietMs: 200, quietTimeoutMs: QUIET_TIMEOUT_MS }, ingest: { concurrency: 1 } },
    });
    const bob = d.addUser('bob');
    const scratch = await scratchDir(t);
    const r = await prepare(d, bob, scratch, { '.notes.AbCdEf': 'a real file with an unlucky name\n' });
    t.equal(rsyncUpload(r.bagDir, r.link).code, 0);
    const started = Date.now();
    const item = await d.waitForQueueItem(await complete(d, bob, r.bagId), bob, QUIET_TIMEOUT_MS);
    const seconds = (Date.now() - started) / 1000;
    t.equal(item.status, 'DONE', `DONE after ${seconds} s (before: ten minutes)`);
    t.ok(seconds < 15, `well within the quiet deadline: ${seconds} s`);
    const pkg = (await d.request('GET', `/v1/packages/${r.bagId}`)).json;
    t.ok(
      existsSync(join(pkg.storage_location, 'v1/content/.notes.AbCdEf')),
      'the file was stored like any tag file',
    );
  },
);

t.test(
  'kill -9 while an item waits for a trickling upload: after a restart it ends, nothing half-done',
  async (t) => {
    const dataDir = mkdtempSync(join(tmpdir(), 'preservd-stalldata-'));
    t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
    const config = { upload: { quietMs: 200, quietTimeoutMs: QUIET_TIMEOUT_MS } };
    const first = await TestDaemon.start(t, { dataDir, keepDataDir: true, config });
    const bob = first.addUser('bob');
    const scratch = await scratchDir(t);
    const r = await prepare(first, bob, scratch);
    t.equal(rsyncUpload(r.bagDir, r.link).code, 0, 'the bag is uploaded');
    await writeFile(join(scratch, 'trickle.bin'), Buffer.alloc(300_000, 7));
    const trickle = spawn('rsync', ['--bwlimit=1', join(scratch, 'trickle.bin'), r.link], {
      stdio: 'ignore',
    });
    t.teardown(() => trickle.kill('SIGKILL'));
    const active = join(dataDir, 'rsyncd', 'active');
    for (
      const deadline = Date.now() + 30_000;
      (await readdir(active)).filter((n) => /^\d+$/.test(n)).length < 1;
    ) {
      if (Date.now() > deadline) throw new Error('the trickling transfer was not admitted');
      await sleep(50);
    }
    const id = await complete(first, bob, r.bagId);
    await sleep(1_000);
    await first.kill9(); // its rsync daemon too: the trickle's server side dies with it

    const second = await TestDaemon.start(t, { dataDir, keepDataDir: true, config });
    const item = await second.waitForQueueItem(id, bob, QUIET_TIMEOUT_MS + 30_000);
    // The cut transfer may leave its temp file: a file for validation to judge, never waited for.
    t.ok(['DONE', 'FAILED'].includes(item.status), `the item ended ${item.status}`);
    await second.stop();
    await assertInvariants(t, dataDir);
  },
);
