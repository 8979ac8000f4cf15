/**
 * A million packages and a 200,000-file bag (`node dist/bench/scale.js [--packages N]
 * [--bag-files N] [--parts catalog,open,bag] [--catalog-dir DIR] [--json]`; long: run it alone,
 * `npm run bench -- scale`; `--parts show` measures only the catalog part's show):
 *
 * - a catalog of N (default 1,000,000) synthetic packages written through the catalog's own API
 *   (create, files.put of 20 records, markStored, one ingestion event each; one in a thousand
 *   owned by the regular user `solo`), one of 2,040 files, and 1,000 real stored bags; its bytes
 *   per package;
 * - daemon start-up on it (spawn → serving; target ≤ 3 s);
 * - a show of the 2,040-file package with 32 requests in flight (autocannon, in a process of
 *   its own), p50/p99 (target p99 ≤ 5 ms), beside a bare fastify route of the same shape and a
 *   bare node:http server sending the same body and headers (lib/bare-server.ts), in rounds of
 *   a fixed number of answers, the order rotated each round, after a round of warm-up each, the
 *   servers on core 0 and the client on core 1 (taskset); the CPU each server process and the
 *   client spend per answer, and the daemon's CPU per show over the bare fastify route's, the
 *   median of the per-round ratios (target ≤ 1.5×: the guard on the show's cost; its p99 is the
 *   shared host's noise below ~1 ms);
 *   the first page of 100 of a list, and one from the middle (target ≤ 10 ms); `solo`'s first
 *   page and whole list among everyone's; the whole unpaged list streamed: time, and the
 *   daemon's peak RSS while it streams (target ≤ 200 MB);
 * - requests created per second through the API (16 clients) with 1,000 and with 100,000 open
 *   requests already there, and the daemon's RSS after each (target: the same rate, flat RSS);
 * - a bag of 200,000 small files: `preservd validate` (whole process) against the ingest through
 *   the daemon (rsync exit → complete → DONE), then its zip download and a full audit of it, the
 *   daemon's peak RSS over all three (target ≤ 500 MB).
 *
 * `--catalog-dir DIR` keeps the catalog part's data directory in DIR and, when DIR already holds
 * one built with the same `--packages`, measures on it instead of building it again (22 minutes
 * for a million packages here).
 *
 * The machine is shared: figures are medians where there are rounds, and every limit is printed
 * beside its figure. Everything is written under the OS temporary folder and deleted at the end.
 */
import { fork, spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import {
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { Catalog } from '../src/catalog/catalog.js';
import { encodeCursor } from '../src/catalog/scan.js';
import { SEARCH_BUDGET } from '../src/http/pages/search.js';
import type { FileRecord } from '../src/catalog/types.js';
import { newCapability } from '../src/ingest/capability.js';
import { OBJECT_DECLARATION } from '../src/ocfl/layout.js';
import { DataLayout } from '../src/storage/layout.js';
import { Storage } from '../src/storage/storage.js';
import { TestDaemon } from '../test/helpers/daemon.js';
import { Jar, logIn } from '../test/helpers/session.js';
import { createStoredPackage } from '../test/helpers/stored-package.js';
import type { LoadRequest, LoadResult } from './lib/load-client.js';
import { median } from './stats.js';

const MB = 1e6;
const TARGETS = {
  showP99Ms: 5,
  showCpuToFloor: 1.5,
  firstPageMs: 10,
  streamRssMB: 200,
  startupS: 3,
  bagRssMB: 500,
};
const TYPES = ['audio', 'bentleyaudio', 'video', 'digital', 'video_game'];
const args = process.argv.slice(2);
const option = (name: string, fallback: number) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const PACKAGES = option('packages', 1_000_000);
const BAG_FILES = option('bag-files', 200_000);
const REAL = Math.min(1_000, PACKAGES);
const CATALOG_DIR = args.includes('--catalog-dir') ? args[args.indexOf('--catalog-dir') + 1]! : undefined;
/** Which parts run: `--parts catalog,open,bag` (default all); `show` is the catalog part's show alone. */
const parts = (args.includes('--parts') ? args[args.indexOf('--parts') + 1]! : 'catalog,open,bag').split(',');
const results: Record<string, unknown> = {};
const teardowns: Array<() => unknown> = [];
const t = { teardown: (fn: () => unknown) => void teardowns.push(fn) };

function report(key: string, value: number, unit: string, target?: { limit: number; below: boolean }): void {
  results[key] = value;
  const verdict =
    target === undefined
      ? ''
      : `   target ${target.below ? '≤' : '≥'} ${target.limit} ${unit.split(' ')[0]}   ${(target.below ? value <= target.limit : value >= target.limit) ? 'met' : 'MISSED'}`;
  console.log(`  ${key}: ${value.toFixed(value < 10 ? 2 : 1)} ${unit}${verdict}`);
}

function status(pid: number, field: 'VmRSS' | 'VmHWM' | 'RssAnon' | 'RssFile'): number {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m![1]) * 1024;
}

/** CPU seconds (user + system) a process has used so far: utime and stime of /proc/<pid>/stat, in ticks of 1/100 s. */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' '); // fields[0] is field 3 (state)
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/**
 * Samples a process's VmRSS every 20 ms until stopped; returns the peak, and the peak of its
 * anonymous part (RssAnon: its own memory; the rest is mapped files, mostly catalog pages the
 * kernel maps around each page read, which the page cache holds anyway).
 */
