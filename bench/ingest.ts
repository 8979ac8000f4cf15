/**
 * Ingest against its yardsticks, in one run (`node dist/bench/ingest.js [--scale 1/16]
 * [--rounds 3] [--json]`; the scale may also come from PRESERVD_BENCH_SCALE):
 *
 * - a bag of ~1 GiB at scale 1 (research/perf.md §4's shape: 2000 small text files of 1–8 KiB
 *   and 40 random files of 25 MiB in one folder that sorts first, md5 and sha256 manifests) is
 *   written under the OS temporary folder; a scale s makes s × 2000 small files and big files
 *   of s × 25 MiB, so the mix of per-file and per-byte work stays the same;
 * - the coreutils yardstick: `md5sum -c` then `sha256sum -c` on the bag's own manifests, from
 *   inside the bag, whole-process times summed (two reads, one core: what a shell script does);
 * - `node dist/cli.js validate DIR`, whole process (target ≤ 0.5 × coreutils); for reference,
 *   the same on a bag of one tiny file: the command's fixed start-up cost, which dominates at
 *   small scales;
 * - ingest through a real daemon (`dist/src/cli.js serve` on free loopback ports, a temporary
 *   data directory, the default `upload.quietMs`; run as `nobody` when the bench runs as root,
 *   as a deployment runs it as its own user: as root our rsync keeps owners in an xattr (fake
 *   super) and rewrites it on every unchanged file at each run, which changes their ctimes, so a
 *   second rsync run would have every file read again): each round declares a request and rsyncs
 *   the bag into its upload link as a depositor does (the upload is not timed), then, the moment
 *   the client's rsync exits, starts the clock, POSTs …/complete and waits for the queue item's
 *   DONE, taken as the moment the daemon recorded it (target ≤ 0.25 × validate: the files were hashed as they landed, and only what is not
 *   hashed yet or changed since is read at complete). The daemon's peak RSS is taken for each such
 *   upload and its ingest alone (VmHWM, reset through /proc/PID/clear_refs before the request is
 *   declared): target < 200 MB for every one; its VmHWM over the whole bench, the step below
 *   that runs an upload, an ingest and a zip at once included, is printed beside it without a
 *   target. The upload runs at a depositor's network
 *   rate (`--network-mbit`, default 1000: rsync's --bwlimit). Unthrottled over loopback, rsync
 *   itself (three processes) outruns what two cores can hash beside it, so files are still
 *   unhashed at its exit: that ingest is measured too and printed without a target;
 * - a re-upload: the same, with a second rsync run after one payload file (and the manifests)
 *   changed; the daemon's counters say how many files were hashed on arrival and how many read
 *   again at complete (target: the changed payload file and the tag files rewritten with it).
 *
 * Everything runs with the page cache warm (a warm-up round first; the bag and its upload were
 * just written). Rounds alternate coreutils, validate, ingest; ratios are taken per round and the
 * median reported (the machine is shared and noisy). Everything temporary is deleted at the end.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash, randomFillSync, randomUUID } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  closeSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Algorithm } from '../src/fixity/index.js';
import { repoRoot, TestDaemon } from '../test/helpers/daemon.js';
import { median, range } from './stats.js';

const MB = 1e6;
/** Debian's `nobody` and `nogroup`. */
const NOBODY = 65534;
const MiB = 1024 * 1024;
const FULL = { smallFiles: 2000, bigFiles: 40, bigBytes: 25 * MiB };
/** underUpload: "no ingest or download slower", within the run-to-run noise of a shared machine. */
const TARGETS = { validateToCoreutils: 0.25, ingestToValidate: 0.25, peakRssMB: 200, underUpload: 1.1 };
/** The daemon's default: uploads through our rsync must not wait for it. */
const QUIET_MS = 2_000;
const ALGORITHMS: Algorithm[] = ['md5', 'sha256'];

interface Options {
  scale: number;
  rounds: number;
  /** The depositor's upload rate, Mbit/s (0: unthrottled). */
  networkMbit: number;
  json: boolean;
}

