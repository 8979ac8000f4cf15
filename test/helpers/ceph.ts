/**
 * A private, throw-away Ceph cluster with the RADOS Gateway for the S3 tests: one monitor, one
 * OSD on memstore (objects in RAM) and radosgw, all bound to 127.0.0.1 on free ports, all state
 * in a temporary folder. It starts in about two seconds (the recipe and why each setting is
 * there: ../shared/research/ceph-rgw.md). Every daemon is started through `setpriv
 * --pdeathsig=KILL`, so none outlives the test process, even when it is killed; `t.teardown`
 * kills them and removes the folder when the test ends, passed or failed.
 *
 * Each test file that calls `startCeph` gets its own cluster (tap runs files in parallel; a
 * cluster holds about 140 MiB at idle). radosgw answers both `http:` (`endpoint`) and `https:`
 * (`httpsEndpoint`, beast's own TLS) with a certificate for 127.0.0.1 from a CA made here by
 * `openssl` (`caFile`), so the replica tests run over both schemes on one cluster. `s3Test` runs a subtest only when the Ceph programs are
 * installed; without them the subtest is skipped with the reason, unless PRESERVD_REQUIRE_S3=1
 * (set by `.ci/run`), where it runs and fails.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { accessSync, constants, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import type { Test } from 'tap';
import { portFree } from './daemon.js';

const run = promisify(execFile);

const PROGRAMS = [
  'ceph-authtool',
  'monmaptool',
  'ceph-mon',
  'ceph-osd',
  'radosgw',
  'radosgw-admin',
  'ceph',
  'setpriv',
  'openssl',
];
const INSTALL = 'apt-get install --no-install-recommends ceph-mon ceph-osd radosgw ceph-common openssl';

/** Why the S3 tests cannot run here (a program is missing), or undefined when they can. */
function cephMissing(): string | undefined {
  const path = (process.env.PATH ?? '').split(delimiter).filter(Boolean);
  const missing = PROGRAMS.filter((p) => !path.some((dir) => isExecutable(join(dir, p))));
  return missing.length === 0
    ? undefined
    : `the S3 tests need a real Ceph RADOS Gateway, and ${missing.join(', ')} ${missing.length === 1 ? 'is' : 'are'} not installed (${INSTALL})`;
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * `t.test(name, fn)` when Ceph can run here; otherwise a skipped subtest that says why, loudly
 * (on stderr too), or, with PRESERVD_REQUIRE_S3=1, the subtest runs anyway and fails.
 */
export function s3Test(t: Test, name: string, fn: (t: Test) => Promise<void>): void {
  const missing = cephMissing();
  if (missing !== undefined && process.env.PRESERVD_REQUIRE_S3 !== '1') {
    process.stderr.write(
      `\n*** SKIPPED S3 TEST "${name}": ${missing}. Set PRESERVD_REQUIRE_S3=1 to make this a failure. ***\n\n`,
    );
    t.test(name, { skip: missing }, async () => undefined);
    return;
  }
  t.test(name, fn);
}

export interface Ceph {
  /** `http://127.0.0.1:port` */
  endpoint: string;
  /** The same gateway over TLS, `https://127.0.0.1:port`, its certificate signed by `caFile`. */
  httpsEndpoint: string;
  /** The PEM of the CA that signed the gateway's certificate (trusted by nothing else). */
  caFile: string;
  accessKeyId: string;
  secretAccessKey: string;
  region: string;
  /** The cluster's folder (logs in `log/`). */
  dir: string;
  /** Kills radosgw (SIGKILL): the S3 endpoint stops answering; the cluster keeps its data. */
  stopGateway(): Promise<void>;
  /** Starts radosgw again on the same port and waits until it answers. */
  startGateway(): Promise<void>;
  /** Stops everything and removes the folder (also done by the test's teardown). */
  stop(): Promise<void>;
}

/**
 * Ports `base` … `base + 32` free on 127.0.0.1 (the mon, the OSD's range, and radosgw at +31 and
 * +32), in 20000–31999: below Linux's ephemeral range (32768 up), where a port found free could
 * be taken by any outgoing connection or `listen(0)` before radosgw binds it (it was, once), and
 * apart from the test daemons' ports (10000–19999, daemon.ts).
 */
async function freePortBlock(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 20000 + Math.floor(Math.random() * (12000 - 33));
    let free = true;
    for (let p = base; p <= base + 32 && free; p++) free = await portFree(p);
    if (free) return base;
  }
  throw new Error('no block of 33 free ports found on 127.0.0.1');
}