function rssSampler(pid: number): () => number {
  let peak = status(pid, 'VmRSS');
  peakAnon = status(pid, 'RssAnon');
  const timer = setInterval(() => {
    try {
      peak = Math.max(peak, status(pid, 'VmRSS'));
      peakAnon = Math.max(peakAnon, status(pid, 'RssAnon'));
    } catch {
      // exited
    }
  }, 20);
  return () => {
    clearInterval(timer);
    return peak;
  };
}
/** The anonymous peak of the last sampler. */
let peakAnon = 0;

interface PhasePeak {
  phase: string;
  /** Peak VmRSS and RssAnon, and RssAnon as the phase began, bytes. */
  rss: number;
  anon: number;
  anonAtStart: number;
}

/** Peaks of a process's VmRSS and RssAnon, sampled every 20 ms, phase by phase (`next` starts one). */
function phaseSampler(
  pid: number,
  first: string,
): { next: (phase: string) => void; stop: () => PhasePeak[] } {
  const done: PhasePeak[] = [];
  const begin = (phase: string): PhasePeak => ({
    phase,
    rss: 0,
    anon: 0,
    anonAtStart: status(pid, 'RssAnon'),
  });
  let current = begin(first);
  const sample = (): void => {
    try {
      current.rss = Math.max(current.rss, status(pid, 'VmRSS'));
      current.anon = Math.max(current.anon, status(pid, 'RssAnon'));
    } catch {
      // exited
    }
  };
  sample();
  const timer = setInterval(sample, 20);
  return {
    next: (phase) => {
      sample();
      done.push(current);
      current = begin(phase);
      sample();
    },
    stop: () => {
      sample();
      clearInterval(timer);
      done.push(current);
      return done;
    },
  };
}

const percentile = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;

// ---------------------------------------------------------------- the catalog

const fileRecord = (path: string, i: number): FileRecord => ({
  path,
  size: 1000 + i,
  crc32: ((i * 2654435761) >>> 0).toString(16).padStart(8, '0'),
  digests: {
    md5: createHash('md5').update(path).digest('hex'),
    sha256: createHash('sha256').update(path).digest('hex'),
  },
});

function syntheticFiles(count: number): FileRecord[] {
  const files = [
    'bag-info.txt',
    'bagit.txt',
    'chipmunk-info.txt',
    'manifest-md5.txt',
    'manifest-sha256.txt',
    'tagmanifest-sha256.txt',
  ].map(fileRecord);
  const payload = count - files.length;
  for (let i = 0; i < payload; i++)
    files.push(
      fileRecord(
        `data/${String(Math.floor(i / 100)).padStart(3, '0')}/file-${String(i).padStart(5, '0')}.wav`,
        i,
      ),
    );
  return files.sort((a, b) => (a.path < b.path ? -1 : 1));
}

async function buildCatalog(dataDir: string): Promise<{ bigBagId: string; seconds: number }> {
  const catalog = Catalog.open(new DataLayout(dataDir));
  const storage = new Storage(new DataLayout(dataDir));
  const started = Date.now();
  const twenty = syntheticFiles(20);
  const synthetic = PACKAGES - REAL - 1;
  for (let from = 0; from < synthetic; from += 1_000) {
    catalog.transaction(() => {
      for (let i = from; i < Math.min(synthetic, from + 1_000); i++) {
        const bagId = randomUUID();
        const user = i % 1_000 === 500 ? 'solo' : `depositor${i % 97}`;
        catalog.packages.create({
          bagId,
          externalId: `synthetic-${i}`,
          contentType: TYPES[i % TYPES.length]!,
          user,
          capability: newCapability(),
        });
        catalog.files.put(bagId, twenty);
        catalog.packages.markStored(bagId, Storage.storagePath(bagId));
        catalog.events.add({
          bagId,
          type: 'ingestion',
          executor: user,
          outcome: 'success',
          detail: `stored at ${Storage.storagePath(bagId)}`,
        });
      }
    });
    if (from % 100_000 === 0)
      process.stdout.write(`  … ${from} packages (${((Date.now() - started) / 1000).toFixed(0)} s)\n`);
  }
  const bigBagId = randomUUID();
  catalog.packages.create({
    bagId: bigBagId,
    externalId: 'big',
    contentType: 'audio',
    user: 'solo',
    capability: newCapability(),
  });
  catalog.files.put(bigBagId, syntheticFiles(2_040));
  catalog.packages.markStored(bigBagId, Storage.storagePath(bigBagId));
  for (let i = 0; i < REAL; i++)
    await createStoredPackage(catalog, storage, {
      user: i % 10 === 0 ? 'solo' : 'depositor1',
      contentType: TYPES[i % TYPES.length]!,
    });
  forgetCatalogOnlyRecords(catalog, storage);
  await catalog.close();
  return { bigBagId, seconds: (Date.now() - started) / 1000 };
}

