/**
 * Download speed against the floor, in one run (`node dist/bench/download.js [--json]`):
 *
 * - floor: a bare node:http server piping one file with fs.createReadStream (1 MiB reads);
 * - file: the same file through fastify and `answerFile` + `sendDownload` (target ≤ 1.2 × the floor's time);
 * - zip: the whole bag as a stored zip, its time against the floor's time for as many bytes
 *   (target ≤ 1.5), and the zip server's peak RSS (target < 150 MB).
 *
 * The bag (~1 GiB: three big files and 1000 small ones) is generated under the OS temporary
 * folder, kept page-cache warm, and deleted at the end. Each server runs in its own child process
 * (so the RSS is the server's alone), pinned to core 0 when taskset is there; curl on core 1
 * downloads to /dev/null. Rounds alternate floor, file, zip; ratios are taken per round and
 * the median is reported (the machine is shared and noisy).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  closeSync,
  createReadStream,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { createServer } from 'node:http';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { crc32 } from 'node:zlib';
import Fastify from 'fastify';
import type { FileRecord } from '../src/catalog/types.js';
import { answerFile, answerZip, planZip } from '../src/download/index.js';
import { sendDownload } from '../src/http/send-download.js';
import { Storage } from '../src/storage/storage.js';
import { median } from './stats.js';

const MiB = 1 << 20;
const ROUNDS = 7;
const BIG_FILES: Array<[string, number]> = [
  ['data/masters/reel-1.wav', 512 * MiB],
  ['data/masters/reel-2.wav', 256 * MiB],
  ['data/video/tape.mov', 192 * MiB],
];
const SMALL_FILES = 1000;
const BAG_ID = '0bd1c2e3-f405-4617-8829-3a4b5c6d7e8f';
const TARGETS = { fileRatio: 1.2, zipRatio: 1.5, zipRssMB: 150 };

interface BenchBag {
  dir: string;
  files: FileRecord[];
  /** The file the floor and our route both serve. */
  probe: FileRecord;
}

// ---------------------------------------------------------------- child servers