/** `0.0625`, `1/16` or `6.25%`. */
function parseScale(text: string): number {
  const fraction = /^\s*(\d+(?:\.\d+)?)\s*\/\s*(\d+(?:\.\d+)?)\s*$/.exec(text);
  if (fraction) return Number(fraction[1]) / Number(fraction[2]);
  if (text.trim().endsWith('%')) return Number(text.trim().slice(0, -1)) / 100;
  return Number(text);
}

function parseArgs(argv: string[], env: NodeJS.ProcessEnv): Options {
  const o: Options = {
    scale: parseScale(env.PRESERVD_BENCH_SCALE ?? '1'),
    rounds: 3,
    networkMbit: 1000,
    json: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--json') o.json = true;
    else if (arg === '--scale') o.scale = parseScale(argv[++i] ?? '');
    else if (arg === '--rounds') o.rounds = Number(argv[++i]);
    else if (arg === '--network-mbit') o.networkMbit = Number(argv[++i]);
    else
      throw new Error(
        `unknown argument ${arg}; usage: ingest.js [--scale 1/16] [--rounds 3] [--network-mbit 1000] [--json]`,
      );
  }
  if (!(o.scale > 0 && o.scale <= 16))
    throw new Error('--scale (or PRESERVD_BENCH_SCALE) must be in (0, 16], e.g. 1/16');
  if (!(Number.isInteger(o.rounds) && o.rounds >= 1)) throw new Error('--rounds must be an integer ≥ 1');
  if (!(o.networkMbit >= 0)) throw new Error('--network-mbit must be ≥ 0 (0: unthrottled)');
  return o;
}

interface BenchBag {
  dir: string;
  files: number;
  payloadBytes: number;
  /** Every file of the bag, tag files included. */
  bytes: number;
  /** Path → digests of the tag files written once (bagit.txt, bag-info.txt, manifests). */
  tagDigests: Map<string, Record<Algorithm, string>>;
  /** Path → digests of the payload files. */
  manifest: Map<string, Record<Algorithm, string>>;
}

function digestsOf(bytes: Uint8Array): Record<Algorithm, string> {
  return Object.fromEntries(ALGORITHMS.map((a) => [a, createHash(a).update(bytes).digest('hex')])) as Record<
    Algorithm,
    string
  >;
}

/** Writes the bag: payload, bagit.txt, bag-info.txt, payload manifests (tag files per round). */
function buildBag(dir: string, scale: number): BenchBag {
  const smallFiles = Math.max(1, Math.round(FULL.smallFiles * scale));
  const bigBytes = Math.max(64 * 1024, Math.round(FULL.bigBytes * scale));
  // Content: slices of one random pool at varying offsets (hashing speed does not care).
  const pool = randomFillSync(Buffer.allocUnsafe(Math.min(64 * MiB, 2 * bigBytes + MiB)));
  const manifest = new Map<string, Record<Algorithm, string>>();
  let payloadBytes = 0;
  const put = (path: string, bytes: Uint8Array): void => {
    const abs = join(dir, path);
    mkdirSync(join(abs, '..'), { recursive: true });
    writeFileSync(abs, bytes);
    manifest.set(path, digestsOf(bytes));
    payloadBytes += bytes.length;
  };
  for (let i = 0; i < FULL.bigFiles; i++) {
    const offset = (i * 7919 * 4096) % (pool.length - bigBytes);
    put(`data/masters/reel-${String(i).padStart(2, '0')}.wav`, pool.subarray(offset, offset + bigBytes));
  }
  for (let i = 0; i < smallFiles; i++) {
    const size = 1024 + ((i * 2654435761) % (7 * 1024)); // 1–8 KiB
    const offset = (i * 4099) % (pool.length - size);
    put(
      `data/pages/page-${String(i).padStart(5, '0')}.txt`,
      Buffer.from(
        pool
          .subarray(offset, offset + size)
          .toString('base64')
          .slice(0, size),
      ),
    );
  }
  const tagDigests = new Map<string, Record<Algorithm, string>>();
  const tag = (path: string, text: string): number => {
    const bytes = Buffer.from(text);
    writeFileSync(join(dir, path), bytes);
    tagDigests.set(path, digestsOf(bytes));
    return bytes.length;
  };
  const paths = [...manifest.keys()];
  let tagBytes = tag('bagit.txt', 'BagIt-Version: 1.0\nTag-File-Character-Encoding: UTF-8\n');
  tagBytes += tag(
    'bag-info.txt',
    `Bagging-Date: 2026-11-22\nPayload-Oxum: ${payloadBytes}.${paths.length}\n`,
  );
  for (const a of ALGORITHMS)
    tagBytes += tag(`manifest-${a}.txt`, paths.map((p) => `${manifest.get(p)![a]}  ${p}\n`).join(''));
  // chipmunk-info.txt and the tag manifests are written per round (they name the bag_id); their
  // size barely changes, so count them once here.
  const perRound = [...tagFilesFor(randomUUID(), 'x', tagDigests).values()];
  tagBytes += perRound.reduce((n, text) => n + Buffer.byteLength(text), 0);
  return {
    dir,
    files: paths.length + tagDigests.size + perRound.length,
    payloadBytes,
    bytes: payloadBytes + tagBytes,
    tagDigests,
    manifest,
  };
}