/**
 * The synthetic packages are in the catalog only: no object in storage, so the daemon's record
 * writer would look for one on every pass and wait (src/storage/record-writer.ts), CPU that would
 * count against the show. Their records are cleared; the real packages' stay to be written.
 */
function forgetCatalogOnlyRecords(catalog: Catalog, storage: Storage): void {
  let after: string | undefined;
  for (;;) {
    const batch = catalog.records.pending(1_000, after);
    if (batch.length === 0) return;
    catalog.transaction(() => {
      for (const { key, generation } of batch) {
        const object = key.kind === 'package' ? storage.objectDir(key.bagId) : undefined;
        if (object !== undefined && !existsSync(join(object, OBJECT_DECLARATION.name)))
          catalog.records.written(key, generation);
      }
    });
    after = batch.at(-1)!.cursor;
  }
}

/** The 2,040-file package of a catalog `buildCatalog` left in `dataDir` (`--catalog-dir`), which must hold PACKAGES. */
async function keptCatalog(dataDir: string): Promise<{ bigBagId: string }> {
  const catalog = Catalog.open(new DataLayout(dataDir), { readOnly: true });
  try {
    const big = catalog.packages.find('big');
    const count = catalog.packages.count();
    if (big === undefined || count !== PACKAGES)
      throw new Error(
        `${dataDir} holds ${count} packages${big === undefined ? ' and no package "big"' : ''}, not the ${PACKAGES} this run asks for`,
      );
    return { bigBagId: big.bagId };
  } finally {
    await catalog.close();
  }
}

/** A token of `name`: the user added, or given another token when a kept catalog has them already. */
function tokenOf(d: TestDaemon, name: string): string {
  const added = d.cli(['user', 'add', name]);
  const r = added.code === 0 ? added : d.cli(['token', 'issue', name]);
  if (r.code !== 0) throw new Error(`no token for ${name}: ${r.stderr}`);
  return r.stdout.trim().split('\n').at(-1)!;
}

// ---------------------------------------------------------------- HTTP load

/** A GET with a bearer token, or with `cookie:…` a session cookie (the pages take no token); redirects not followed. */
async function timedGet(url: string, token: string): Promise<{ ms: number; bytes: number; status: number }> {
  const started = process.hrtime.bigint();
  const headers = token.startsWith('cookie:')
    ? { cookie: token.slice(7) }
    : { authorization: `Bearer ${token}` };
  const res = await fetch(url, { headers, redirect: 'manual' });
  let bytes = 0;
  for await (const chunk of res.body!) bytes += (chunk as Uint8Array).length; // counted, not kept
  return { ms: Number(process.hrtime.bigint() - started) / 1e6, bytes, status: res.status };
}

/** `total` GETs of `url` with `inFlight` at once; latencies in ms. */
async function load(url: string, token: string, inFlight: number, total: number): Promise<number[]> {
  const latencies: number[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next++ < total) {
        const r = await timedGet(url, token);
        if (r.status !== 200) throw new Error(`${url}: ${r.status}`);
        latencies.push(r.ms);
      }
    }),
  );
  return latencies;
}

/**
 * The show's load client, in a process of its own (lib/load-client.ts): `run` sends it `amount`
 * GETs of `url` over `inFlight` keep-alive connections and returns the latencies (ms) and the
 * CPU seconds the client spent on them.
 */