function confText(dir: string, monPort: number, rgwPort: number, tlsPort: number): string {
  return `[global]
fsid = ${randomUUID()}
mon host = [v2:127.0.0.1:${monPort}]
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind msgr1 = false
ms bind ipv6 = false
ms bind port min = ${monPort + 1}
ms bind port max = ${monPort + 30}
auth cluster required = none
auth service required = none
auth client required = none
auth allow insecure global id reclaim = false
keyring = ${dir}/keyring
run dir = ${dir}/run
crash dir = ${dir}/crash
tmp dir = ${dir}/tmp
mon cluster log file = ${dir}/log/cluster.log
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
mon allow pool size one = true
mon warn on pool no redundancy = false
mon warn on pool pg num not power of two = false
mon max pg per osd = 1000
osd crush chooseleaf type = 0
mon data avail warn = 2
mon data avail crit = 1
mon osd nearfull ratio = .97
mon osd backfillfull ratio = .98
mon osd full ratio = .99
osd failsafe full ratio = .995
mon mgr mkfs grace = 31536000
paxos propose interval = 0.01
paxos min wait = 0.01
# A radosgw killed by a test (stopGateway) leaves its watches on the control objects; the next
# bucket creation's notify waits for them to time out: 30 s by default, 4 s here (the watchers
# alive ping every second).
osd client watch timeout = 4
objecter tick interval = 1

[mon]
mon data = ${dir}/mon/$id
log file = ${dir}/log/$name.log

[osd]
osd data = ${dir}/osd/$id
log file = ${dir}/log/$name.log
osd objectstore = memstore
osd crush update on start = false
memstore device bytes = ${8 * 1024 ** 3}

[client.rgw.a]
log file = ${dir}/log/$name.log
rgw data = ${dir}/rgw
rgw frontends = beast endpoint=127.0.0.1:${rgwPort} ssl_endpoint=127.0.0.1:${tlsPort} ssl_certificate=${dir}/tls/gateway.pem ssl_private_key=${dir}/tls/gateway.key
rgw dns name = localhost
rgw gc obj min wait = 10
rgw gc processor period = 10
ms mon client mode = secure crc
`;
}

const POOLS = [
  '.rgw.root',
  'default.rgw.log',
  'default.rgw.control',
  'default.rgw.meta',
  'default.rgw.buckets.index',
  'default.rgw.buckets.data',
  'default.rgw.buckets.non-ec',
];

/** Starts a cluster for this test (or benchmark); it is torn down when the test ends. */
export async function startCeph(t: { teardown(fn: () => unknown): void }): Promise<Ceph> {
  const missing = cephMissing();
  if (missing !== undefined) throw new Error(missing);
  for (let attempt = 1; ; attempt++) {
    const dir = mkdtempSync(join(tmpdir(), 'preservd-ceph-'));
    const children: ChildProcess[] = [];
    let stopped = false;
    const stop = async () => {
      if (stopped) return;
      stopped = true;
      for (const child of children.reverse()) await kill(child);
      rmSync(dir, { recursive: true, force: true });
    };
    t.teardown(stop);
    try {
      return await bootstrap(dir, children, stop);
    } catch (err) {
      const logs = tailLogs(dir);
      await stop();
      // Another cluster of a test running beside this one may have taken a port of the block
      // between the check and radosgw's bind (seconds later): a new block, a new cluster.
      if (attempt < 3 && logs.includes('Address already in use')) continue;
      throw new Error(`Ceph did not start: ${(err as Error).message}\n${logs}`);
    }
  }
}

