/**
 * The rsync daemon and its gate, against the real rsync binary on loopback: what the chipmunk
 * client's upload does, what the gate refuses, transfer records, an rsync that dies, and stop.
 */
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import t, { type Test } from 'tap';
import { newCapability } from '../../src/ingest/capability.js';
import { isRsyncProcess, LandingZone } from '../../src/ingest/landing.js';
import {
  hookCommands,
  HOOK_SOURCES,
  parseTransferRecord,
  RsyncDaemon,
  rsyncdConfig,
  rsyncGreets,
  shellQuote,
  type Transfer,
} from '../../src/ingest/rsync/index.js';
import { DataLayout } from '../../src/storage/layout.js';
import { node } from '../helpers/node.js';
import { freePort } from '../helpers/daemon.js';

/** The chipmunk client's exact upload command line (minus source and link). */
const CHIPMUNK_FLAGS = ['-rtvzP', '--delete', '--no-group', '--no-perms', '--chmod=ugo=rwX'];

/** The landing zone of a data directory made as the daemon makes it (`DataLayout.ensure`). */
async function landingIn(dataDir: string): Promise<LandingZone> {
  const layout = new DataLayout(dataDir);
  await layout.ensure();
  return new LandingZone(layout);
}

interface RsyncResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

function rsync(args: string[]): Promise<RsyncResult> {
  return new Promise((resolve, reject) => {
    const child = spawn('rsync', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d));
    child.stderr.on('data', (d: Buffer) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

async function waitFor(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs = 10_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

/** Pids of processes whose command line mentions `needle` (our config path). */
async function processesMentioning(needle: string): Promise<number[]> {
  const pids: number[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cmdline = (await readFile(`/proc/${name}/cmdline`, 'utf8')).replaceAll('\0', ' ');
      const stat = await readFile(`/proc/${name}/stat`, 'utf8');
      const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
      if (cmdline.includes(needle) && state !== 'Z') pids.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

/** A bag-like folder: two files at the top, one in a subfolder. */
async function makeSource(root: string): Promise<string> {
  const bag = join(root, 'bag');
  await mkdir(join(bag, 'data', 'sub'), { recursive: true });
  await writeFile(join(bag, 'bagit.txt'), 'BagIt-Version: 1.0\nTag-File-Character-Encoding: UTF-8\n');
  await writeFile(join(bag, 'data', 'a.txt'), 'hello\n');
  await writeFile(join(bag, 'data', 'sub', 'b.bin'), Buffer.alloc(10_000, 7));
  return bag;
}

interface Fixture {
  root: string;
  dataDir: string;
  daemon: RsyncDaemon;
  landing: LandingZone;
  port: number;
  source: string;
  transfers: Transfer[];
}

/**
 * A running daemon on a free port over a fresh data dir. rsync takes 1.5–2 s to exit on SIGTERM
 * (longer with a transfer in flight), so teardown cuts that short with SIGKILL.
 */
async function startFixture(
  t: Test,
  options: { transferPollMs?: number; stopTimeoutMs?: number } = {},
): Promise<Fixture> {
  const root = await mkdtemp(join(tmpdir(), 'preservd-rsyncd-'));
  const dataDir = join(root, 'var');
  const port = await freePort();
  const landing = await landingIn(dataDir);
  const daemon = new RsyncDaemon({
    landing,
    port,
    transferPollMs: options.transferPollMs ?? 200,
    stopTimeoutMs: options.stopTimeoutMs ?? 100,
  });
  t.teardown(async () => {
    await daemon.stop();
    await rm(root, { recursive: true, force: true });
  });
  await daemon.start();
  const transfers: Transfer[] = [];
  daemon.onTransfer((tr) => {
    transfers.push(tr);
  });
  return { root, dataDir, daemon, landing, port, source: await makeSource(root), transfers };
}

t.test(
  'the chipmunk client uploads a bag into its landing folder, and a transfer record arrives',
  async (t) => {
    const f = await startFixture(t);
    const cap = newCapability();
    await f.landing.open(cap);
    const link = f.daemon.uploadLink(cap);
    t.equal(link, `rsync://127.0.0.1:${f.port}/preservd/${cap}/`);

    const result = await rsync([...CHIPMUNK_FLAGS, `${f.source}/`, link]);
    t.equal(result.code, 0, result.stderr);
    const dir = f.landing.path(cap);
    t.equal(await readFile(join(dir, 'data', 'a.txt'), 'utf8'), 'hello\n');
    t.equal((await readFile(join(dir, 'data', 'sub', 'b.bin'))).length, 10_000);
    t.match(await readFile(join(dir, 'bagit.txt'), 'utf8'), /BagIt-Version: 1.0/);

    await waitFor('a transfer record', () => f.transfers.length === 1);
    const [transfer] = f.transfers;
    t.match(transfer, { capability: cap, exitStatus: 0, hostAddr: '127.0.0.1' });
    t.ok(Math.abs((transfer?.endedAt ?? 0) - Date.now()) < 10_000, 'endedAt is epoch ms of about now');
    await waitFor(
      'the record to be consumed',
      async () => (await readdir(f.daemon.layout.transfers)).length === 0,
    );
    t.equal(await f.landing.activeTransfers(cap), 0, 'the transfer is no longer active');

    // The client's --delete works inside the capability: a file removed at the source goes.
    await rm(join(f.source, 'data', 'a.txt'));
    const again = await rsync([...CHIPMUNK_FLAGS, `${f.source}/`, link]);
    t.equal(again.code, 0, again.stderr);
    await t.rejects(readFile(join(dir, 'data', 'a.txt')), { code: 'ENOENT' });
  },
);

t.test('the gate refuses links that are not an open capability', async (t) => {
  const f = await startFixture(t);
  const cap = newCapability();
  await f.landing.open(cap);
  const base = `rsync://127.0.0.1:${f.port}/preservd`;
  const landingRoot = f.daemon.layout.landing;

  const madeUp = newCapability();
  const refusals: Array<[string, string, RegExp]> = [
    ['a made-up capability', `${base}/${madeUp}/`, /unknown upload link/],
    ['the module root with a slash', `${base}/`, /upload into your request's upload_link/],
    ['the module root without a slash', base, /upload into your request's upload_link/],
    ['a new top-level folder', `${base}/newfolder/`, /upload into your request's upload_link/],
    ['a new folder beside the capability via ..', `${base}/${cap}/../${madeUp}/`, /unknown upload link|\.\./],
  ];
  for (const [what, link, message] of refusals) {
    const result = await rsync([...CHIPMUNK_FLAGS, `${f.source}/`, link]);
    t.not(result.code, 0, `${what} is refused`);
    t.match(result.stderr, message, `${what}: the client is told why`);
  }
  t.same((await readdir(landingRoot)).sort(), [cap], 'nothing was created beside the open capability');
  t.same(await readdir(f.landing.path(cap)), [], 'and nothing was written into it');
  await sleep(300);
  t.same(f.transfers, [], 'refused transfers leave no transfer record');
  t.same(await readdir(f.daemon.layout.active), [], 'nor an active record');

  // Options whose DIR could point at "../<another folder>" are refused by rsync itself (after
  // the gate admitted the link, so this transfer ends with an error status).
  const backup = await rsync([
    ...CHIPMUNK_FLAGS,
    '-b',
    '--backup-dir=../elsewhere',
    `${f.source}/`,
    f.daemon.uploadLink(cap),
  ]);
  t.not(backup.code, 0, '--backup-dir is refused');
  t.match(backup.stderr, /refuse --backup-dir/);
  t.same((await readdir(landingRoot)).sort(), [cap], 'no backup folder beside the capability');
  await waitFor('its transfer record', () => f.transfers.length === 1);
  t.not(f.transfers[0]?.exitStatus, 0);

  // A subfolder of an open capability is fine.
  const sub = await rsync([...CHIPMUNK_FLAGS, `${f.source}/`, `${base}/${cap}/sub/`]);
  t.equal(sub.code, 0, sub.stderr);
});

t.test('after close the link refuses uploads; reopen lets them in again', async (t) => {
  const f = await startFixture(t);
  const cap = newCapability();
  await f.landing.open(cap);
  const link = f.daemon.uploadLink(cap);
  t.equal((await rsync([...CHIPMUNK_FLAGS, `${f.source}/`, link])).code, 0);

  await f.landing.close(cap);
  await writeFile(join(f.source, 'late.txt'), 'too late\n');
  const refused = await rsync([...CHIPMUNK_FLAGS, `${f.source}/`, link]);
  t.not(refused.code, 0, 'refused after close');
  t.match(refused.stderr, /this upload is complete/);
  await t.rejects(readFile(join(f.landing.path(cap), 'late.txt')), { code: 'ENOENT' }, 'nothing written');

  await f.landing.reopen(cap);
  const accepted = await rsync([...CHIPMUNK_FLAGS, `${f.source}/`, link]);
  t.equal(accepted.code, 0, accepted.stderr);
  t.equal(await readFile(join(f.landing.path(cap), 'late.txt'), 'utf8'), 'too late\n');
});

t.test('downloads are refused', async (t) => {
  const f = await startFixture(t);
  const cap = newCapability();
  await f.landing.open(cap);
  t.equal((await rsync([...CHIPMUNK_FLAGS, `${f.source}/`, f.daemon.uploadLink(cap)])).code, 0);

  const target = join(f.root, 'download');
  for (const link of [f.daemon.uploadLink(cap), `rsync://127.0.0.1:${f.port}/preservd/`]) {
    const result = await rsync(['-rt', link, `${target}/`]);
    t.not(result.code, 0, `download from ${link.replace(cap, '<cap>')} is refused`);
    t.match(result.stderr, /write-only/);
  }
  const listing = await rsync([`rsync://127.0.0.1:${f.port}/`]);
  t.notMatch(listing.stdout, /preservd/, 'the module is not listed');
  const got = await readdir(target).catch(() => [] as string[]);
  t.same(got, [], 'nothing was downloaded');
});

t.test('an rsync that dies ends only its own connection; others and new ones go on', async (t) => {
  // Before issue 23's handoff one rsync daemon served every connection and was restarted when
  // it died; now each connection has its own rsync, so there is nothing to restart.
  const f = await startFixture(t);
  const [killed, other] = [newCapability(), newCapability()];
  await f.landing.open(killed);
  await f.landing.open(other);
  const big = join(f.root, 'big');
  await mkdir(big);
  await writeFile(join(big, 'slow.bin'), Buffer.alloc(2_000_000, 1));
  const doomed = rsync(['-rt', '--bwlimit=200', `${big}/`, f.daemon.uploadLink(killed)]);
  const survivor = rsync(['-rt', '--bwlimit=800', `${big}/`, f.daemon.uploadLink(other)]);
  await waitFor(
    'both transfers to be admitted',
    async () =>
      (await f.landing.activeTransfers(killed)) === 1 && (await f.landing.activeTransfers(other)) === 1,
  );
  const records = await readdir(f.daemon.layout.active);
  const contents = await Promise.all(records.map((r) => readFile(join(f.daemon.layout.active, r), 'utf8')));
  const pid = Number(records[contents.findIndex((c) => c.trim() === killed)]);
  t.ok(
    f.daemon.connections.includes(pid),
    'the gate recorded the pid of the rsync started for the connection',
  );
  process.kill(-pid, 'SIGKILL'); // it and the processes it forked for the transfer

  t.not((await doomed).code, 0, 'the client of the killed rsync sees an error');
  const ok = await survivor;
  t.equal(ok.code, 0, `the other upload runs to its end: ${ok.stderr}`);
  t.equal((await stat(join(f.landing.path(other), 'slow.bin'))).size, 2_000_000);
  const again = await rsync([...CHIPMUNK_FLAGS, `${f.source}/`, f.daemon.uploadLink(killed)]);
  t.equal(again.code, 0, `a new connection is served at once: ${again.stderr}`);
  t.ok(await accepts(f.port), 'the port is still listened on');
  t.ok(await rsyncGreets('127.0.0.1', f.port), 'and rsync greets on it');
  t.equal(f.daemon.restarts, 0, 'nothing was restarted');
});

t.test('stop() ends rsync and the transfers it serves', async (t) => {
  // SIGTERM first; the receiving rsync of a transfer in flight ignores it for seconds, so the
  // SIGKILL after the deadline is exercised too.
  const f = await startFixture(t, { stopTimeoutMs: 1_000 });
  const cap = newCapability();
  await f.landing.open(cap);
  const big = join(f.root, 'big');
  await mkdir(big);
  await writeFile(join(big, 'slow.bin'), Buffer.alloc(2_000_000, 1));
  const upload = rsync(['-rt', '--bwlimit=200', `${big}/`, f.daemon.uploadLink(cap)]);
  await waitFor('the slow transfer to start', async () => (await f.landing.activeTransfers(cap)) === 1);
  t.equal(await f.landing.activeTransfers(cap), 1, 'an admitted transfer counts as active');

  const conf = join(f.daemon.layout.rsyncd, 'rsyncd.conf');
  t.ok((await processesMentioning(conf)).length >= 1, 'rsync runs');
  await f.daemon.stop();
  t.same(await processesMentioning(conf), [], 'no rsync process is left');
  t.same(f.daemon.connections, [], 'none is counted as serving a connection');
  const result = await upload;
  t.not(result.code, 0, 'the interrupted client sees an error');
  t.equal(await f.landing.activeTransfers(cap), 0, 'its stale active record is cleaned when counted');
});

t.test('start() explains how to install a missing rsync', async (t) => {
  const root = await mkdtemp(join(tmpdir(), 'preservd-rsyncd-'));
  t.teardown(() => rm(root, { recursive: true, force: true }));
  const daemon = new RsyncDaemon({
    landing: await landingIn(root),
    port: await freePort(),
    binary: join(root, 'no-such-rsync'),
  });
  await t.rejects(daemon.start(), /apt-get install rsync/);
  await daemon.stop();
});

t.test('start() fails when the port is taken', async (t) => {
  const f = await startFixture(t);
  const other = new RsyncDaemon({ landing: await landingIn(join(f.root, 'other')), port: f.port });
  t.teardown(() => other.stop());
  // The listener on the port fails (rsync itself listens on a free loopback port).
  await t.rejects(other.start(), /rsync port 127\.0\.0\.1:\d+ is already in use/);
});

t.test('configuration and record formats', async (t) => {
  const layout = new DataLayout('/srv/preservd');
  const conf = rsyncdConfig({ layout, module: 'preservd', maxConnections: 20, timeoutSeconds: 600 });
  for (const line of [
    'path = /srv/preservd/landing',
    'use chroot = no',
    'read only = no',
    'write only = yes',
    'list = no',
    'munge symlinks = yes',
    'timeout = 600',
    // The 20 upload slots are the gate's last argument: rsync's "max connections" would be
    // charged before the capability is checked.
    "pre-xfer exec = /bin/sh '/srv/preservd/rsyncd/pre-xfer.sh' '/srv/preservd/landing' '/srv/preservd/rsyncd/closed' '/srv/preservd/rsyncd/active' 'preservd' '20'\n",
    "post-xfer exec = /bin/sh '/srv/preservd/rsyncd/post-xfer.sh' '/srv/preservd/rsyncd/active' '/srv/preservd/rsyncd/transfers'\n",
  ]) {
    t.ok(conf.includes(line), line);
  }
  t.notMatch(conf, /auth users|secrets file/, 'no rsync users: the capability is the secret');
  t.notMatch(conf, /max connections/, 'no rsync slot is charged before the gate');
  t.notMatch(conf, /refuse options = .*\bdelete\b/, '--delete is allowed');
  t.equal(shellQuote("it's"), `'it'\\''s'`);

  const cap = newCapability();
  t.same(
    parseTransferRecord(
      `capability=${cap}\nexit_status=23\nraw_status=5888\nended_at=1700000000123\nhost_addr=::1\npid=42\n`,
    ),
    {
      capability: cap,
      exitStatus: 23,
      endedAt: 1700000000123,
      hostAddr: '::1',
    },
  );
  t.equal(parseTransferRecord('capability=nope\nexit_status=0\nended_at=1\n'), undefined);
  t.equal(parseTransferRecord(`capability=${cap}\nexit_status=\nended_at=1\n`), undefined);

  const daemon = new RsyncDaemon({ landing: new LandingZone(layout), port: 8873 });
  t.equal(daemon.uploadLink(cap, 'uploads.example.org'), `rsync://uploads.example.org:8873/preservd/${cap}/`);
  t.equal(daemon.uploadLink(cap, '::1'), `rsync://[::1]:8873/preservd/${cap}/`);
  t.throws(() => daemon.uploadLink('../etc'), /not an upload capability/);
  t.throws(
    () => new RsyncDaemon({ landing: new LandingZone(new DataLayout('/srv/100%')), port: 8873 }),
    /must not contain/,
  );
});

t.test('a listener that fails gets the record again; records survive a restart of preservd', async (t) => {
  const f = await startFixture(t, { transferPollMs: 100 });
  const cap = newCapability();
  await f.landing.open(cap);
  // Deliveries fail: the record must stay on disk.
  let fail = true;
  const seen: Transfer[] = [];
  f.daemon.onTransfer((tr) => {
    seen.push(tr);
    if (fail) throw new Error('catalog unavailable');
  });
  t.equal((await rsync([...CHIPMUNK_FLAGS, `${f.source}/`, f.daemon.uploadLink(cap)])).code, 0);
  await waitFor('a delivery attempt', () => seen.length >= 1);
  await sleep(200);
  t.equal(
    (await readdir(f.daemon.layout.transfers)).filter((n) => !n.startsWith('.')).length,
    1,
    'the record is kept',
  );

  // A new daemon over the same data dir (preservd restarted) delivers it again.
  await f.daemon.stop();
  fail = false;
  const second = new RsyncDaemon({ landing: f.landing, port: await freePort(), transferPollMs: 100 });
  t.teardown(() => second.stop());
  const delivered: Transfer[] = [];
  second.onTransfer((tr) => {
    delivered.push(tr);
  });
  await second.start();
  await waitFor('re-delivery', () => delivered.length === 1);
  t.equal(delivered[0]?.capability, cap);
  await waitFor(
    'the record to be removed',
    async () => (await readdir(second.layout.transfers)).length === 0,
  );
});

t.test('the gate and recorder scripts, run as rsync runs them', async (t) => {
  const root = await mkdtemp(join(tmpdir(), 'preservd-gate-'));
  t.teardown(() => rm(root, { recursive: true, force: true }));
  const layout = new DataLayout(join(root, "it's data")); // a quote in the path must not break them
  for (const dir of [layout.landing, layout.closed, layout.active, layout.transfers])
    await mkdir(dir, { recursive: true });
  // The scripts as shipped, with the arguments rsyncd.conf gives them.
  const hooks = hookCommands(layout, 'preservd');
  const pre = [HOOK_SOURCES.pre.pathname, ...hooks.pre.slice(1)];
  const post = [HOOK_SOURCES.post.pathname, ...hooks.post.slice(1)];
  const open = newCapability();
  const other = newCapability();
  await mkdir(join(layout.landing, open));
  await mkdir(join(layout.landing, other));

  let pid = 4_000_000;
  /** Runs the gate with the request and server arguments rsync would pass. */
  const gate = (
    request: string | undefined,
    paths: string[],
    options: string[] = ['-vtrze.iLsfxCIvu', '--delete', '--partial'],
  ) => {
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      RSYNC_PID: String(++pid),
    };
    if (request !== undefined) env.RSYNC_REQUEST = request;
    ['rsyncd', '--server', ...options, '.', ...paths].forEach((arg, i) => (env[`RSYNC_ARG${i}`] = arg));
    const r = spawnSync('/bin/sh', pre, { env, encoding: 'utf8' });
    return { status: r.status, stdout: r.stdout.trim(), pid };
  };

  const ok = gate(`preservd/${open}/`, [`${open}/`]);
  t.equal(ok.status, 0, ok.stdout);
  t.equal(
    (await readFile(join(layout.active, String(ok.pid)), 'utf8')).trim(),
    open,
    'the admitted transfer is recorded',
  );
  t.equal(gate(`preservd/${open}`, [open]).status, 0, 'no trailing slash');
  t.equal(gate(`preservd/${open}/data/sub/`, [`${open}/data/sub/`]).status, 0, 'a folder inside the upload');
  t.equal(gate(`preservd/${open}/`, [`${open}/`], ['-stre.iLsfxCIvu']).status, 0, 'with --protect-args');

  const refused: Array<[string, ReturnType<typeof gate>, RegExp]> = [
    ['the module root', gate('preservd/', ['.']), /upload into your request's upload_link/],
    [
      'a made-up capability',
      gate(`preservd/${newCapability()}/`, [`${newCapability()}/`]),
      /unknown upload link/,
    ],
    ['a new top-level folder', gate('preservd/newfolder/', ['newfolder/']), /upload_link/],
    // rsync sanitizes the path it uses: ".." is gone from the argument but not the request.
    ['an escape with ..', gate(`preservd/${open}/../${other}/`, [`${other}/`]), /unknown upload link/],
    ['.. that stays inside', gate(`preservd/${open}/x/../y/`, [`${open}/y/`]), /must not contain ".."/],
    ['a request that is not the path used', gate(`preservd/${open}/`, [`${other}/`]), /unknown upload link/],
    [
      'two destinations',
      gate(`preservd/${open}/ preservd/${other}/`, [`${open}/`, `${other}/`]),
      /exactly one destination/,
    ],
    ['a download', gate(`preservd/${open}/`, [`${open}/`], ['--sender', '-vtre.iLsfxCIvu']), /write-only/],
    ['another module', gate(`other/${open}/`, [`${open}/`]), /unknown upload link/],
    [
      'an upper-case capability',
      gate(`preservd/${open.toUpperCase()}/`, [`${open.toUpperCase()}/`]),
      /upload_link/,
    ],
    ['a short capability', gate(`preservd/${open.slice(1)}/`, [`${open.slice(1)}/`]), /unknown upload link/],
    ['no request', gate(undefined, [`${open}/`]), /unknown upload link/],
  ];
  for (const [what, result, message] of refused) {
    t.equal(result.status, 1, `${what} is refused`);
    t.match(result.stdout, message, `${what}: ${result.stdout}`);
    t.equal(result.stdout.split('\n').length, 1, 'with one line');
  }

  await writeFile(join(layout.closed, open), '');
  const closed = gate(`preservd/${open}/`, [`${open}/`]);
  t.equal(closed.status, 1);
  t.match(closed.stdout, /this upload is complete/);
  await t.rejects(
    stat(join(layout.active, String(closed.pid))),
    { code: 'ENOENT' },
    'a refused transfer leaves no record',
  );
  await rm(join(layout.landing, other), { recursive: true });
  t.match(
    gate(`preservd/${other}/`, [`${other}/`]).stdout,
    /unknown upload link/,
    'a staged upload (folder gone) is refused',
  );

  // The recorder turns the admitted transfer's record into a transfer record.
  const env = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    RSYNC_PID: String(ok.pid),
    RSYNC_EXIT_STATUS: '0',
    RSYNC_RAW_STATUS: '0',
    RSYNC_HOST_ADDR: '192.0.2.7',
  };
  t.equal(spawnSync('/bin/sh', post, { env }).status, 0);
  await t.rejects(stat(join(layout.active, String(ok.pid))), { code: 'ENOENT' }, 'the active record is gone');
  const records = await readdir(layout.transfers);
  t.equal(records.length, 1);
  t.match(records[0], new RegExp(`^\\d{13}-${ok.pid}$`));
  const record = parseTransferRecord(await readFile(join(layout.transfers, records[0]!), 'utf8'));
  t.same(record && { ...record, endedAt: 0 }, {
    capability: open,
    exitStatus: 0,
    endedAt: 0,
    hostAddr: '192.0.2.7',
  });
  t.ok(record && Math.abs(record.endedAt - Date.now()) < 10_000);
  t.equal(spawnSync('/bin/sh', post, { env: { ...env, RSYNC_PID: String(closed.pid) } }).status, 0);
  t.equal((await readdir(layout.transfers)).length, 1, 'a refused transfer ends without a record');
});

t.test(
  'rsync does not outlive a preservd killed outright, and a leftover one is ended at the next start',
  async (t) => {
    const root = await mkdtemp(join(tmpdir(), 'preservd-rsyncd-'));
    const dataDir = join(root, 'var');
    const port = await freePort();
    const conf = join(dataDir, 'rsyncd', 'rsyncd.conf');
    const moduleUrl = new URL('../../src/ingest/rsync/index.js', import.meta.url).href;
    const script = `
    const { RsyncDaemon } = await import(${JSON.stringify(moduleUrl)});
    const { LandingZone } = await import(${JSON.stringify(new URL('../../src/ingest/landing.js', import.meta.url).href)});
    const { DataLayout } = await import(${JSON.stringify(new URL('../../src/storage/layout.js', import.meta.url).href)});
    const layout = new DataLayout(${JSON.stringify(dataDir)});
    await layout.ensure();
    const d = new RsyncDaemon({ landing: new LandingZone(layout), port: ${port} });
    await d.start();
    console.log('started');
    setInterval(() => {}, 1000);`;
    const crashed = spawn(...node(['--input-type=module', '-e', script]), {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const strays: number[] = [];
    const held = new net.Socket();
    t.teardown(async () => {
      held.destroy();
      crashed.kill('SIGKILL');
      for (const pid of strays) {
        try {
          process.kill(-pid, 'SIGKILL');
        } catch {
          // already ended, as the test expects of the escaped rsync
        }
      }
      await rm(root, { recursive: true, force: true });
    });
    await once(crashed.stdout, 'data');
    // A connection held open: the crashed preservd started an rsync for it.
    held.on('error', () => undefined);
    held.connect(port, '127.0.0.1');
    let first = 0;
    await waitFor('an rsync for the held connection', async () => {
      first = (await processesMentioning(conf))[0] ?? 0;
      return first > 0 && (await isAlive(first)); // exec'd: rsync, no longer setpriv or bash
    });
    t.ok(await isAlive(first), 'rsync runs');
    crashed.kill('SIGKILL');
    await once(crashed, 'exit');
    await waitFor('the kernel to end rsync with its parent', async () => !(await isAlive(first)));

    // An rsync that escaped anyway (a long-lived daemon of an older preservd, or the signal was
    // lost) runs our configuration: its command line names it, and the next start ends it.
    const escaped = spawn(
      'rsync',
      ['--daemon', '--no-detach', `--config=${conf}`, `--port=${await freePort()}`, '--address=127.0.0.1'],
      {
        detached: true,
        stdio: 'ignore',
      },
    );
    strays.push(escaped.pid!);
    // Another data folder's rsync is not ours: it is left alone.
    const otherConf = join(root, 'other.conf');
    await writeFile(otherConf, 'use chroot = no\n[x]\n  path = /nonexistent\n');
    const bystander = spawn(
      'rsync',
      [
        '--daemon',
        '--no-detach',
        `--config=${otherConf}`,
        `--port=${await freePort()}`,
        '--address=127.0.0.1',
      ],
      {
        detached: true,
        stdio: 'ignore',
      },
    );
    strays.push(bystander.pid!);
    await waitFor(
      'both strays to run',
      async () => (await isAlive(escaped.pid!)) && (await isAlive(bystander.pid!)),
    );

    const daemon = new RsyncDaemon({ landing: await landingIn(dataDir), port, stopTimeoutMs: 100 });
    t.teardown(() => daemon.stop());
    await daemon.start();
    t.notOk(await isAlive(escaped.pid!), 'the leftover rsync was ended');
    t.ok(await rsyncGreets('127.0.0.1', port), 'and ours listens on the port');
    t.equal(bystander.exitCode, null, 'the unrelated rsync still runs');
    t.equal(bystander.signalCode, null);
    t.ok(await isAlive(bystander.pid!));
  },
);

/** Whether a connection to the port on loopback is accepted. */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => {
      socket.destroy();
      resolve(true);
    });
    socket.on('error', () => resolve(false));
  });
}

/** Running, not a zombie: orphans here may wait a while for PID 1 to reap them. */
function isAlive(pid: number): Promise<boolean> {
  return isRsyncProcess(pid);
}