function loadClient(): {
  run: (
    url: string,
    token: string,
    inFlight: number,
    amount: number,
  ) => Promise<{ latencies: number[]; cpuSeconds: number }>;
  pid: number;
  stop: () => void;
} {
  const child = fork(join(dirname(fileURLToPath(import.meta.url)), 'lib', 'load-client.js'), {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  return {
    run: (url, token, inFlight, amount) =>
      new Promise((resolve, reject) => {
        // A client that dies mid-round fails the bench instead of leaving it waiting.
        const died = (code: number | null) =>
          reject(new Error(`the load client exited (${code}) during a round`));
        child.once('exit', died);
        child.once('message', (result: LoadResult) => {
          child.off('exit', died);
          if ('error' in result) reject(new Error(result.error));
          else resolve(result);
        });
        child.send({ url, token, inFlight, amount } satisfies LoadRequest);
      }),
    pid: child.pid!,
    stop: () => child.disconnect(),
  };
}

/**
 * Pins every thread of a running process to one core, when taskset is there and there are two
 * cores (bench/download does the same): the show's servers on core 0, its client on core 1, so
 * that on a 2-core machine neither preempts the other. Returns whether it did.
 */
function pin(pid: number, core: number | 'any'): boolean {
  if (cpus().length < 2) return false;
  const cores = core === 'any' ? `0-${cpus().length - 1}` : String(core);
  return spawnSync('taskset', ['-a', '-p', '-c', cores, String(pid)], { stdio: 'ignore' }).status === 0;
}

/** The bare servers of a show (lib/bare-server.ts), each in its own process answering with the show's bytes from memory. */
async function bareServer(
  kind: 'node' | 'fastify',
  body: Buffer,
  headers: Record<string, string>,
): Promise<{ port: string; pid: number; stop: () => void }> {
  const child = spawn(
    process.execPath,
    [join(dirname(fileURLToPath(import.meta.url)), 'lib', 'bare-server.js')],
    {
      env: { ...process.env, BARE: kind, BODY: body.toString('base64'), HEADERS: JSON.stringify(headers) },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const port = await new Promise<string>((ok) =>
    child.stdout.once('data', (d: Buffer) => ok(d.toString().trim())),
  );
  return { port, pid: child.pid!, stop: () => child.kill() };
}

async function wholeList(d: TestDaemon): Promise<void> {
  const pid = d.proc.pid!;
  const rssBefore = status(pid, 'VmRSS');
  const stop = rssSampler(pid);
  const whole = await timedGet(`${d.url}/v1/packages`, d.adminToken);
  const peak = stop();
  console.log(
    `the whole unpaged list (${PACKAGES.toLocaleString('en')} packages), from a daemon just started:`,
  );
  report(
    'whole_list_s',
    whole.ms / 1000,
    `s (${(whole.bytes / MB).toFixed(0)} MB, ${(whole.bytes / MB / (whole.ms / 1000)).toFixed(0)} MB/s)`,
  );
  report('whole_list_daemon_rss_before_mb', rssBefore / MB, 'MB');
  report('whole_list_daemon_peak_rss_mb', peak / MB, 'MB', { limit: TARGETS.streamRssMB, below: true });
  report(
    'whole_list_daemon_peak_rss_anon_mb',
    peakAnon / MB,
    `MB (its own memory; mapped catalog and code pages after: ${(status(pid, 'RssFile') / MB).toFixed(0)} MB)`,
  );
}

/** Headers a show sends that a bare server sets itself (per connection, per answer, or from the body). */
const OWN_HEADERS = new Set(['date', 'connection', 'keep-alive', 'content-length', 'transfer-encoding']);

/**
 * The show beside two bare servers sending the same bytes (the body and the headers the daemon
 * sent): node:http, and one fastify route of the show's shape. CPU per answer is each server
 * process's own (utime + stime of every thread, from /proc) over a fixed number of answers from
 * the same client (autocannon in a process of its own, 32 keep-alive connections), never the
 * client's. The three alternate, the order rotated each round so none always runs first after
 * the client's pause, and the ratio is the median of the per-round ratios, so load beside the
 * bench weighs on both sides of each ratio alike.
 */
async function showBesideFloors(d: TestDaemon, bigBagId: string): Promise<void> {
  const admin = d.adminToken;
  const path = `/v1/packages/${bigBagId}`;
  const res = await fetch(`${d.url}${path}`, { headers: { authorization: `Bearer ${admin}` } });
  const body = Buffer.from(await res.arrayBuffer());
  const headers = Object.fromEntries([...res.headers].filter(([name]) => !OWN_HEADERS.has(name)));
  const files = JSON.parse(body.toString()).files.length;
  const node = await bareServer('node', body, headers);
  const framework = await bareServer('fastify', body, headers);
  const servers = {
    ours: { url: `${d.url}${path}`, pid: d.proc.pid! },
    floor: { url: `http://127.0.0.1:${node.port}${path}`, pid: node.pid },
    framework: { url: `http://127.0.0.1:${framework.port}${path}`, pid: framework.pid },
  };
  type Server = keyof typeof servers;
  const ORDER: Server[] = ['ours', 'framework', 'floor'];
  const ROUNDS = 5;
  // Long rounds: each opens 32 new connections at once, and the first few hundred answers of a
  // round are slower for every server, the bare ones too (docs/performance.md).
  const SHOWS = 20_000;
  const rounds: Array<Record<Server, number[]>> = [];
  /** Per round, each server's CPU seconds over its SHOWS answers, and the client's. */
  const cpu: Array<Record<Server, number> & { clientOurs: number; clientFloor: number }> = [];
  const client = loadClient();
  const pinned = [pin(d.proc.pid!, 0), pin(node.pid, 0), pin(framework.pid, 0), pin(client.pid, 1)].every(
    Boolean,
  );
  // The daemon's CPU while nobody asks (timers, the catalog's readers): part of its figure too.
  const idleBefore = cpuSeconds(d.proc.pid!);
  await sleep(3_000);
  const idleMsPerS = ((cpuSeconds(d.proc.pid!) - idleBefore) / 3) * 1e3;
  // A warm-up as long as a round: the show's code is larger than a bare server's, and its first
  // round after 2,000 shows of warm-up was still its slowest.
  for (const server of ORDER) await client.run(servers[server].url, admin, 32, SHOWS);
  for (let r = 0; r < ROUNDS; r++) {
    const latencies = {} as Record<Server, number[]>;
    const used = { clientOurs: 0, clientFloor: 0 } as (typeof cpu)[number];
    for (const server of [...ORDER.slice(r % 3), ...ORDER.slice(0, r % 3)]) {
      const { url, pid } = servers[server];
      const before = cpuSeconds(pid);
      const run = await client.run(url, admin, 32, SHOWS);
      used[server] = cpuSeconds(pid) - before;
      latencies[server] = run.latencies;
      if (server === 'ours') used.clientOurs = run.cpuSeconds;
      if (server === 'framework') used.clientFloor = run.cpuSeconds;
    }
    rounds.push(latencies);
    cpu.push(used);
  }
  node.stop();
  framework.stop();
  client.stop();
  pin(d.proc.pid!, 'any'); // the other measures as before
  const usPerAnswer = (key: keyof (typeof cpu)[number]) => median(cpu.map((c) => (c[key] / SHOWS) * 1e6));
  const cpuRatios = (floor: Server) => cpu.map((c) => c.ours / c[floor]);
  const all = (server: Server) => rounds.flatMap((r) => r[server]);
  const ratio = (p: number) => median(rounds.map((r) => percentile(r.ours, p) / percentile(r.floor, p)));
  console.log(
    `show of a package of ${files} payload files (2,040 in all, ${(body.length / 1e3).toFixed(0)} kB), 32 in flight (autocannon${pinned ? ' on core 1, the servers on core 0' : ''}), ${ROUNDS} rounds of ${SHOWS.toLocaleString('en')} alternating (order rotated) with a bare fastify route and a bare node:http server sending the same body and headers; load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}:`,
  );
  report('show_p50_ms', percentile(all('ours'), 50), 'ms');
  report('show_p99_ms', percentile(all('ours'), 99), 'ms', { limit: TARGETS.showP99Ms, below: true });
  report('floor_p50_ms', percentile(all('floor'), 50), 'ms (bare node:http, same bytes)');
  report('floor_p99_ms', percentile(all('floor'), 99), 'ms');
  report('fastify_floor_p50_ms', percentile(all('framework'), 50), 'ms (one bare fastify route, same bytes)');
  report('fastify_floor_p99_ms', percentile(all('framework'), 99), 'ms');
  report('show_to_floor_p50', ratio(50), '× (median of per-round ratios)');
  report('show_to_floor_p99', ratio(99), '× (median of per-round ratios)');
  report(
    'show_cpu_us',
    usPerAnswer('ours'),
    `µs of daemon CPU per show, median of rounds (fastify route: ${usPerAnswer('framework').toFixed(1)} µs per answer, node:http: ${usPerAnswer('floor').toFixed(1)} µs; the daemon idle: ${idleMsPerS.toFixed(1)} ms per s)`,
  );
  report(
    'show_cpu_to_node',
    median(cpuRatios('floor')),
    `× the bare node:http server's CPU per answer (per round ${cpuRatios('floor')
      .map((x) => x.toFixed(2))
      .join(', ')})`,
  );
  const toFramework = median(cpuRatios('framework'));
  report(
    'show_cpu_to_floor',
    toFramework,
    `× the bare fastify route's CPU per answer, median of per-round ratios (${cpuRatios('framework')
      .map((x) => x.toFixed(2))
      .join(', ')})`,
    { limit: TARGETS.showCpuToFloor, below: true },
  );
  console.log(
    `  the show ${toFramework <= TARGETS.showCpuToFloor ? 'meets' : 'does NOT meet'} ${TARGETS.showCpuToFloor}× a bare fastify server's CPU per answer`,
  );
  report(
    'show_client_cpu_us',
    usPerAnswer('clientOurs'),
    `µs of client (autocannon) CPU per show, not counted above (per bare fastify answer: ${usPerAnswer('clientFloor').toFixed(0)} µs)`,
  );
  console.log(
    `  (one process answering 32 in flight at that CPU per show waits about ${((32 * usPerAnswer('ours')) / 1e3).toFixed(1)} ms per answer: roughly the p50 it can reach; the fastify route ${((32 * usPerAnswer('framework')) / 1e3).toFixed(1)} ms)`,
  );
  console.log(
    `  (per round, show/node/fastify p50 ${rounds.map((r) => `${percentile(r.ours, 50).toFixed(2)}/${percentile(r.floor, 50).toFixed(2)}/${percentile(r.framework, 50).toFixed(2)}`).join(', ')} ms; p99 ${rounds.map((r) => `${percentile(r.ours, 99).toFixed(1)}/${percentile(r.floor, 99).toFixed(1)}/${percentile(r.framework, 99).toFixed(1)}`).join(', ')} ms)`,
  );
}

async function lists(d: TestDaemon): Promise<void> {
  const admin = d.adminToken;
  const solo = tokenOf(d, 'solo');
  const page = async (path: string, token: string, requests = 300) => {
    await load(`${d.url}${path}`, token, 1, Math.ceil(requests / 6));
    const xs = await load(`${d.url}${path}`, token, 1, requests);
    return { p50: percentile(xs, 50), p99: percentile(xs, 99) };
  };
  console.log(
    `pages of 100 among ${PACKAGES.toLocaleString('en')} packages (one at a time, 300 requests each):`,
  );
  const first = await page('/v1/packages?limit=100', admin);
  report('first_page_p50_ms', first.p50, 'ms');
  report('first_page_p99_ms', first.p99, 'ms', { limit: TARGETS.firstPageMs, below: true });
  const middle = await page(`/v1/packages?limit=100&after=${encodeCursor(Math.floor(PACKAGES / 2))}`, admin);
  report('middle_page_p50_ms', middle.p50, 'ms');
  report(
    'content_type_page_p50_ms',
    (await page('/v1/packages?limit=100&content_type=video', admin)).p50,
    'ms',
  );
  report('events_page_p50_ms', (await page('/v1/events?limit=100', admin)).p50, 'ms');
  const soloFirst = await page('/v1/packages?limit=100', solo);
  report('regular_user_first_page_p50_ms', soloFirst.p50, 'ms');
  report('regular_user_first_page_p99_ms', soloFirst.p99, 'ms', { limit: TARGETS.firstPageMs, below: true });
  const soloWhole = await timedGet(`${d.url}/v1/packages`, solo);
  report(
    'regular_user_whole_list_ms',
    soloWhole.ms,
    `ms (${(soloWhole.bytes / MB).toFixed(1)} MB, their ${Math.round(PACKAGES / 1000) + REAL / 10 + 1} packages)`,
  );

  console.log('the web pages, as an admin (one at a time, 60 requests each):');
  const jar = new Jar();
  if ((await logIn(d, jar, admin)).res.status !== 303) throw new Error('could not log in to the pages');
  const session = `cookie:${jar.header}`;
  report(
    'overview_page_p50_ms',
    (await page('/', session, 60)).p50,
    'ms (counts and latest failures from the indexes)',
  );
  report(
    'search_whole_id_p50_ms',
    (await page('/packages?q=synthetic-7', session, 60)).p50,
    'ms (one of the oldest packages, by index)',
  );
  report(
    'search_part_p50_ms',
    (await page('/packages?q=synthetic-99', session, 60)).p50,
    'ms (a part of ids: a page of matches, newest first)',
  );
  report(
    'search_nothing_p50_ms',
    (await page('/packages?q=no-such-id', session, 60)).p50,
    `ms (no match: reads ${SEARCH_BUDGET.toLocaleString('en')} packages, the most one request reads)`,
  );
}

// ---------------------------------------------------------------- open requests

/** A data directory with `open` open requests (catalog records and landing folders, as the API makes them). */
async function withOpenRequests(open: number): Promise<string> {
  const dataDir = mkdtempSync(join(tmpdir(), 'preservd-scale-open-'));
  teardowns.push(() => rmSync(dataDir, { recursive: true, force: true }));
  const catalog = Catalog.open(new DataLayout(dataDir));
  mkdirSync(join(dataDir, 'landing'), { recursive: true, mode: 0o700 });
  for (let from = 0; from < open; from += 5_000) {
    const caps: string[] = [];
    catalog.transaction(() => {
      for (let i = from; i < Math.min(open, from + 5_000); i++) {
        const capability = newCapability();
        catalog.packages.create({
          bagId: randomUUID(),
          externalId: `open-${i}`,
          contentType: 'audio',
          user: 'admin',
          capability,
        });
        caps.push(capability);
      }
    });
    for (const cap of caps) mkdirSync(join(dataDir, 'landing', cap), { mode: 0o700 });
  }
  await catalog.close();
  return dataDir;
}

/** Requests created per second through the API, 16 clients, `n` of them. */
async function createRate(d: TestDaemon, n: number): Promise<number> {
  let next = 0;
  const started = Date.now();
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next++ < n) {
        const res = await fetch(`${d.url}/v1/requests`, {
          method: 'POST',
          headers: { authorization: `Bearer ${d.adminToken}`, 'content-type': 'application/json' },
          body: JSON.stringify({
            bag_id: randomUUID(),
            external_id: `new-${randomUUID()}`,
            content_type: 'video',
          }),
        });
        await res.arrayBuffer();
        if (res.status !== 201) throw new Error(`create: ${res.status}`);
      }
    }),
  );
  return n / ((Date.now() - started) / 1000);
}