async function bootstrap(dir: string, children: ChildProcess[], stop: () => Promise<void>): Promise<Ceph> {
  for (const sub of ['mon/a', 'osd/0', 'rgw', 'run', 'log', 'crash', 'tmp', 'tls'])
    mkdirSync(join(dir, sub), { recursive: true });
  const monPort = await freePortBlock();
  const rgwPort = monPort + 31;
  const tlsPort = monPort + 32;
  const conf = join(dir, 'ceph.conf');
  writeFileSync(conf, confText(dir, monPort, rgwPort, tlsPort));
  const caFile = await makeCertificates(join(dir, 'tls'));
  const c = ['-c', conf];
  const keyring = join(dir, 'keyring');
  // Every key up front: ceph-mon --mkfs imports the whole keyring.
  await run('ceph-authtool', [
    '--create-keyring',
    keyring,
    '--gen-key',
    '-n',
    'mon.',
    '--cap',
    'mon',
    'allow *',
  ]);
  await run('ceph-authtool', [
    keyring,
    '--gen-key',
    '-n',
    'client.admin',
    '--cap',
    'mon',
    'allow *',
    '--cap',
    'osd',
    'allow *',
    '--cap',
    'mgr',
    'allow *',
  ]);
  await run('ceph-authtool', [
    keyring,
    '--gen-key',
    '-n',
    'osd.0',
    '--cap',
    'mon',
    'allow profile osd',
    '--cap',
    'osd',
    'allow *',
  ]);
  await run('ceph-authtool', [
    keyring,
    '--gen-key',
    '-n',
    'client.rgw.a',
    '--cap',
    'mon',
    'allow rw',
    '--cap',
    'osd',
    'allow rwx',
  ]);
  const fsid = /fsid = (\S+)/.exec(readFileSync(conf, 'utf8'))![1]!;
  await run('monmaptool', [
    '--create',
    '--fsid',
    fsid,
    '--addv',
    'a',
    `[v2:127.0.0.1:${monPort}]`,
    join(dir, 'monmap'),
  ]);
  await run('ceph-mon', [...c, '--mkfs', '-i', 'a', '--monmap', join(dir, 'monmap'), '--keyring', keyring]);
  const mon = daemon(dir, 'mon.a', 'ceph-mon', [...c, '-i', 'a', '-f']);
  children.push(mon);
  await until(() => listens(monPort), 10_000, 'the monitor did not listen', mon);

  // The OSD's id and every pool radosgw wants, in one ceph CLI process (its start-up is slow).
  const osdUuid = randomUUID();
  const commands = [`osd new ${osdUuid} 0`, 'osd crush add osd.0 1.0 host=localhost root=default'];
  for (const pool of POOLS)
    commands.push(`osd pool create ${pool} 8 8 replicated`, `osd pool application enable ${pool} rgw`);
  await runWithInput('ceph', [...c, '--connect-timeout', '30'], `${commands.join('\n')}\n`);

  await run('ceph-osd', [...c, '-i', '0', '--mkfs', '--osd-uuid', osdUuid]);
  // Freed object buffers go back to the OS (glibc malloc keeps them otherwise).
  const osd = daemon(dir, 'osd.0', 'ceph-osd', [...c, '-i', '0', '-f'], { MALLOC_MMAP_THRESHOLD_: '131072' });
  children.push(osd);
  // radosgw started before the OSD is active waits 5 s for its next retry.
  await until(
    () => logHas(dir, 'osd.0.log', 'state: booting -> active'),
    60_000,
    'the OSD did not become active',
    osd,
  );

  let rgw: ChildProcess | undefined;
  const endpoint = `http://127.0.0.1:${rgwPort}`;
  const httpsEndpoint = `https://127.0.0.1:${tlsPort}`;
  const startGateway = async () => {
    const gateway = daemon(dir, 'rgw.a', 'radosgw', [...c, '-n', 'client.rgw.a', '-f']);
    children.push(gateway);
    rgw = gateway;
    await until(() => answers(endpoint), 60_000, 'radosgw did not answer', gateway);
    await until(() => listens(tlsPort), 10_000, 'radosgw did not listen for TLS', gateway);
  };
  await startGateway();

  const accessKeyId = randomBytes(10).toString('hex').toUpperCase();
  const secretAccessKey = randomBytes(20).toString('hex');
  await run('radosgw-admin', [
    ...c,
    '-n',
    'client.admin',
    'user',
    'create',
    '--uid=tester',
    '--display-name=tester',
    `--access-key=${accessKeyId}`,
    `--secret=${secretAccessKey}`,
  ]);

  return {
    endpoint,
    httpsEndpoint,
    caFile,
    accessKeyId,
    secretAccessKey,
    region: 'us-east-1',
    dir,
    stopGateway: async () => {
      if (rgw !== undefined) await kill(rgw);
      rgw = undefined;
    },
    startGateway,
    stop,
  };
}