/** Gives one payload file new bytes of the same size and writes the payload manifests to match. */
function changeOneFile(bag: BenchBag, round: number): void {
  const path = 'data/pages/page-00000.txt';
  const old = readFileSync(join(bag.dir, path));
  const bytes = Buffer.from(
    old.toString('latin1').replace(/^./, String.fromCharCode(65 + (round % 26))),
    'latin1',
  );
  writeFileSync(join(bag.dir, path), bytes);
  bag.manifest.set(path, digestsOf(bytes));
  const paths = [...bag.manifest.keys()];
  for (const a of ALGORITHMS) {
    const text = paths.map((p) => `${bag.manifest.get(p)![a]}  ${p}\n`).join('');
    writeFileSync(join(bag.dir, `manifest-${a}.txt`), text);
    bag.tagDigests.set(`manifest-${a}.txt`, digestsOf(Buffer.from(text)));
  }
}

/** chipmunk-info.txt naming this request, and tag manifests over every tag file. */
function tagFilesFor(
  bagId: string,
  externalId: string,
  fixed: Map<string, Record<Algorithm, string>>,
): Map<string, string> {
  const chipmunk = `External-Identifier: ${externalId}\nChipmunk-Content-Type: digital\nBag-ID: ${bagId}\n`;
  const digests = new Map(fixed);
  digests.set('chipmunk-info.txt', digestsOf(Buffer.from(chipmunk)));
  const out = new Map<string, string>([['chipmunk-info.txt', chipmunk]]);
  for (const a of ALGORITHMS)
    out.set(`tagmanifest-${a}.txt`, [...digests].map(([p, d]) => `${d[a]}  ${p}\n`).join(''));
  return out;
}

function writeTagFiles(bag: BenchBag, bagId: string, externalId: string): void {
  for (const [path, text] of tagFilesFor(bagId, externalId, bag.tagDigests))
    writeFileSync(join(bag.dir, path), text);
}

/** Reads every file of `dir` once so the page cache is warm. */
function warm(dir: string): void {
  const buffer = Buffer.allocUnsafe(MiB);
  const visit = (d: string): void => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, entry.name);
      if (entry.isDirectory()) visit(p);
      else {
        const fd = openSync(p, 'r');
        while (readSync(fd, buffer, 0, buffer.length, null) > 0);
        closeSync(fd);
      }
    }
  };
  visit(dir);
}