/** Two daemons, 1,000 and 100,000 open requests; rounds of 500 creations alternate between them. */
async function openRequests(): Promise<void> {
  const sizes = [1_000, 100_000] as const;
  const daemons: TestDaemon[] = [];
  for (const open of sizes)
    daemons.push(
      await TestDaemon.start(t, {
        dataDir: await withOpenRequests(open),
        keepDataDir: true,
        config: { logLevel: 'error' },
      }),
    );
  for (const d of daemons) await createRate(d, 500); // warm-up: the first writes map the catalog's pages
  const rates: number[][] = [[], []];
  for (let round = 0; round < 4; round++)
    for (const i of [0, 1]) rates[i]!.push(await createRate(daemons[i]!, 500));
  console.log(
    'requests created through the API, 16 clients, 4 alternating rounds of 500 after 500 of warm-up:',
  );
  for (const i of [0, 1]) {
    const pid = daemons[i]!.proc.pid!;
    report(
      `requests_per_s_at_${sizes[i]}`,
      median(rates[i]!),
      `requests/s with ${sizes[i]!.toLocaleString('en')} open (rounds: ${rates[i]!.map((r) => r.toFixed(0)).join(', ')})`,
    );
    report(
      `daemon_rss_anon_mb_at_${sizes[i]}`,
      status(pid, 'RssAnon') / MB,
      `MB (its own memory; VmRSS ${(status(pid, 'VmRSS') / MB).toFixed(0)} MB with mapped catalog and code pages)`,
    );
  }
  report(
    'requests_rate_100k_to_1k',
    median(rates[1]!.map((r, i) => r / rates[0]![i]!)),
    '× (median of per-round ratios; target about 1)',
  );
  for (const d of daemons) await d.stop();
}

