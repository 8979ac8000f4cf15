/**
 * An rsync that dies (SIGKILL to the processes serving one upload) takes only that upload with
 * it: since issue 23 each connection on the rsync port has an rsync of its own, started by
 * preservd, so a dead one never stops uploads. (Before, this test killed the one long-lived
 * rsync daemon and waited for its restart; what it guarded, that uploads are ingested again
 * after an rsync died, is kept.)
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { rsyncUploadAsync, TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';
import { assertInvariants } from '../helpers/invariants.js';
import { makeBag } from '../helpers/make-bag.js';
import { rsyncsOf } from '../helpers/proc.js';

async function restarts(d: TestDaemon): Promise<number> {
  const metrics = await d.request('GET', '/metrics', { token: null });
  const m = /^preservd_rsync_restarts_total (\d+)$/m.exec(metrics.text);
  if (m === null)
    throw new Error(`no preservd_rsync_restarts_total in /metrics:\n${metrics.text.slice(0, 500)}`);
  return Number(m[1]);
}

/** The pid in the gate's record of the transfer into `capability`, once there is one. */
async function admittedPid(d: TestDaemon, capability: string): Promise<number> {
  const active = join(d.dataDir, 'rsyncd', 'active');
  const deadline = Date.now() + 20_000;
  for (;;) {
    for (const name of readdirSync(active).filter((n) => /^\d+$/.test(n))) {
      try {
        if (readFileSync(join(active, name), 'utf8').trim() === capability) return Number(name);
      } catch {
        // ended meanwhile
      }
    }
    if (Date.now() > deadline)
      throw new Error(`no transfer into ${capability} was admitted within 20 s\n${d.output}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

t.test('a killed rsync ends only its own upload; other uploads and new ones are ingested', async (t) => {
  const d = await TestDaemon.start(t, { keepDataDir: true });
  t.teardown(() => rmSync(d.dataDir, { recursive: true, force: true }));
  const token = d.addUser('alice');
  t.equal(await restarts(d), 0, 'no restart yet');

  const bagId = randomUUID();
  const request = await d.createRequest(token, {
    bag_id: bagId,
    external_id: `death-${bagId.slice(0, 8)}`,
    content_type: 'video',
  });
  const capability = /\/([0-9a-f]{32})\/$/.exec(request.upload_link)![1]!;
  const scratch = mkdtempSync(join(tmpdir(), 'preservd-death-'));
  t.teardown(() => rmSync(scratch, { recursive: true, force: true }));
  writeFileSync(join(scratch, 'slow.bin'), Buffer.alloc(2_000_000, 1));
  const slow = spawn('rsync', ['-rt', '--bwlimit=200', join(scratch, 'slow.bin'), request.upload_link], {
    stdio: 'ignore',
  });
  t.teardown(() => slow.kill('SIGKILL'));
  const slowExit = new Promise<number | null>((resolve) => slow.once('exit', (code) => resolve(code)));
  const pid = await admittedPid(d, capability);
  t.ok(
    rsyncsOf(d.proc.pid!).includes(pid),
    'the transfer is served by an rsync that preservd started for the connection',
  );

  process.kill(-pid, 'SIGKILL'); // that rsync and what it forked for the transfer
  t.not(await slowExit, 0, 'the client of the killed rsync sees an error');

  const done = await ingestBag(d, token, { 'a.txt': 'after an rsync died\n' });
  t.equal(done.item.status, 'DONE', 'an upload right after is ingested');

  // The interrupted upload's own link works too: the depositor runs the upload again.
  const bagDir = join(scratch, 'bag');
  await makeBag(bagDir, {
    chipmunkInfo: { externalId: request.external_id, bagId, contentType: 'video' },
    files: { 'b.txt': 'uploaded again\n' },
  });
  const again = await rsyncUploadAsync(bagDir, request.upload_link);
  t.equal(again.code, 0, again.output);
  const complete = await d.request('POST', `/v1/requests/${bagId}/complete`, { token });
  t.equal(complete.status, 201, complete.text);
  t.equal((await d.waitForQueueItem(complete.json.id, token)).status, 'DONE', 'and is ingested');

  t.equal(await restarts(d), 0, 'no rsync daemon to restart: the metric stays 0');
  await d.stop();
  await assertInvariants(t, d.dataDir);
});
