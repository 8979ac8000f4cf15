/**
 * A whole audit against its yardsticks, in one run (`node dist/bench/audit.js [--json]
 * [--packages 200] [--package-mib 5] [--rounds 3]`):
 *
 * - a repository of ~1 GiB (200 stored packages of ~5 MiB: one large file, a few medium ones and
 *   a tail of small ones, plus tag files) is written under the OS temporary folder and
 *   recorded in a real catalog, then read once so every measurement sees the page cache warm;
 * - the coreutils yardstick: `sha256sum` over each package's files, one process per package,
 *   one after the other (what a cron loop would do; coreutils has no SHA extensions here);
 * - the hash-bound limit: node:crypto sha256 over one in-memory buffer on one core, × cores;
 * - our audit: AuditRunner end to end with the default configuration (FixityPool with one worker
 *   per core, 4 packages at once, strongest digest), from startAudit to the last event;
 * - the read+hash ceiling: the least any program can do here to hash these files from the page
 *   cache with read(2): one bare worker thread per core, started before the clock, each taking the
 *   next file (largest first) from a shared index and reading it with readSync into one reused
 *   buffer of the pool's read size, feeding node:crypto sha256. It differs from the hash-bound
 *   limit by the cost of copying every byte out of the page cache, which the limit leaves out;
 * - for reference, the fixity pool alone hashing the same files all at once (no catalog, no
 *   folder walk, no events): how much of the gap to the limit is the audit's own work.
 *
 * Rounds alternate yardstick and audit; ratios are taken per round and the median reported (the
 * machine is shared and noisy). Targets: audit time ≤ 0.25 × the sha256sum loop; throughput ≥
 * 0.8 × the hash-bound limit. The temporary repository is deleted at the end.
 */