// ---------------------------------------------------------------- the 200,000-file bag

function writeBag(dir: string, files: number, bagId: string, externalId: string): number {
  const manifest = openSync(join(dir, 'manifest-sha256.txt.tmp'), 'w');
  let bytes = 0;
  for (let i = 0; i < files; i++) {
    const rel = `data/d${String(Math.floor(i / 1000)).padStart(3, '0')}/f${String(i).padStart(6, '0')}.txt`;
    if (i % 1000 === 0) mkdirSync(join(dir, rel, '..'), { recursive: true });
    const content = `file ${i} of a large bag ${randomBytes(8).toString('hex')}\n`;
    writeFileSync(join(dir, rel), content);
    bytes += Buffer.byteLength(content);
    writeSync(manifest, `${createHash('sha256').update(content).digest('hex')}  ${rel}\n`);
  }
  closeSync(manifest);
  spawnSync('mv', [join(dir, 'manifest-sha256.txt.tmp'), join(dir, 'manifest-sha256.txt')]);
  const tags: Record<string, string> = {
    'bagit.txt': 'BagIt-Version: 1.0\nTag-File-Character-Encoding: UTF-8\n',
    'bag-info.txt': `Payload-Oxum: ${bytes}.${files}\nBagging-Date: 2026-11-25\n`,
    'chipmunk-info.txt': `External-Identifier: ${externalId}\nChipmunk-Content-Type: digital\nBag-ID: ${bagId}\n`,
  };
  for (const [name, text] of Object.entries(tags)) writeFileSync(join(dir, name), text);
  const tagManifest = ['bagit.txt', 'bag-info.txt', 'chipmunk-info.txt', 'manifest-sha256.txt']
    .map(
      (name) =>
        `${createHash('sha256')
          .update(readFileSync(join(dir, name)))
          .digest('hex')}  ${name}\n`,
    )
    .join('');
  writeFileSync(join(dir, 'tagmanifest-sha256.txt'), tagManifest);
  return bytes;
}