async function serveFloor(bag: BenchBag): Promise<number> {
  const path = join(bag.dir, bag.probe.path);
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': bag.probe.size });
    createReadStream(path, { highWaterMark: MiB }).pipe(res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return typeof address === 'object' && address !== null ? address.port : 0;
}

async function serveOurs(bag: BenchBag): Promise<number> {
  const app = Fastify({ logger: false });
  app.get('/file', async (request, reply) =>
    sendDownload(
      request,
      reply,
      await answerFile(
        { absPath: Storage.resolveInside(bag.dir, bag.probe.path), record: bag.probe },
        request,
      ),
    ),
  );
  app.get('/zip', (request, reply) =>
    sendDownload(
      request,
      reply,
      answerZip(
        {
          bagId: BAG_ID,
          dir: bag.dir,
          pathOf: (file) => Storage.resolveInside(bag.dir, file.path),
          files: bag.files,
          storedAt: 0,
        },
        request.method,
      ),
    ),
  );
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  return typeof address === 'object' && address !== null ? address.port : 0;
}

async function child(kind: string, bagJson: string): Promise<void> {
  const bag = JSON.parse(readFileSync(bagJson, 'utf8')) as BenchBag;
  const port = kind === 'floor' ? await serveFloor(bag) : await serveOurs(bag);
  process.stdout.write(`${port}\n`);
}

// ---------------------------------------------------------------- the bag

/** Writes the bench bag; digests and CRCs come from the bytes as they are written. */
function makeBag(root: string): BenchBag {
  const dir = join(root, 'storage', Storage.storagePath(BAG_ID));
  const files: FileRecord[] = [];
  const write = (path: string, chunks: Iterable<Buffer>) => {
    const abs = join(dir, path);
    mkdirSync(dirname(abs), { recursive: true });
    const fd = openSync(abs, 'w');
    const sha = createHash('sha256');
    let crc = 0;
    let size = 0;
    for (const chunk of chunks) {
      writeSync(fd, chunk);
      sha.update(chunk);
      crc = crc32(chunk, crc);
      size += chunk.length;
    }
    closeSync(fd);
    files.push({
      path,
      size,
      crc32: crc.toString(16).padStart(8, '0'),
      digests: { sha256: sha.digest('hex') },
    });
  };
  // Incompressible-looking bytes, cheap to make: one random block, stamped per chunk.
  const block = Buffer.alloc(16 * MiB);
  for (let i = 0; i < block.length; i += 4) block.writeUInt32LE((Math.random() * 0x100000000) >>> 0, i);
  for (const [path, size] of BIG_FILES) {
    write(
      path,
      (function* () {
        for (let at = 0; at < size; at += block.length) {
          const chunk = Buffer.from(block.subarray(0, Math.min(block.length, size - at)));
          chunk.writeDoubleLE(at, 0);
          yield chunk;
        }
      })(),
    );
  }
  const manifest: string[] = [];
  for (let i = 0; i < SMALL_FILES; i++) {
    const size = 1024 + ((i * 7919) % (31 * 1024));
    const path = `data/pages/${String(Math.floor(i / 100)).padStart(2, '0')}/page-${String(i).padStart(4, '0')}.txt`;
    write(path, [
      Buffer.from(
        block
          .subarray(i * 4096, i * 4096 + size)
          .toString('base64')
          .slice(0, size),
      ),
    ]);
  }
  for (const f of files) manifest.push(`${f.digests.sha256}  ${f.path}\n`);
  write('bagit.txt', [Buffer.from('BagIt-Version: 1.0\nTag-File-Character-Encoding: UTF-8\n')]);
  const payloadBytes = files.reduce((n, f) => n + f.size, 0);
  write('bag-info.txt', [
    Buffer.from(`Bagging-Date: 2026-11-22\nPayload-Oxum: ${payloadBytes}.${files.length - 1}\n`),
  ]);
  write('manifest-sha256.txt', [Buffer.from(manifest.join(''))]);
  files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return { dir, files, probe: files.find((f) => f.path === BIG_FILES[0]![0])! };
}

/** Reads every file once so the runs start page-cache warm. */
function warm(bag: BenchBag): void {
  const buf = Buffer.allocUnsafe(8 * MiB);
  for (const f of bag.files) {
    const fd = openSync(join(bag.dir, f.path), 'r');
    for (let pos = 0; pos < f.size;) {
      const n = readSync(fd, buf, 0, buf.length, pos);
      if (n === 0) break;
      pos += n;
    }
    closeSync(fd);
  }
}

// ---------------------------------------------------------------- measuring

const hasTaskset = spawnSync('taskset', ['-c', '0', 'true']).status === 0 && cpus().length >= 2;

function pinned(core: number, command: string, args: string[]): [string, string[]] {
  return hasTaskset ? ['taskset', ['-c', String(core), command, ...args]] : [command, args];
}

async function startChild(
  kind: 'floor' | 'ours',
  bagJson: string,
): Promise<{ proc: ChildProcess; port: number }> {
  const [cmd, args] = pinned(0, process.execPath, [fileURLToPath(import.meta.url), '--serve', kind, bagJson]);
  const proc = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    proc.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('\n')) resolve(Number(out.trim()));
    });
    proc.once('exit', (code) => reject(new Error(`${kind} server exited with ${code}`)));
  });
  return { proc, port };
}

/** curl to /dev/null: seconds and bytes. */
async function curl(url: string): Promise<{ seconds: number; bytes: number }> {
  const [cmd, args] = pinned(1, 'curl', [
    '-s',
    '-o',
    '/dev/null',
    '-w',
    '%{time_total} %{size_download} %{http_code}',
    url,
  ]);
  const proc = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number | null>((resolve) => proc.once('exit', resolve));
  const [seconds, bytes, status] = out.trim().split(' ');
  if (code !== 0 || status !== '200') throw new Error(`curl ${url}: exit ${code}, HTTP ${status}`);
  return { seconds: Number(seconds), bytes: Number(bytes) };
}