/** A throw-away CA and the gateway's certificate for 127.0.0.1 signed by it, in `dir`; returns the CA's PEM file. */
async function makeCertificates(dir: string): Promise<string> {
  const ca = join(dir, 'ca.pem');
  const days = ['-days', '2'];
  await run('openssl', [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    join(dir, 'ca.key'),
    '-out',
    ca,
    ...days,
    '-subj',
    '/CN=preservd test CA',
  ]);
  await run('openssl', [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    join(dir, 'gateway.key'),
    '-out',
    join(dir, 'gateway.pem'),
    ...days,
    '-subj',
    '/CN=127.0.0.1',
    '-CA',
    ca,
    '-CAkey',
    join(dir, 'ca.key'),
    '-addext',
    'subjectAltName=IP:127.0.0.1',
    '-addext',
    'basicConstraints=critical,CA:FALSE',
  ]);
  return ca;
}

/** A Ceph daemon in the foreground, killed by the kernel if this process dies. */
function daemon(
  dir: string,
  name: string,
  program: string,
  args: string[],
  env: Record<string, string> = {},
): ChildProcess {
  const child = spawn('setpriv', ['--pdeathsig=KILL', '--', program, ...args], {
    stdio: ['ignore', 'ignore', 'ignore'],
    env: { ...process.env, ...env },
  });
  child.on('error', () => undefined);
  writeFileSync(join(dir, 'run', `${name}.spawn.pid`), `${child.pid}\n`);
  return child;
}

async function kill(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}

async function until(
  ready: () => boolean | Promise<boolean>,
  ms: number,
  what: string,
  child?: ChildProcess,
): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (child !== undefined && (child.exitCode !== null || child.signalCode !== null))
      throw new Error(`${what}: it exited (${child.exitCode ?? child.signalCode})`);
    if (await ready()) return;
    await sleep(50);
  }
  throw new Error(`${what} within ${ms / 1000} s`);
}

/** Whether something listens on 127.0.0.1:port (from /proc/net/tcp: no connection made). */
function listens(port: number): boolean {
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  return readFileSync('/proc/net/tcp', 'utf8')
    .split('\n')
    .some((line) => line.includes(`0100007F:${hex} 00000000:0000 0A`));
}

function logHas(dir: string, log: string, text: string): boolean {
  try {
    return readFileSync(join(dir, 'log', log), 'utf8').includes(text);
  } catch {
    return false;
  }
}

async function answers(url: string): Promise<boolean> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
    await res.arrayBuffer();
    return res.ok;
  } catch {
    return false;
  }
}

function runWithInput(program: string, args: string[], input: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(program, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code === 0 && !/^Error/m.test(out)) resolve(out);
      else reject(new Error(`${program} ${args.join(' ')} failed (${code}):\n${out}`));
    });
    child.stdin.end(input);
  });
}

function tailLogs(dir: string): string {
  const parts: string[] = [];
  for (const name of ['mon.a.log', 'osd.0.log', 'client.rgw.a.log']) {
    try {
      const lines = readFileSync(join(dir, 'log', name), 'utf8')
        .trimEnd()
        .split('\n');
      parts.push(`--- ${name}\n${lines.slice(-15).join('\n')}`);
    } catch {
      // not written
    }
  }
  return parts.join('\n');
}