async function hugeBag(): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), 'preservd-scale-bag-'));
  teardowns.push(() => rmSync(root, { recursive: true, force: true }));
  const bagDir = join(root, 'bag');
  mkdirSync(bagDir);
  const bagId = randomUUID();
  const externalId = `huge-${bagId.slice(0, 8)}`;
  const bytes = writeBag(bagDir, BAG_FILES, bagId, externalId);
  console.log(`a bag of ${BAG_FILES.toLocaleString('en')} files (${(bytes / MB).toFixed(1)} MB of payload):`);
  spawnSync('cat', ['manifest-sha256.txt'], { cwd: bagDir, stdio: 'ignore' });

  const validateStarted = Date.now();
  const validate = spawn(process.execPath, [join(process.cwd(), 'dist/src/cli.js'), 'validate', bagDir], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let validateOutput = '';
  validate.stdout.on('data', (chunk: Buffer) => (validateOutput += chunk.toString()));
  validate.stderr.on('data', (chunk: Buffer) => (validateOutput += chunk.toString()));
  const validatePeaks = phaseSampler(validate.pid!, 'validate');
  const validateCode = await new Promise<number | null>((resolve) => validate.on('exit', resolve));
  const [validatePeak] = validatePeaks.stop();
  if (validateCode !== 0) throw new Error(`validate: ${validateOutput}`);
  const validateS = (Date.now() - validateStarted) / 1000;
  report('bag_validate_s', validateS, 's (preservd validate, whole process)');
  report(
    'bag_validate_peak_rss_mb',
    validatePeak!.rss / MB,
    `MB (its peak VmRSS; RssAnon ${(validatePeak!.anon / MB).toFixed(0)} MB)`,
    { limit: TARGETS.bagRssMB, below: true },
  );

  const d = await TestDaemon.start(t, { config: { logLevel: 'error', upload: { quietMs: 2000 } } });
  const token = d.adminToken;
  const pid = d.proc.pid!;
  const request = await d.createRequest(token, {
    bag_id: bagId,
    external_id: externalId,
    content_type: 'digital',
  });
  const peaks = phaseSampler(pid, 'upload');
  const rsync = spawnSync('rsync', ['-rt', '--chmod=ug=rwX,o=', `${bagDir}/`, request.upload_link], {
    encoding: 'utf8',
    maxBuffer: 1 << 26,
  });
  if (rsync.status !== 0) throw new Error(`rsync: ${rsync.stderr}`);
  peaks.next('ingest');
  const started = Date.now();
  const complete = await d.request('POST', `/v1/requests/${bagId}/complete`, { token });
  const item = await d.waitForQueueItem(complete.json.id, token, 3_600_000);
  if (item.status !== 'DONE') throw new Error(`ingest: ${JSON.stringify(item).slice(0, 500)}`);
  const ingestS = (Date.now() - started) / 1000;
  report('bag_ingest_s', ingestS, 's (rsync exit → complete → DONE)');
  report('bag_ingest_to_validate', ingestS / validateS, '×');

  peaks.next('zip');
  const zipStarted = Date.now();
  const zip = await timedGet(`${d.url}/v1/packages/${bagId}/download`, token);
  if (zip.status !== 200) throw new Error(`zip: ${zip.status}`);
  report('bag_zip_s', (Date.now() - zipStarted) / 1000, `s (${(zip.bytes / MB).toFixed(0)} MB)`);

  peaks.next('audit');
  const auditStarted = Date.now();
  const audit = await d.request('POST', '/v1/audits', { token });
  for (;;) {
    const a = await d.request('GET', audit.headers.get('location')!, { token });
    if (a.json.finished_at !== null) {
      if (a.json.failures.length > 0) throw new Error('the audit failed');
      break;
    }
    await sleep(500);
  }
  report('bag_audit_s', (Date.now() - auditStarted) / 1000, 's');
  const phases = peaks.stop();
  for (const { phase, rss, anon, anonAtStart } of phases) {
    report(
      `bag_daemon_peak_rss_${phase}_mb`,
      rss / MB,
      `MB (VmRSS during the ${phase}; RssAnon ${(anon / MB).toFixed(0)} MB at its peak, ${(anonAtStart / MB).toFixed(0)} MB as it began)`,
    );
  }
  const peak = Math.max(...phases.map((p) => p.rss), status(pid, 'VmHWM'));
  report('bag_daemon_peak_rss_mb', peak / MB, 'MB (VmHWM: upload, ingest, zip and audit)', {
    limit: TARGETS.bagRssMB,
    below: true,
  });
  report(
    'bag_daemon_peak_rss_anon_mb',
    Math.max(...phases.map((p) => p.anon)) / MB,
    'MB (its own memory, RssAnon: upload, ingest, zip and audit)',
  );
  await d.stop();
}