import { spawnSync } from 'node:child_process';
import { createHash, randomFillSync, randomUUID } from 'node:crypto';
import { closeSync, mkdirSync, mkdtempSync, openSync, readSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import { crc32 } from 'node:zlib';
import { AuditRunner } from '../src/audit/runner.js';
import { Catalog } from '../src/catalog/catalog.js';
import type { FileRecord } from '../src/catalog/types.js';
import { defaults } from '../src/config/config.js';
import { FixityPool } from '../src/fixity/index.js';
import { firstInventory, INVENTORY, INVENTORY_SIDECAR, inventoryBytes } from '../src/ocfl/inventory.js';
import { OBJECT_DECLARATION, objectIdOf } from '../src/ocfl/layout.js';
import { DataLayout } from '../src/storage/layout.js';
import { Storage } from '../src/storage/storage.js';
import { median, range } from './stats.js';
import { silentLogger } from '../src/logger.js';

const MB = 1e6;
const MiB = 1024 * 1024;
const TARGETS = { ratioToSha256sum: 0.25, fractionOfHashBound: 0.8 };

interface Options {
  packages: number;
  packageMiB: number;
  rounds: number;
  json: boolean;
}

function parseArgs(argv: string[]): Options {
  const o: Options = { packages: 200, packageMiB: 5, rounds: 3, json: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--json') o.json = true;
    else if (arg === '--packages') o.packages = Number(argv[++i]);
    else if (arg === '--package-mib') o.packageMiB = Number(argv[++i]);
    else if (arg === '--rounds') o.rounds = Number(argv[++i]);
    else
      throw new Error(
        `unknown argument ${arg}; usage: audit.js [--packages 200] [--package-mib 5] [--rounds 3] [--json]`,
      );
  }
  if (!(o.packages >= 1 && o.packageMiB >= 1 && o.rounds >= 1))
    throw new Error('--packages, --package-mib and --rounds must be ≥ 1');
  return o;
}

interface BenchPackage {
  bagId: string;
  dir: string;
  files: FileRecord[];
}

/** Payload sizes of one package: ~60 % one large file, ~30 % four medium, ~10 % small ones. */
function payloadSizes(totalBytes: number, seed: number): number[] {
  const large = Math.round(totalBytes * 0.6);
  const medium = Array.from({ length: 4 }, () => Math.round((totalBytes * 0.3) / 4));
  const small: number[] = [];
  let left = totalBytes - large - medium.reduce((a, b) => a + b, 0);
  for (let i = 0; left > 0; i++) {
    const size = Math.min(left, 4096 * (1 + ((seed * 7 + i * 13) % 24))); // 4–96 KiB
    small.push(size);
    left -= size;
  }
  return [large, ...medium, ...small];
}

function record(path: string, bytes: Uint8Array): FileRecord {
  return {
    path,
    size: bytes.length,
    crc32: (crc32(bytes) >>> 0).toString(16).padStart(8, '0'),
    digests: { sha256: createHash('sha256').update(bytes).digest('hex') },
  };
}

/** The object's declaration, its inventory (root and v1) and their sidecars, as assembly writes them. */
function writeObjectFiles(objectDir: string, bagId: string, files: FileRecord[]): void {
  const versionFiles = files.map((f) => ({ path: f.path, digests: { sha256: f.digests.sha256! } }));
  const inventory = firstInventory(objectIdOf(bagId), versionFiles, {
    created: Date.now(),
    user: 'bench',
    message: 'deposit',
  });
  const { json, sidecar } = inventoryBytes(inventory);
  writeFileSync(join(objectDir, OBJECT_DECLARATION.name), OBJECT_DECLARATION.text);
  for (const folder of ['', 'v1']) {
    writeFileSync(join(objectDir, folder, INVENTORY), json);
    writeFileSync(join(objectDir, folder, INVENTORY_SIDECAR), sidecar);
  }
}

/** Writes the bags and records them as stored packages, as ingest would leave them. */
function buildRepository(dataDir: string, catalog: Catalog, o: Options): BenchPackage[] {
  const storage = new Storage(new DataLayout(dataDir));
  // Content: slices of one random pool at varying offsets (hashing speed does not care).
  const pool = randomFillSync(Buffer.allocUnsafe(64 * MiB));
  let cursor = 0;
  const take = (n: number): Buffer => {
    if (cursor + n > pool.length) cursor = (cursor * 31 + 4099) % Math.max(1, pool.length - n);
    const slice = pool.subarray(cursor, cursor + n);
    cursor += n;
    return slice;
  };
  const packages: BenchPackage[] = [];
  for (let p = 0; p < o.packages; p++) {
    const bagId = randomUUID();
    const storagePath = Storage.storagePath(bagId);
    // The object as ingest leaves it: the audit reads its content and validates its inventories.
    const dir = storage.firstContentDir(bagId);
    const files: FileRecord[] = [];
    const put = (path: string, bytes: Uint8Array) => {
      const abs = join(dir, path);
      mkdirSync(join(abs, '..'), { recursive: true });
      writeFileSync(abs, bytes);
      files.push(record(path, bytes));
    };
    const sizes = payloadSizes(o.packageMiB * MiB, p);
    sizes.forEach((size, i) =>
      put(
        i === 0
          ? 'data/master.wav'
          : i <= 4
            ? `data/derivatives/part-${i}.mp4`
            : `data/text/page-${String(i).padStart(4, '0')}.xml`,
        take(size),
      ),
    );
    const payload = [...files];
    put('bagit.txt', Buffer.from('BagIt-Version: 1.0\nTag-File-Character-Encoding: UTF-8\n'));
    put(
      'bag-info.txt',
      Buffer.from(`Payload-Oxum: ${payload.reduce((n, f) => n + f.size, 0)}.${payload.length}\n`),
    );
    put('manifest-sha256.txt', Buffer.from(payload.map((f) => `${f.digests.sha256}  ${f.path}\n`).join('')));
    const tags = files.filter((f) => !f.path.startsWith('data/'));
    put('tagmanifest-sha256.txt', Buffer.from(tags.map((f) => `${f.digests.sha256}  ${f.path}\n`).join('')));
    files.sort((a, b) => (a.path < b.path ? -1 : 1));
    writeObjectFiles(storage.objectDir(bagId), bagId, files);
    catalog.packages.create({
      bagId,
      externalId: `bench-${p}`,
      contentType: 'digital',
      user: 'bench',
      capability: randomUUID().replaceAll('-', ''),
    });
    catalog.files.put(bagId, files);
    catalog.packages.markStored(bagId, storagePath);
    packages.push({ bagId, dir, files });
  }
  return packages;
}

/** Reads every file once so the page cache is warm for everyone. */
function warm(packages: BenchPackage[]): void {
  const buf = Buffer.allocUnsafe(MiB);
  for (const p of packages)
    for (const f of p.files) {
      const fd = openSync(join(p.dir, f.path), 'r');
      while (readSync(fd, buf, 0, buf.length, null) > 0);
      closeSync(fd);
    }
}

/** The coreutils yardstick: one `sha256sum` per package, sequentially; seconds. */
function sha256sumLoop(packages: BenchPackage[]): number {
  const start = process.hrtime.bigint();
  for (const p of packages) {
    const r = spawnSync('sha256sum', ['--', ...p.files.map((f) => f.path)], {
      cwd: p.dir,
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    if (r.status !== 0) throw new Error(`sha256sum failed in ${p.dir}: ${r.error?.message ?? r.status}`);
  }
  return Number(process.hrtime.bigint() - start) / 1e9;
}

/** node:crypto sha256 on one in-memory buffer, one core, 1 MiB updates; best of 5 passes, MB/s. */
function sha256OneCore(): number {
  const buffer = randomFillSync(Buffer.allocUnsafe(64 * MiB));
  let best = 0;
  for (let pass = 0; pass < 6; pass++) {
    const h = createHash('sha256');
    const start = process.hrtime.bigint();
    for (let off = 0; off < buffer.length; off += MiB) h.update(buffer.subarray(off, off + MiB));
    h.digest();
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    if (pass > 0) best = Math.max(best, buffer.length / MB / seconds);
  }
  return best;
}

/** One bare hashing thread of the read+hash ceiling (see the header); plain JS, run with eval. */
const CEILING_WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const { openSync, readSync, closeSync } = require('node:fs');
const { createHash } = require('node:crypto');
const { files, next, readSize } = workerData;
const buffer = Buffer.allocUnsafe(readSize);
createHash('sha256').update(buffer).digest();
parentPort.once('message', () => {
  for (let i = Atomics.add(next, 0, 1); i < files.length; i = Atomics.add(next, 0, 1)) {
    const fd = openSync(files[i], 'r');
    const hash = createHash('sha256');
    for (;;) {
      const n = readSync(fd, buffer, 0, readSize, null);
      if (n > 0) hash.update(buffer.subarray(0, n));
      if (n < readSize) break;
    }
    closeSync(fd);
    hash.digest('hex');
  }
  parentPort.postMessage('done');
});
parentPort.postMessage('ready');
`;

/** The read+hash ceiling: bare threads, one per core, over the same files; seconds (start-up excluded). */
async function readHashCeiling(packages: BenchPackage[], cores: number, readSize: number): Promise<number> {
  const files = packages
    .flatMap((p) => p.files.map((f) => ({ path: join(p.dir, f.path), size: f.size })))
    .sort((a, b) => b.size - a.size)
    .map((f) => f.path);
  const next = new Int32Array(new SharedArrayBuffer(4));
  const workers = await Promise.all(
    Array.from({ length: cores }, () => {
      const worker = new Worker(CEILING_WORKER, { eval: true, workerData: { files, next, readSize } });
      return new Promise<Worker>((resolve, reject) => {
        worker.once('message', () => resolve(worker));
        worker.once('error', reject);
      });
    }),
  );
  try {
    const start = process.hrtime.bigint();
    await Promise.all(
      workers.map((w) => new Promise((resolve) => (w.once('message', resolve), w.postMessage('go')))),
    );
    return Number(process.hrtime.bigint() - start) / 1e9;
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
}

/** The fixity pool alone over the same files, all submitted at once, largest first; seconds. */
async function poolAlone(pool: FixityPool, packages: BenchPackage[]): Promise<number> {
  const files = packages
    .flatMap((p) => p.files.map((f) => ({ path: join(p.dir, f.path), size: f.size })))
    .sort((a, b) => b.size - a.size);
  const start = process.hrtime.bigint();
  await Promise.all(files.map((f) => pool.hashFile(f.path, ['sha256'], { priority: 'audit' })));
  return Number(process.hrtime.bigint() - start) / 1e9;
}

/**
 * One audit of the whole repository, end to end: seconds, and how busy the daemon thread (this
 * process's main thread, where the runner and the catalog live) was meanwhile, 0–1.
 */
async function auditOnce(
  runner: AuditRunner,
  catalog: Catalog,
  packages: number,
): Promise<{ seconds: number; mainThreadBusy: number }> {
  const before = performance.eventLoopUtilization();
  const start = process.hrtime.bigint();
  const result = runner.startAudit('bench');
  await runner.idle();
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  const mainThreadBusy = performance.eventLoopUtilization(before).utilization;
  if (!('created' in result)) throw new Error('an audit was already in progress');
  const audit = catalog.audits.get(result.created.id)!;
  if (audit.successes !== packages || audit.finishedAt === undefined)
    throw new Error(`audit ${audit.id}: ${audit.successes} of ${packages} passed`);
  return { seconds, mainThreadBusy };
}

async function main(): Promise<void> {
  const o = parseArgs(process.argv.slice(2));
  const began = Date.now();
  const dataDir = mkdtempSync(join(tmpdir(), 'preservd-bench-audit-'));
  let catalog: Catalog | undefined;
  let pool: FixityPool | undefined;
  try {
    catalog = Catalog.open(new DataLayout(dataDir));
    const packages = buildRepository(dataDir, catalog, o);
    const bytes = packages.reduce((n, p) => n + p.files.reduce((m, f) => m + f.size, 0), 0);
    const files = packages.reduce((n, p) => n + p.files.length, 0);
    // Write the new files out now: otherwise ext4 flushes them during the audit's first catalog
    // commits (data=ordered), and the audit pays for the set-up's writes.
    if (spawnSync('sync', ['-f', dataDir]).status !== 0) spawnSync('sync');
    const setupSeconds = (Date.now() - began) / 1000;

    const cores = availableParallelism();
    const oneCore = sha256OneCore();
    const hashBound = oneCore * cores;

    const config = defaults();
    config.dataDir = dataDir;
    pool = new FixityPool({
      workers: config.fixity.workers,
      readSize: config.fixity.readSize,
      maxOpenFiles: config.fixity.maxOpenFiles,
    });
    const runner = new AuditRunner({
      catalog,
      storage: new Storage(new DataLayout(dataDir)),
      hasher: pool,
      config,
      logger: silentLogger,
    });
    runner.start();

    warm(packages);
    await auditOnce(runner, catalog, packages.length); // warm-up: JIT, workers, catalog pages
    const coreutils: number[] = [];
    const ours: number[] = [];
    const busy: number[] = [];
    const poolOnly: number[] = [];
    const ceiling: number[] = [];
    const ratios: number[] = [];
    for (let round = 0; round < o.rounds; round++) {
      const a = sha256sumLoop(packages);
      const { seconds: b, mainThreadBusy } = await auditOnce(runner, catalog, packages.length);
      busy.push(mainThreadBusy);
      poolOnly.push(await poolAlone(pool, packages));
      ceiling.push(await readHashCeiling(packages, cores, config.fixity.readSize));
      coreutils.push(a);
      ours.push(b);
      ratios.push(b / a);
    }
    await runner.stop();

    const mbps = ours.map((s) => bytes / MB / s);
    const fractions = mbps.map((x) => x / hashBound);
    const result = {
      machine: { cores, loadavg: loadavg().map((l) => Number(l.toFixed(2))) },
      repository: { packages: packages.length, files, bytes, setupSeconds: Number(setupSeconds.toFixed(1)) },
      sha256sumLoop: { seconds: coreutils, mbps: coreutils.map((s) => bytes / MB / s) },
      hashBound: { oneCoreMBps: oneCore, cores, mbps: hashBound },
      readHashCeiling: {
        seconds: ceiling,
        mbps: ceiling.map((s) => bytes / MB / s),
        fractionOfHashBound: median(ceiling.map((s) => bytes / MB / s / hashBound)),
      },
      poolAlone: {
        seconds: poolOnly,
        mbps: poolOnly.map((s) => bytes / MB / s),
        fractionOfHashBound: median(poolOnly.map((s) => bytes / MB / s / hashBound)),
      },
      audit: {
        seconds: ours,
        mbps,
        packagesPerSec: ours.map((s) => packages.length / s),
        ratioToSha256sum: median(ratios),
        fractionOfHashBound: median(fractions),
        fractionOfPoolAlone: median(ours.map((s, i) => poolOnly[i]! / s)),
        mainThreadBusy: median(busy),
        fractionOfReadHashCeiling: median(ours.map((s, i) => ceiling[i]! / s)),
        peakRssMB: (process.resourceUsage().maxRSS * 1024) / MB,
      },
      targets: TARGETS,
      pass: {
        ratioToSha256sum: median(ratios) <= TARGETS.ratioToSha256sum,
        fractionOfHashBound: median(fractions) >= TARGETS.fractionOfHashBound,
      },
      totalSeconds: 0,
    };
    result.totalSeconds = (Date.now() - began) / 1000;
    if (o.json) {
      process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    } else {
      const verdict = (ok: boolean) => (ok ? 'PASS' : 'FAIL');
      const lines = [
        `repository: ${packages.length} packages, ${files} files, ${(bytes / MB).toFixed(0)} MB (built in ${setupSeconds.toFixed(1)} s), page cache warm; ${cores} cores, load ${result.machine.loadavg.join(' ')}`,
        `sha256sum loop (1 process per package): ${range(coreutils, 2)} s = ${range(result.sha256sumLoop.mbps, 0)} MB/s`,
        `hash-bound limit: node:crypto sha256 ${oneCore.toFixed(0)} MB/s on one core × ${cores} = ${hashBound.toFixed(0)} MB/s`,
        `audit (AuditRunner, default config): ${range(ours, 3)} s = ${range(mbps, 0)} MB/s, ${range(result.audit.packagesPerSec, 0)} packages/s`,
        `  time / sha256sum loop: ${range(ratios, 3)}   target ≤ ${TARGETS.ratioToSha256sum}   ${verdict(result.pass.ratioToSha256sum)}`,
        `  fraction of hash-bound limit: ${range(fractions, 2)}   target ≥ ${TARGETS.fractionOfHashBound}   ${verdict(result.pass.fractionOfHashBound)}`,
        `  the read+hash ceiling (${cores} bare threads: readSync into one ${config.fixity.readSize / 1024} KiB buffer + sha256, nothing else) ${range(result.readHashCeiling.mbps, 0)} MB/s = ${result.readHashCeiling.fractionOfHashBound.toFixed(2)} of the limit; the audit reaches ${result.audit.fractionOfReadHashCeiling.toFixed(2)} of it`,
        `  for reference: the fixity pool alone over the same files ${range(result.poolAlone.mbps, 0)} MB/s = ${result.poolAlone.fractionOfHashBound.toFixed(2)} of the limit; the audit reaches ${result.audit.fractionOfPoolAlone.toFixed(2)} of it`,
        `  the daemon thread (runner, catalog, dispatch) was busy ${range(
          busy.map((b) => b * 100),
          0,
        )} % of the audit`,
        `  peak RSS (whole process, set-up included): ${result.audit.peakRssMB.toFixed(0)} MB`,
        `(${o.rounds} rounds, medians [min–max]; total ${result.totalSeconds.toFixed(1)} s)`,
      ];
      process.stdout.write(`${lines.join('\n')}\n`);
    }
  } finally {
    await pool?.close();
    await catalog?.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench/audit: ${(err as Error).stack ?? String(err)}\n`);
  process.exitCode = 1;
});