/** CPU seconds (user + system) a process has used so far, from /proc/<pid>/stat. */
function cpuSecondsOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}
const CLOCK_TICKS = Number(spawnSync('getconf', ['CLK_TCK']).stdout?.toString().trim()) || 100;

/** A download timed by curl, with the server's CPU time for it. */
async function measure(
  url: string,
  serverPid: number,
): Promise<{ seconds: number; bytes: number; cpu: number }> {
  const before = cpuSecondsOf(serverPid);
  const r = await curl(url);
  return { ...r, cpu: cpuSecondsOf(serverPid) - before };
}

/** kB figures from /proc/<pid>/status (under taskset the pid is still node's: taskset execs). */
function memoryOf(pid: number): { rssKB: number; hwmKB: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0);
  return { rssKB: field('VmRSS'), hwmKB: field('VmHWM') };
}

async function main(): Promise<void> {
  const json = process.argv.includes('--json');
  const started = Date.now();
  const root = mkdtempSync(join(tmpdir(), 'preservd-bench-download-'));
  const children: ChildProcess[] = [];
  const keep = process.argv.includes('--keep');
  const cleanup = () => {
    for (const c of children) c.kill();
    if (keep) console.error(`bench bag kept in ${root}`);
    else rmSync(root, { recursive: true, force: true });
  };
  process.once('SIGINT', () => {
    cleanup();
    process.exit(130);
  });
  try {
    const bag = makeBag(root);
    const bagJson = join(root, 'bag.json');
    writeFileSync(bagJson, JSON.stringify(bag));
    const bagBytes = bag.files.reduce((n, f) => n + f.size, 0);
    const zipBytes = planZip(BAG_ID, bag.files).size;
    warm(bag);

    const floor = await startChild('floor', bagJson);
    const ours = await startChild('ours', bagJson);
    children.push(floor.proc, ours.proc);
    const idleRssKB = memoryOf(ours.proc.pid!).rssKB;
    const floorUrl = `http://127.0.0.1:${floor.port}/`;
    const fileUrl = `http://127.0.0.1:${ours.port}/file`;
    const zipUrl = `http://127.0.0.1:${ours.port}/zip`;
    // Warm-up: JIT, sockets, and the page cache once more.
    for (const url of [floorUrl, fileUrl, zipUrl]) await curl(url);

    type Round = {
      floor: number;
      file: number;
      zip: number;
      floorCpu: number;
      fileCpu: number;
      zipCpu: number;
      zipRssKB: number;
    };
    const rounds: Round[] = [];
    let zipRssKB = 0;
    for (let i = 0; i < ROUNDS; i++) {
      // Alternate which of the two goes first, so neither always follows the zip.
      const first =
        i % 2 === 0 ? await measure(floorUrl, floor.proc.pid!) : await measure(fileUrl, ours.proc.pid!);
      const second =
        i % 2 === 0 ? await measure(fileUrl, ours.proc.pid!) : await measure(floorUrl, floor.proc.pid!);
      const [f, s] = i % 2 === 0 ? [first, second] : [second, first];
      let peak = memoryOf(ours.proc.pid!).rssKB;
      const sampler = setInterval(() => {
        peak = Math.max(peak, memoryOf(ours.proc.pid!).rssKB);
      }, 10);
      const z = await measure(zipUrl, ours.proc.pid!);
      clearInterval(sampler);
      peak = Math.max(peak, memoryOf(ours.proc.pid!).rssKB);
      zipRssKB = Math.max(zipRssKB, peak);
      if (f.bytes !== bag.probe.size || s.bytes !== bag.probe.size || z.bytes !== zipBytes)
        throw new Error('a download came back with the wrong length');
      rounds.push({
        floor: f.seconds,
        file: s.seconds,
        zip: z.seconds,
        floorCpu: f.cpu,
        fileCpu: s.cpu,
        zipCpu: z.cpu,
        zipRssKB: peak,
      });
    }
    const hwmKB = memoryOf(ours.proc.pid!).hwmKB;

    const fileRatio = median(rounds.map((r) => r.file / r.floor));
    // The zip against the floor's time for as many bytes.
    const zipRatio = median(rounds.map((r) => r.zip / ((r.floor * zipBytes) / bag.probe.size)));
    const floorMBps = median(rounds.map((r) => bag.probe.size / r.floor / 1e6));
    const fileMBps = median(rounds.map((r) => bag.probe.size / r.file / 1e6));
    const zipMBps = median(rounds.map((r) => zipBytes / r.zip / 1e6));
    const zipRssMB = zipRssKB / 1024;
    // Server CPU seconds per byte against the floor's: steadier than wall time on a busy machine.
    const fileCpuRatio = median(rounds.map((r) => r.fileCpu / r.floorCpu));
    const zipCpuRatio = median(rounds.map((r) => r.zipCpu / ((r.floorCpu * zipBytes) / bag.probe.size)));
    const result = {
      bag: { bytes: bagBytes, files: bag.files.length, probeBytes: bag.probe.size, zipBytes },
      rounds: ROUNDS,
      pinned: hasTaskset,
      floorMBps,
      file: {
        MBps: fileMBps,
        ratio: fileRatio,
        cpuRatio: fileCpuRatio,
        target: TARGETS.fileRatio,
        pass: fileRatio <= TARGETS.fileRatio,
      },
      zip: {
        MBps: zipMBps,
        ratio: zipRatio,
        cpuRatio: zipCpuRatio,
        target: TARGETS.zipRatio,
        pass: zipRatio <= TARGETS.zipRatio,
      },
      zipRss: {
        peakMB: zipRssMB,
        idleMB: idleRssKB / 1024,
        processHwmMB: hwmKB / 1024,
        target: TARGETS.zipRssMB,
        pass: zipRssMB < TARGETS.zipRssMB,
      },
      perRound: rounds,
      seconds: (Date.now() - started) / 1000,
    };
    if (json) {
      process.stdout.write(JSON.stringify(result, null, 2) + '\n');
    } else {
      const pf = (ok: boolean) => (ok ? 'PASS' : 'FAIL');
      const mb = (n: number) => `${(n / 1e6).toFixed(0)} MB`;
      console.log(
        `download bench: bag ${mb(bagBytes)} in ${bag.files.length} files (zip ${mb(zipBytes)}), page cache warm, ${ROUNDS} rounds, ` +
          (hasTaskset ? 'server on core 0, curl on core 1' : 'not pinned'),
      );
      console.log(
        `floor    node:http + createReadStream(1 MiB), ${mb(bag.probe.size)} file   ${floorMBps.toFixed(0)} MB/s`,
      );
      console.log(
        `file     same file through fastify                      ${fileMBps.toFixed(0)} MB/s   time ratio ${fileRatio.toFixed(2)} (target ≤ ${TARGETS.fileRatio})   ${pf(result.file.pass)}   [server CPU ratio ${fileCpuRatio.toFixed(2)}]`,
      );
      console.log(
        `zip      whole bag, vs floor for as many bytes           ${zipMBps.toFixed(0)} MB/s   time ratio ${zipRatio.toFixed(2)} (target ≤ ${TARGETS.zipRatio})   ${pf(result.zip.pass)}   [server CPU ratio ${zipCpuRatio.toFixed(2)}]`,
      );
      console.log(
        `zip      server peak RSS during the zip                  ${zipRssMB.toFixed(0)} MB (target < ${TARGETS.zipRssMB} MB; ${(idleRssKB / 1024).toFixed(0)} MB idle, VmHWM ${(hwmKB / 1024).toFixed(0)} MB)   ${pf(result.zipRss.pass)}`,
      );
      console.log(
        `(${result.seconds.toFixed(1)} s; load average ${loadavg()[0]!.toFixed(1)} on ${cpus().length} cores: ratios are medians of paired rounds)`,
      );
    }
    process.exitCode = result.file.pass && result.zip.pass && result.zipRss.pass ? 0 : 1;
  } finally {
    cleanup();
  }
}

const serveAt = process.argv.indexOf('--serve');
if (serveAt >= 0) {
  await child(process.argv[serveAt + 1]!, process.argv[serveAt + 2]!);
} else {
  await main();
}