// ---------------------------------------------------------------- main

async function main(): Promise<void> {
  console.log(
    `bench/scale: ${PACKAGES.toLocaleString('en')} packages, a bag of ${BAG_FILES.toLocaleString('en')} files; load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}`,
  );
  if (parts.includes('catalog') || parts.includes('show')) {
    const dataDir = CATALOG_DIR ?? mkdtempSync(join(tmpdir(), 'preservd-scale-'));
    if (CATALOG_DIR === undefined) teardowns.push(() => rmSync(dataDir, { recursive: true, force: true }));
    let bigBagId: string;
    if (existsSync(join(dataDir, 'catalog', 'data.mdb'))) {
      ({ bigBagId } = await keptCatalog(dataDir));
      console.log(`the catalog kept in ${dataDir}:`);
    } else {
      const built = await buildCatalog(dataDir);
      bigBagId = built.bigBagId;
      console.log(`catalog built in ${built.seconds.toFixed(0)} s:`);
    }
    const catalogBytes = statSync(join(dataDir, 'catalog', 'data.mdb')).size;
    report(
      'catalog_bytes_per_package',
      catalogBytes / PACKAGES,
      `bytes (${(catalogBytes / 1e9).toFixed(2)} GB in all; 20 file records each)`,
    );

    const startups: number[] = [];
    let daemon: TestDaemon | undefined;
    for (let i = 0; i < (parts.includes('catalog') ? 3 : 1); i++) {
      await daemon?.stop();
      const started = Date.now();
      daemon = await TestDaemon.start(t, { dataDir, keepDataDir: true, config: { logLevel: 'error' } });
      startups.push((Date.now() - started) / 1000);
    }
    report('startup_s', median(startups), `s (median of 3)`, { limit: TARGETS.startupS, below: true });
    console.log(`  (start-ups: ${startups.map((s) => s.toFixed(2)).join(', ')} s)`);
    if (parts.includes('catalog')) await wholeList(daemon!);
    await showBesideFloors(daemon!, bigBagId);
    if (parts.includes('catalog')) await lists(daemon!);
    await daemon!.stop();
  }
  if (parts.includes('open')) await openRequests();
  if (parts.includes('bag')) await hugeBag();
  if (args.includes('--json')) console.log(JSON.stringify(results));
}

try {
  await main();
} finally {
  for (const fn of teardowns.reverse()) await fn();
}
