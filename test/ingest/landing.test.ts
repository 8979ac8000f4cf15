/**
 * The landing zone's folders and markers, and how it counts transfers still running.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, mkdir, readdir, rm, stat, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import t from 'tap';
import { exists } from '../../src/fs/exists.js';
import { assertCapability, isCapability, newCapability } from '../../src/ingest/capability.js';
import { isRsyncProcess, LandingZone } from '../../src/ingest/landing.js';
import { DataLayout } from '../../src/storage/layout.js';

async function tempDataDir(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'preservd-landing-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A landing zone over a data directory made as the daemon makes it (`DataLayout.ensure`). */
async function zoneIn(dataDir: string): Promise<LandingZone> {
  const layout = new DataLayout(dataDir);
  await layout.ensure();
  return new LandingZone(layout);
}

t.test('capabilities are 128 random bits as 32 lower-case hex characters', async (t) => {
  const caps = Array.from({ length: 1000 }, () => newCapability());
  t.same(
    caps.filter((c) => !/^[0-9a-f]{32}$/.test(c)),
    [],
    'every one has the shape',
  );
  t.equal(new Set(caps).size, 1000, 'no repeats');
  t.ok(isCapability('0123456789abcdef0123456789abcdef'));
  for (const bad of [
    '0123456789ABCDEF0123456789ABCDEF',
    '0123456789abcdef0123456789abcde',
    '../etc',
    '',
    42,
    undefined,
  ]) {
    t.notOk(isCapability(bad), `${String(bad)} is not a capability`);
  }
  t.throws(() => assertCapability('x/../y'), TypeError);
});

t.test('open creates a private landing folder, and is safe to repeat', async (t) => {
  const dataDir = await tempDataDir(t);
  const zone = await zoneIn(dataDir);
  const cap = newCapability();
  t.equal(zone.path(cap), join(dataDir, 'landing', cap));
  await zone.open(cap);
  const st = await stat(zone.path(cap));
  t.ok(st.isDirectory());
  t.equal(st.mode & 0o777, 0o700);
  await writeFile(join(zone.path(cap), 'kept.txt'), 'x');
  await zone.open(cap);
  t.same(await readdir(zone.path(cap)), ['kept.txt'], 'opening again keeps what was uploaded');
  t.throws(() => zone.path('../storage'), /not an upload capability/);
  await t.rejects(zone.open('ABC'), /not an upload capability/);
});

t.test('close marks the capability closed; reopen clears the mark', async (t) => {
  const dataDir = await tempDataDir(t);
  const zone = await zoneIn(dataDir);
  const cap = newCapability();
  // The marker the rsync gate (pre-xfer.sh) looks for.
  const isClosed = () => exists(join(zone.layout.closed, cap));
  await zone.open(cap);
  t.equal(await isClosed(), false);
  await zone.close(cap);
  t.equal(await isClosed(), true);
  t.same(await readdir(zone.layout.closed), [cap], 'one marker, no temp file left');
  await zone.close(cap);
  t.equal(await isClosed(), true, 'closing twice is fine');
  await zone.reopen(cap);
  t.equal(await isClosed(), false);
  await zone.reopen(cap);
  t.equal(await isClosed(), false, 'reopening twice is fine');
});

/** A real rsync process that stays up: a daemon on a free loopback port. */
async function runningRsync(t: { teardown(fn: () => unknown): void }, dir: string): Promise<ChildProcess> {
  const server = net.createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  server.close();
  const conf = join(dir, 'idle-rsyncd.conf');
  await writeFile(conf, `log file = ${join(dir, 'idle.log')}\n`);
  const child = spawn(
    'rsync',
    ['--daemon', '--no-detach', `--config=${conf}`, `--port=${port}`, '--address=127.0.0.1'],
    {
      stdio: 'ignore',
    },
  );
  t.teardown(() => {
    child.kill('SIGKILL');
  });
  await once(child, 'spawn');
  return child;
}

t.test('activeTransfers counts live rsync transfers and cleans up stale records', async (t) => {
  const dataDir = await tempDataDir(t);
  const zone = await zoneIn(dataDir);
  const { active } = zone.layout;
  await mkdir(active, { recursive: true });
  const cap = newCapability();
  const other = newCapability();

  const live = await runningRsync(t, dataDir);
  const liveTwo = await runningRsync(t, dataDir);
  t.ok(await isRsyncProcess(live.pid as number), 'a running rsync is recognised');
  t.notOk(await isRsyncProcess(process.pid), 'a process that is not rsync (pid reused) is not');

  const dead = spawn('true');
  await once(dead, 'exit');
  t.notOk(await isRsyncProcess(dead.pid as number), 'an exited process is not');

  await writeFile(join(active, String(live.pid)), `${cap}\n`);
  await writeFile(join(active, String(liveTwo.pid)), `${other}\n`);
  await writeFile(join(active, String(dead.pid)), `${cap}\n`);
  await writeFile(join(active, String(process.pid)), `${cap}\n`);
  await writeFile(join(active, `.${dead.pid}.tmp`), cap.slice(0, 10));

  t.equal(await zone.activeTransfers(cap), 1, 'only the live rsync counts');
  t.equal(await zone.activeTransfers(other), 1);
  t.same(
    (await readdir(active)).sort(),
    [String(live.pid), String(liveTwo.pid)].sort(),
    'stale records were removed',
  );

  live.kill('SIGKILL');
  await once(live, 'exit');
  await sleep(50);
  t.equal(await zone.activeTransfers(cap), 0, 'a transfer whose rsync died no longer counts');
  t.equal((await zone.liveTransfers()).length, 1, 'one live transfer remains');
});

t.test('activeTransfers is 0 when nothing was ever recorded', async (t) => {
  const dataDir = await tempDataDir(t);
  t.equal(await new LandingZone(new DataLayout(dataDir)).activeTransfers(newCapability()), 0);
});
