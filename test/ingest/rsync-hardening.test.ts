/**
 * What an upload cannot do to the server through rsync (security probe, findings 11 and 18):
 * make device nodes, FIFOs, setuid files or files of another owner (the tests run as root,
 * where rsync would honour `-o -g -D -p`), make folders others may enter (`--mkpath`), or put
 * capabilities in a log others may read. The gate also counts upload slots, after the
 * capability check, and says so when they are taken.
 */
import { spawn, spawnSync } from 'node:child_process';
import {
  chmod,
  chown,
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rm,
  stat,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { newCapability } from '../../src/ingest/capability.js';
import { LandingZone } from '../../src/ingest/landing.js';
import { DataLayout } from '../../src/storage/layout.js';
import { HOOK_SOURCES, hookCommands, RsyncDaemon } from '../../src/ingest/rsync/index.js';
import { freePort } from '../helpers/daemon.js';

function rsync(args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn('rsync', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d));
    child.stderr.on('data', (d: Buffer) => (output += d));
    child.on('close', (code) => resolve({ code, output }));
  });
}

/** Our rsync on a fresh data directory of its own, stopped and removed after the test. */
async function startRsync(t: Test): Promise<{ root: string; landing: LandingZone; daemon: RsyncDaemon }> {
  const root = await mkdtemp(join(tmpdir(), 'preservd-harden-'));
  const layout = new DataLayout(join(root, 'var'));
  await layout.ensure();
  const landing = new LandingZone(layout);
  const daemon = new RsyncDaemon({ landing, port: await freePort(), stopTimeoutMs: 100 });
  t.teardown(async () => {
    await daemon.stop();
    await rm(root, { recursive: true, force: true });
  });
  await daemon.start();
  return { root, landing, daemon };
}

const asRoot = process.getuid?.() === 0;

t.test(
  'as root, rsync -rlHDpogt makes no device, FIFO, setuid file or foreign owner',
  { skip: !asRoot && 'needs root' },
  async (t) => {
    const { root, landing, daemon } = await startRsync(t);

    const src = join(root, 'src');
    await mkdir(join(src, 'data'), { recursive: true });
    await writeFile(join(src, 'data', 'suid'), '#!/bin/sh\n');
    await chmod(join(src, 'data', 'suid'), 0o6755);
    await writeFile(join(src, 'data', 'theirs.txt'), 'owned by 1234\n');
    await chown(join(src, 'data', 'theirs.txt'), 1234, 1234);
    t.equal(spawnSync('mkfifo', [join(src, 'data', 'fifo')]).status, 0);
    t.equal(spawnSync('mknod', [join(src, 'data', 'null'), 'c', '1', '3']).status, 0);

    const cap = newCapability();
    await landing.open(cap);
    const up = await rsync(['-rlHDpogt', '--numeric-ids', `${src}/`, daemon.uploadLink(cap)]);
    t.equal(up.code, 0, `the upload itself goes through: ${up.output}`);
    const dir = landing.path(cap);
    for (const name of ['suid', 'theirs.txt', 'fifo', 'null']) {
      const st = await lstat(join(dir, 'data', name));
      t.ok(st.isFile(), `${name} landed as a plain file`);
      t.equal(
        st.mode & 0o7000,
        0,
        `${name} has no setuid, setgid or sticky bit (${(st.mode & 0o7777).toString(8)})`,
      );
      t.equal(st.mode & 0o077, 0, `${name} is private to the daemon's user`);
      t.equal(st.uid, process.getuid!(), `${name} belongs to the daemon's user (uid ${st.uid})`);
    }

    // The clients' usual flags still work: chipmunk's, and -a.
    for (const flags of [['-rtvzP', '--delete'], ['-a']]) {
      const other = newCapability();
      await landing.open(other);
      const r = await rsync([...flags, `${join(src, 'data', 'theirs.txt')}`, daemon.uploadLink(other)]);
      t.equal(r.code, 0, `rsync ${flags.join(' ')} works: ${r.output}`);
      t.equal(await readFile(join(landing.path(other), 'theirs.txt'), 'utf8'), 'owned by 1234\n');
    }
  },
);

t.test('--mkpath folders are private, and the log keeps no capability and is 0600', async (t) => {
  const { root, landing, daemon } = await startRsync(t);
  const cap = newCapability();
  await landing.open(cap);
  const file = join(root, 'one.txt');
  await writeFile(file, 'one\n');
  const r = await rsync(['-rt', '--mkpath', file, `${daemon.uploadLink(cap)}new/deeper/`]);
  t.equal(r.code, 0, r.output);
  for (const folder of ['new', 'new/deeper']) {
    t.equal(
      (await stat(join(landing.path(cap), folder))).mode & 0o777,
      0o700,
      `${folder} is 0700 like the landing folder`,
    );
  }
  const log = join(daemon.layout.rsyncd, 'rsyncd.log');
  t.equal((await stat(log)).mode & 0o777, 0o600, 'rsyncd.log is 0600');
  t.notMatch(await readFile(log, 'utf8'), cap, 'rsyncd.log does not name the capability');
});

t.test('the gate takes an upload slot after the capability check, and says when none is left', async (t) => {
  const root = await mkdtemp(join(tmpdir(), 'preservd-gate-slots-'));
  const sleepers: Array<ReturnType<typeof spawn>> = [];
  t.teardown(async () => {
    for (const s of sleepers) s.kill('SIGKILL');
    await rm(root, { recursive: true, force: true });
  });
  const layout = new DataLayout(join(root, 'data'));
  for (const dir of [layout.landing, layout.closed, layout.active, layout.transfers])
    await mkdir(dir, { recursive: true });
  const cap = newCapability();
  await mkdir(join(layout.landing, cap));
  const pre = [HOOK_SOURCES.pre.pathname, ...hookCommands(layout, 'preservd', 2).pre.slice(1)];
  // Transfers in progress are records named by live pids (rsync's connection processes).
  const live = (): number => {
    const s = spawn('sleep', ['60'], { stdio: 'ignore' });
    sleepers.push(s);
    return s.pid!;
  };
  const gate = (pid: number) => {
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      RSYNC_PID: String(pid),
      RSYNC_REQUEST: `preservd/${cap}/`,
    };
    ['rsyncd', '--server', '-vtrze.iLsfxCIvu', '.', `${cap}/`].forEach(
      (arg, i) => (env[`RSYNC_ARG${i}`] = arg),
    );
    const r = spawnSync('/bin/sh', pre, { env, encoding: 'utf8' });
    return { status: r.status, stdout: r.stdout.trim() };
  };
  t.equal(gate(live()).status, 0, 'the first upload is admitted');
  t.equal(gate(live()).status, 0, 'the second too');
  const third = live();
  const refused = gate(third);
  t.equal(refused.status, 1, 'the third is refused');
  t.match(refused.stdout, /too many uploads at once \(at most 2\)/, 'with a clear message');
  t.notOk((await readdir(layout.active)).includes(String(third)), 'and takes no slot');
  await writeFile(join(layout.active, '4000000'), `${cap}\n`); // a dead transfer's stale record
  sleepers.shift()!.kill('SIGKILL');
  await new Promise((r) => setTimeout(r, 200));
  t.equal(
    gate(live()).status,
    0,
    'a slot freed by an ended transfer is taken again; stale records do not count',
  );
});
