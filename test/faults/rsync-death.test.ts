/**
 * The daemon's rsync child dies (SIGKILL, found by its pid file under `<dataDir>/rsyncd/`): the
 * daemon starts it again with a growing delay, says so in its log and in the
 * `preservd_rsync_restarts_total` metric, and uploads work through the new rsync.
 */
import { readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import t from 'tap';
import { TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';
import { assertInvariants } from '../helpers/invariants.js';

function rsyncPid(d: TestDaemon): number | undefined {
  try {
    return Number(readFileSync(join(d.dataDir, 'rsyncd/daemon.pid'), 'utf8').trim());
  } catch {
    return undefined; // between the death and the restart
  }
}

async function restarts(d: TestDaemon): Promise<number> {
  const metrics = await d.request('GET', '/metrics', { token: null });
  const m = /^preservd_rsync_restarts_total (\d+)$/m.exec(metrics.text);
  if (m === null) throw new Error(`no preservd_rsync_restarts_total in /metrics:\n${metrics.text.slice(0, 500)}`);
  return Number(m[1]);
}

/** Whether an rsync daemon answers on the port (it greets first: "@RSYNCD: <version>"). */
function rsyncGreets(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.setTimeout(1000);
    socket.once('data', (chunk) => {
      socket.destroy();
      resolve(chunk.toString().startsWith('@RSYNCD:'));
    });
    socket.once('error', () => resolve(false));
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
  });
}

/** Kills the rsync child and waits until a new one runs and the metric counts it. */
async function killRsyncAndWait(d: TestDaemon, expectedRestarts: number): Promise<{ before: number; after: number }> {
  const before = rsyncPid(d)!;
  process.kill(before, 'SIGKILL');
  const deadline = Date.now() + 15_000;
  for (;;) {
    const after = rsyncPid(d);
    if (after !== undefined && after !== before && (await restarts(d)) === expectedRestarts && (await rsyncGreets(d.rsyncPort))) return { before, after };
    if (Date.now() > deadline) throw new Error(`rsync was not restarted within 15 s\n${d.output}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The daemon's JSON log lines whose message is `msg`. */
function logLines(d: TestDaemon, msg: string): any[] {
  return d.output
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l))
    .filter((l) => l.msg === msg);
}

t.test('a killed rsync child is restarted with backoff, counted, and uploads work again', async (t) => {
  const d = await TestDaemon.start(t, { keepDataDir: true });
  t.teardown(() => rmSync(d.dataDir, { recursive: true, force: true }));
  const token = d.addUser('alice');
  t.equal(await restarts(d), 0, 'no restart yet');

  const first = await killRsyncAndWait(d, 1);
  t.not(first.after, first.before, 'a new rsync runs');
  const done = await ingestBag(d, token, { 'a.txt': 'after the first restart\n' });
  t.equal(done.item.status, 'DONE', 'an upload through the restarted rsync is ingested');

  await killRsyncAndWait(d, 2);
  await ingestBag(d, token, { 'b.txt': 'after the second restart\n' });

  const restartsLogged = logLines(d, 'rsync daemon restarted');
  t.same(restartsLogged.map((l) => l.restarts), [1, 2], 'each restart is logged');
  t.same(restartsLogged.map((l) => l.signal), ['SIGKILL', 'SIGKILL'], 'with how rsync died');
  const [d1, d2] = restartsLogged.map((l) => l.delayMs as number);
  t.ok(d2! > d1!, `the delay grows when rsync keeps dying (${d1} ms, then ${d2} ms)`);

  await d.stop();
  await assertInvariants(t, d.dataDir);
});