/** The whole-process time of a command, seconds; throws unless it exits 0. */
function timed(command: string, args: string[], cwd?: string): number {
  const start = process.hrtime.bigint();
  const r = spawnSync(command, args, { cwd, stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' });
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  if (r.status !== 0)
    throw new Error(
      `${command} ${args.join(' ')} failed (${r.error?.message ?? `exit ${r.status}`}): ${r.stderr}`,
    );
  return seconds;
}

function coreutils(bag: BenchBag): number {
  return (
    timed('md5sum', ['--quiet', '-c', 'manifest-md5.txt'], bag.dir) +
    timed('sha256sum', ['--quiet', '-c', 'manifest-sha256.txt'], bag.dir)
  );
}

function validate(dir: string): number {
  return timed(process.execPath, [join(repoRoot, 'dist/cli.js'), 'validate', dir]);
}

/** A valid bag of one 3-byte file. */
function buildTinyBag(dir: string): string {
  mkdirSync(join(dir, 'data'), { recursive: true });
  writeFileSync(join(dir, 'data/a.txt'), 'hi\n');
  writeFileSync(join(dir, 'bagit.txt'), 'BagIt-Version: 1.0\nTag-File-Character-Encoding: UTF-8\n');
  writeFileSync(
    join(dir, 'manifest-md5.txt'),
    `${createHash('md5').update('hi\n').digest('hex')}  data/a.txt\n`,
  );
  return dir;
}

/**
 * Sets the process's peak RSS (VmHWM) back to its RSS now (Linux ≥ 4.0: `5` to clear_refs), so a
 * later VmHWM is the peak of what came after. Needs the process's user or root, as the bench is.
 */
function resetPeakRss(pid: number): void {
  writeFileSync(`/proc/${pid}/clear_refs`, '5');
}

/** kB → MB of one field of /proc/PID/status, or NaN when it cannot be read. */
function procStatusMB(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(
      readFileSync(`/proc/${pid}/status`, 'utf8'),
    );
    return match ? (Number(match[1]) * 1024) / MB : NaN;
  } catch {
    return NaN;
  }
}

/** The daemon's counters of files hashed as they landed and at complete (metrics.ts, watchLanded). */
interface LandedCounts {
  onArrival: number;
  known: number;
  rehashed: number;
  unreported: number;
}

async function landedCounts(daemon: TestDaemon): Promise<LandedCounts> {
  const text = (await daemon.request('GET', '/metrics', { token: null })).text;
  const read = (name: string): number => Number(new RegExp(`^${name} (\\d+)`, 'm').exec(text)?.[1] ?? NaN);
  return {
    onArrival: read('preservd_upload_files_hashed_on_arrival_total'),
    known: read('preservd_ingest_files_known_total'),
    rehashed: read('preservd_ingest_files_rehashed_total'),
    unreported: read('preservd_ingest_files_unreported_total'),
  };
}

/** rsync's --bwlimit (KiB/s) for `mbit` Mbit/s; none for 0. */
function bwlimit(mbit: number): string[] {
  return mbit > 0 ? [`--bwlimit=${Math.round((mbit * 1e6) / 8 / 1024)}`] : [];
}

function rsyncInto(bag: BenchBag, link: string, mbit: number): void {
  const upload = spawnSync(
    'rsync',
    ['-rt', '--no-group', '--no-perms', '--chmod=ugo=rwX', ...bwlimit(mbit), `${bag.dir}/`, link],
    { stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' },
  );
  if (upload.status !== 0) throw new Error(`rsync failed: ${upload.stderr}`);
}

/**
 * One ingest: declare, upload (untimed; with `reupload`, a second rsync run after one file was
 * changed), then from the rsync's exit POST complete → DONE; seconds, the daemon's peak RSS from
 * the request's declaration to DONE, and how many files were hashed on arrival and at complete.
 */
async function ingestOnce(
  daemon: TestDaemon,
  token: string,
  bag: BenchBag,
  mbit: number,
  reupload?: { round: number },
): Promise<{ bagId: string; seconds: number; peakRssMB: number; files: LandedCounts }> {
  const pid = daemon.proc.pid!;
  resetPeakRss(pid);
  const { bagId, externalId, link } = await declare(daemon, token, bag);
  const before = await landedCounts(daemon);
  rsyncInto(bag, link, mbit);
  if (reupload !== undefined) {
    // The depositor fixes one file after the whole bag went up, and runs rsync again.
    changeOneFile(bag, reupload.round);
    writeTagFiles(bag, bagId, externalId);
    // A later mtime, as an edit made after the upload has: rsync's quick check compares whole seconds.
    const later = new Date(Date.now() + 2_000);
    for (const path of [
      'data/pages/page-00000.txt',
      ...bag.tagDigests.keys(),
      ...tagFilesFor(bagId, externalId, bag.tagDigests).keys(),
    ])
      utimesSync(join(bag.dir, path), later, later);
    rsyncInto(bag, link, mbit);
  }
  const seconds = await completeToDone(daemon, token, bagId);
  const peakRssMB = procStatusMB(pid, 'VmHWM');
  const after = await landedCounts(daemon);
  const files = {
    onArrival: after.onArrival - before.onArrival,
    known: after.known - before.known,
    rehashed: after.rehashed - before.rehashed,
    unreported: after.unreported - before.unreported,
  };
  return { bagId, seconds, peakRssMB, files };
}

/**
 * What hashing uploads as they land costs other work: while a depositor's upload runs into one
 * request at the network rate, an ingest (complete → DONE of a bag put into its landing folder
 * without our rsync, as an ssh-style link does, so it is read whole at complete either way) and
 * a zip download of a stored package run at once. Seconds of each, to compare with the same on a
 * daemon that hashes uploads at complete only (`upload.rsync.hashOnArrival: false`), and the
 * daemon's peak RSS meanwhile.
 */
async function underUpload(
  daemon: TestDaemon,
  token: string,
  bag: BenchBag,
  stored: string,
  mbit: number,
): Promise<{ ingest: number; download: number; peakRssMB: number }> {
  resetPeakRss(daemon.proc.pid!);
  const placed = await declare(daemon, token, bag);
  const landing = join(daemon.dataDir, 'landing', placed.link.replace(/\/$/, '').split('/').pop()!);
  run('cp', ['-r', `${bag.dir}/.`, landing]);
  if (process.getuid?.() === 0) run('chown', ['-R', `${NOBODY}:${NOBODY}`, landing]);
  const background = await declare(daemon, token, bag);
  const upload = new Promise<void>((resolve, reject) => {
    const args = ['-rt', '--no-group', '--no-perms', '--chmod=ugo=rwX', ...bwlimit(mbit), `${bag.dir}/`];
    spawn('rsync', [...args, background.link], { stdio: 'ignore' }).once('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`the background rsync exited with ${code}`)),
    );
  });
  await sleep(1_000); // the upload is landing, and on the one daemon being hashed
  const [ingest, download] = await Promise.all([
    completeToDone(daemon, token, placed.bagId),
    zipSeconds(daemon, token, stored),
  ]);
  await upload;
  await hashingSettled(daemon); // what follows must not share the machine with this upload's hashing
  return { ingest, download, peakRssMB: procStatusMB(daemon.proc.pid!, 'VmHWM') };
}

/** Until the daemon's count of files hashed on arrival has not moved for 1.5 s. */
async function hashingSettled(daemon: TestDaemon): Promise<void> {
  let last = -1;
  for (let still = 0; still < 3;) {
    const now = (await landedCounts(daemon)).onArrival;
    if (Number.isNaN(now)) return; // a daemon that does not hash as files land
    still = now === last ? still + 1 : 0;
    last = now;
    await sleep(500);
  }
}

/** Seconds of a stored package's zip download, every byte read and dropped. */
async function zipSeconds(daemon: TestDaemon, token: string, bagId: string): Promise<number> {
  const start = process.hrtime.bigint();
  const res = await fetch(`http://127.0.0.1:${daemon.httpPort}/v1/packages/${bagId}/download`, {
    headers: { authorization: `Bearer ${token}` },
  });
  if (res.status !== 200 || res.body === null) throw new Error(`zip download: ${res.status}`);
  for await (const chunk of res.body) void chunk;
  return Number(process.hrtime.bigint() - start) / 1e9;
}

function run(command: string, args: string[]): void {
  const r = spawnSync(command, args, { stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${command} ${args.join(' ')}: ${r.stderr}`);
}

/** A new request for the bag, its tag files written for it. */
async function declare(
  daemon: TestDaemon,
  token: string,
  bag: BenchBag,
): Promise<{ bagId: string; externalId: string; link: string }> {
  const bagId = randomUUID();
  const externalId = `bench-${bagId.slice(0, 8)}`;
  writeTagFiles(bag, bagId, externalId);
  const req = await daemon.createRequest(token, {
    bag_id: bagId,
    external_id: externalId,
    content_type: 'digital',
  });
  return { bagId, externalId, link: req.upload_link as string };
}

/**
 * From now (the client's rsync has just exited): POST complete, wait for DONE; seconds to the
 * moment the daemon recorded it (the item's `updated_at`, with milliseconds, in
 * /v1/queue/status). The bench looks every 50 ms and reads that moment afterwards: each look
 * costs the daemon's thread ~0.5 ms, and looking every 10 ms was ~5 % of what it measured.
 */
async function completeToDone(daemon: TestDaemon, token: string, bagId: string): Promise<number> {
  const start = Date.now();
  const complete = await daemon.request('POST', `/v1/requests/${bagId}/complete`, { token });
  if (complete.status !== 201) throw new Error(`complete: ${complete.status} ${complete.text}`);
  const id = complete.json.id as number;
  for (;;) {
    await sleep(50);
    const item = await daemon.request('GET', `/v1/queue/${id}`, { token });
    if (item.json?.status === 'DONE') break;
    if (item.json?.status !== 'PENDING')
      throw new Error(
        `the ingest ended ${item.json?.status}: ${JSON.stringify(item.json?.errors ?? item.text)}`,
      );
  }
  const after = new Date(start - 1_000).toISOString();
  const status = await daemon.request('GET', `/v1/queue/status?after=${after}`, { token });
  const done = (status.json.done as Array<{ id: number; updated_at: string }>).find((i) => i.id === id);
  if (done === undefined) throw new Error(`queue item ${id} is DONE but not in /v1/queue/status`);
  return (Date.parse(done.updated_at) - start) / 1000;
}

async function main(): Promise<void> {
  const o = parseArgs(process.argv.slice(2), process.env);
  const began = Date.now();
  const scratch = mkdtempSync(join(tmpdir(), 'preservd-bench-ingest-'));
  const teardowns: Array<() => unknown> = [];
  let daemon: TestDaemon | undefined;
  try {
    const bag = buildBag(join(scratch, 'bag'), o.scale);
    const tinyBag = buildTinyBag(join(scratch, 'tiny-bag'));
    const setupSeconds = (Date.now() - began) / 1000;
    // As root, the daemons run as nobody (see above), who must reach their data directories.
    const user = process.getuid?.() === 0 ? { uid: NOBODY, gid: NOBODY } : {};
    if (user.uid !== undefined) chmodSync(scratch, 0o711);
    const start = (hashOnArrival: boolean): Promise<TestDaemon> => {
      const dataDir = mkdtempSync(join(scratch, 'data-'));
      if (user.uid !== undefined) chownSync(dataDir, user.uid, user.gid);
      const upload = { quietMs: QUIET_MS, rsync: { hashOnArrival } };
      return TestDaemon.start(
        { teardown: (fn) => teardowns.push(fn) },
        { dataDir, config: { upload, logLevel: 'warn' }, ...user },
      );
    };
    daemon = await start(true);
    const token = daemon.addUser('bench');
    // The same without hashing as files land: the yardstick for what that costs other work.
    const plain = await start(false);
    const plainToken = plain.addUser('bench');
    const plainStored = (await ingestOnce(plain, plainToken, bag, 0)).bagId;

    // Warm-up: page cache, JIT, worker threads, catalog pages.
    warm(bag.dir);
    coreutils(bag);
    validate(bag.dir);
    await ingestOnce(daemon, token, bag, o.networkMbit);

    const sums: number[] = [];
    const validates: number[] = [];
    const startups: number[] = [];
    const ingests: number[] = [];
    /** The daemon's peak RSS during each single upload and its ingest (all three kinds). */
    const uploadPeaks: number[] = [];
    const onceFiles: LandedCounts[] = [];
    const reuploads: number[] = [];
    const reuploadFiles: LandedCounts[] = [];
    const unthrottled: number[] = [];
    const unthrottledFiles: LandedCounts[] = [];
    const busy: Record<'on' | 'off', Array<{ ingest: number; download: number; peakRssMB: number }>> = {
      on: [],
      off: [],
    };
    for (let round = 0; round < o.rounds; round++) {
      sums.push(coreutils(bag));
      validates.push(validate(bag.dir));
      startups.push(validate(tinyBag));
      const ingest = await ingestOnce(daemon, token, bag, o.networkMbit);
      ingests.push(ingest.seconds);
      uploadPeaks.push(ingest.peakRssMB);
      onceFiles.push(ingest.files);
      for (const on of round % 2 === 0 ? [true, false] : [false, true]) {
        if (on) busy.on.push(await underUpload(daemon, token, bag, ingest.bagId, o.networkMbit));
        else busy.off.push(await underUpload(plain, plainToken, bag, plainStored, o.networkMbit));
      }
      const fast = await ingestOnce(daemon, token, bag, 0);
      unthrottled.push(fast.seconds);
      uploadPeaks.push(fast.peakRssMB);
      unthrottledFiles.push(fast.files);
      const again = await ingestOnce(daemon, token, bag, o.networkMbit, { round });
      reuploads.push(again.seconds);
      uploadPeaks.push(again.peakRssMB);
      reuploadFiles.push(again.files);
    }
    const uploadPeakRssMB = Math.max(...uploadPeaks);
    // The whole bench's: the largest of the per-upload peaks and the concurrent steps'.
    const wholeBenchPeakMB = Math.max(uploadPeakRssMB, ...busy.on.map((b) => b.peakRssMB));
    await daemon.stop();
    await plain.stop();
    const busyRatios = {
      ingest: busy.on.map((b, i) => b.ingest / busy.off[i]!.ingest),
      download: busy.on.map((b, i) => b.download / busy.off[i]!.download),
    };

    const validateRatios = validates.map((v, i) => v / sums[i]!);
    const ingestRatios = ingests.map((s, i) => s / validates[i]!);
    const reuploadRatios = reuploads.map((s, i) => s / validates[i]!);
    const unthrottledRatios = unthrottled.map((s, i) => s / validates[i]!);
    const network = o.networkMbit > 0 ? `at ${o.networkMbit} Mbit/s (rsync --bwlimit)` : 'unthrottled';
    const counts = (c: LandedCounts) =>
      `${c.onArrival} hashed on arrival, at complete ${c.known} known, ${c.rehashed} re-hashed, ${c.unreported} unreported`;
    const mbps = (xs: number[]) => xs.map((s) => bag.bytes / MB / s);
    const result = {
      machine: { cores: availableParallelism(), loadavg: loadavg().map((l) => Number(l.toFixed(2))) },
      bag: {
        scale: o.scale,
        files: bag.files,
        bytes: bag.bytes,
        payloadBytes: bag.payloadBytes,
        setupSeconds: Number(setupSeconds.toFixed(1)),
      },
      coreutils: { seconds: sums, mbps: mbps(sums) },
      validate: {
        seconds: validates,
        mbps: mbps(validates),
        ratioToCoreutils: median(validateRatios),
        tinyBagSeconds: startups,
      },
      ingest: {
        seconds: ingests,
        mbps: mbps(ingests),
        ratioToValidate: median(ingestRatios),
        peakRssMBPerUpload: uploadPeaks,
        peakRssMB: uploadPeakRssMB,
        peakRssMBWithConcurrentWork: wholeBenchPeakMB,
        files: onceFiles,
      },
      networkMbit: o.networkMbit,
      unthrottled: {
        seconds: unthrottled,
        ratioToValidate: median(unthrottledRatios),
        files: unthrottledFiles,
      },
      reupload: { seconds: reuploads, ratioToValidate: median(reuploadRatios), files: reuploadFiles },
      underUpload: {
        hashedOnArrival: busy.on,
        hashedAtComplete: busy.off,
        ingestRatio: median(busyRatios.ingest),
        downloadRatio: median(busyRatios.download),
      },
      targets: TARGETS,
      pass: {
        validateToCoreutils: median(validateRatios) <= TARGETS.validateToCoreutils,
        ingestToValidate: median(ingestRatios) <= TARGETS.ingestToValidate,
        peakRssMB: uploadPeakRssMB < TARGETS.peakRssMB,
        underUpload:
          median(busyRatios.ingest) <= TARGETS.underUpload &&
          median(busyRatios.download) <= TARGETS.underUpload,
      },
      totalSeconds: 0,
    };
    result.totalSeconds = (Date.now() - began) / 1000;
    if (o.json) {
      process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    } else {
      const verdict = (ok: boolean) => (ok ? 'PASS' : 'MISS');
      const lines = [
        `bag: scale ${o.scale}, ${bag.files} files, ${(bag.bytes / MB).toFixed(0)} MB, md5 + sha256 manifests (built in ${setupSeconds.toFixed(1)} s), page cache warm; ${result.machine.cores} cores, load ${result.machine.loadavg.join(' ')}`,
        `coreutils md5sum -c + sha256sum -c: ${range(sums, 3)} s = ${range(result.coreutils.mbps, 0)} MB/s`,
        `preservd validate: ${range(validates, 3)} s = ${range(result.validate.mbps, 0)} MB/s`,
        `  validate / coreutils: ${range(validateRatios, 3)}   target ≤ ${TARGETS.validateToCoreutils}   ${verdict(result.pass.validateToCoreutils)}`,
        `  for reference, validate of a one-file bag (start-up cost): ${range(startups, 3)} s`,
        `ingest in one rsync run ${network}, rsync exit → complete → DONE (real daemon, files hashed as they land, quietMs ${QUIET_MS}): ${range(ingests, 3)} s`,
        `  complete→DONE / validate: ${range(ingestRatios, 3)}   target ≤ ${TARGETS.ingestToValidate}   ${verdict(result.pass.ingestToValidate)}`,
        `  files per round: ${onceFiles.map(counts).join('; ')}`,
        `the same unthrottled over loopback (the upload outruns the hashing beside it): ${range(unthrottled, 3)} s; / validate: ${range(unthrottledRatios, 3)}`,
        `  files per round: ${unthrottledFiles.map(counts).join('; ')}`,
        `re-upload ${network} after a change to one file (second rsync run), complete → DONE: ${range(reuploads, 3)} s; / validate: ${range(reuploadRatios, 3)}`,
        `  files per round: ${reuploadFiles.map(counts).join('; ')}`,
        `while an upload ${network} is hashed as it lands, against a daemon that hashes at complete (hashOnArrival false), at once: an ingest (read whole at complete) ${range(
          busy.on.map((b) => b.ingest),
          3,
        )} s vs ${range(
          busy.off.map((b) => b.ingest),
          3,
        )} s, ratio ${range(busyRatios.ingest, 3)}; a zip download ${range(
          busy.on.map((b) => b.download),
          3,
        )} s vs ${range(
          busy.off.map((b) => b.download),
          3,
        )} s, ratio ${range(busyRatios.download, 3)}   target ≤ ${TARGETS.underUpload}   ${verdict(result.pass.underUpload)}`,
        `daemon peak RSS (VmHWM) during each upload ${network} or unthrottled and its ingest: highest ${uploadPeakRssMB.toFixed(0)} MB (${range(uploadPeaks, 0)} MB)   target < ${TARGETS.peakRssMB}   ${verdict(result.pass.peakRssMB)}`,
        `  for reference, during the step that runs an upload, an ingest and a zip at once: ${range(
          busy.on.map((b) => b.peakRssMB),
          0,
        )} MB (no target)`,
        `(${o.rounds} rounds after a warm-up round, medians [min–max]; total ${result.totalSeconds.toFixed(1)} s)`,
      ];
      process.stdout.write(`${lines.join('\n')}\n`);
    }
  } catch (err) {
    if (daemon !== undefined)
      process.stderr.write(
        `the daemon's output (exit code ${daemon.proc.exitCode}, signal ${daemon.proc.signalCode}):\n${daemon.output.slice(-4000)}\n`,
      );
    throw err;
  } finally {
    for (const fn of teardowns.reverse()) await fn();
    rmSync(scratch, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench/ingest: ${(err as Error).stack ?? String(err)}\n`);
  process.exitCode = 1;
});
