/**
 * How close the fixity pool gets to the physical hashing limit of this machine, measured in the
 * same run: node:crypto on one in-memory buffer on one core (the "openssl speed" figure), the
 * coreutils *sum tools over the same files, hash-wasm on the same buffer; then our pool with one
 * worker and with one per core over a mix of large and small files in the page cache.
 *
 *   node dist/bench/fixity.js [--size-mb 256] [--small 2000] [--json]
 *
 * Ratios: pool 1 worker / node:crypto one core; pool N workers / (node:crypto one core × N);
 * pool / coreutils (one process, one core, whole-process time).
 */
import { spawnSync } from 'node:child_process';
import { createHash, randomFillSync } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { createCRC32, createMD5, createSHA1, createSHA256, createSHA512, type IHasher } from 'hash-wasm';
import type { Algorithm } from '../src/fixity/index.js';
import { createHasher, type FixityPool } from '../src/fixity/index.js';
import { median } from './stats.js';

const MB = 1e6;
const MiB = 1024 * 1024;

interface Options {
  sizeMb: number;
  small: number;
  json: boolean;
}

function parseArgs(argv: string[]): Options {
  const options: Options = { sizeMb: 256, small: 2000, json: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--json') options.json = true;
    else if (arg === '--size-mb') options.sizeMb = Number(argv[++i]);
    else if (arg === '--small') options.small = Number(argv[++i]);
    else throw new Error(`unknown argument ${arg}; usage: fixity.js [--size-mb 256] [--small 2000] [--json]`);
  }
  if (!(options.sizeMb >= 8) || !(options.small >= 0)) throw new Error('--size-mb must be ≥ 8, --small ≥ 0');
  return options;
}

/** A row of the table: which digests, computed how. */
interface Variant {
  name: string;
  algorithms: Algorithm[];
  crc32: boolean;
  /** coreutils tools run one after the other (one read each); none for CRC-32. */
  coreutils: string[];
  native: () => { update(chunk: Uint8Array): void; finish(): void };
  wasm: () => Promise<{ update(chunk: Uint8Array): void; finish(): void }>;
}

const nodeHashes = (algorithms: Algorithm[]) => () => {
  const hashes = algorithms.map((a) => createHash(a));
  return {
    update: (chunk: Uint8Array) => hashes.forEach((h) => h.update(chunk)),
    finish: () => hashes.forEach((h) => h.digest()),
  };
};
const wasmHashes = (factories: (() => Promise<IHasher>)[]) => async () => {
  const hashers = await Promise.all(factories.map((f) => f()));
  return {
    update: (chunk: Uint8Array) => hashers.forEach((h) => h.update(chunk)),
    finish: () => hashers.forEach((h) => h.digest()),
  };
};

const VARIANTS: Variant[] = [
  {
    name: 'md5',
    algorithms: ['md5'],
    crc32: false,
    coreutils: ['md5sum'],
    native: nodeHashes(['md5']),
    wasm: wasmHashes([createMD5]),
  },
  {
    name: 'sha1',
    algorithms: ['sha1'],
    crc32: false,
    coreutils: ['sha1sum'],
    native: nodeHashes(['sha1']),
    wasm: wasmHashes([createSHA1]),
  },
  {
    name: 'sha256',
    algorithms: ['sha256'],
    crc32: false,
    coreutils: ['sha256sum'],
    native: nodeHashes(['sha256']),
    wasm: wasmHashes([createSHA256]),
  },
  {
    name: 'sha512',
    algorithms: ['sha512'],
    crc32: false,
    coreutils: ['sha512sum'],
    native: nodeHashes(['sha512']),
    wasm: wasmHashes([createSHA512]),
  },
  {
    name: 'crc32',
    algorithms: [],
    crc32: true,
    coreutils: [],
    // node:zlib's native crc32 is what the pool uses; hash-wasm's crc32 is the alternative.
    native: () => {
      let value = 0;
      return { update: (chunk) => void (value = crc32(chunk, value)), finish: () => void value };
    },
    wasm: wasmHashes([createCRC32]),
  },
  {
    name: 'md5+sha256',
    algorithms: ['md5', 'sha256'],
    crc32: false,
    coreutils: ['md5sum', 'sha256sum'],
    native: nodeHashes(['md5', 'sha256']),
    wasm: wasmHashes([createMD5, createSHA256]),
  },
];

function seconds(since: bigint): number {
  return Number(process.hrtime.bigint() - since) / 1e9;
}

/** MB/s hashing `buffer` in 1 MiB updates for at least `minSeconds`: one pass. */
async function inMemoryRate(
  buffer: Buffer,
  make: () =>
    | { update(chunk: Uint8Array): void; finish(): void }
    | Promise<{ update(chunk: Uint8Array): void; finish(): void }>,
  minSeconds = 0.25,
): Promise<number> {
  let bytes = 0;
  const start = process.hrtime.bigint();
  do {
    const hasher = await make();
    for (let offset = 0; offset < buffer.length; offset += MiB)
      hasher.update(buffer.subarray(offset, offset + MiB));
    hasher.finish();
    bytes += buffer.length;
  } while (seconds(start) < minSeconds);
  return bytes / seconds(start) / MB;
}

/** Seconds the coreutils tools take over all files, whole process, one after the other. */
function coreutilsSeconds(tools: string[], files: string[]): number | undefined {
  if (tools.length === 0) return undefined;
  const start = process.hrtime.bigint();
  for (const tool of tools) {
    const result = spawnSync(tool, ['--', ...files], { stdio: 'ignore' });
    if (result.error || result.status !== 0) return undefined;
  }
  return seconds(start);
}

/** Seconds the pool takes over all files, submitted at once, largest first. */
async function poolSeconds(pool: FixityPool, files: string[], variant: Variant): Promise<number> {
  const start = process.hrtime.bigint();
  await Promise.all(files.map((f) => pool.hashFile(f, variant.algorithms, { crc32: variant.crc32 })));
  return seconds(start);
}

/**
 * The machine may be shared: measure in rounds, each taking every figure once (limit, pool,
 * baseline), so that a ratio compares figures taken seconds apart; report medians.
 */
const ROUNDS = 3;
const COREUTILS_ROUNDS = 2;

interface DataSet {
  dir: string;
  large: string[];
  small: string[];
  /** Large files first: the order callers are asked to submit in. */
  all: string[];
  totalBytes: number;
  smallBytes: number;
}

function makeDataSet(options: Options): DataSet {
  const dir = mkdtempSync(join(tmpdir(), 'preservd-bench-fixity-'));
  const largeCount = 8;
  const largeSize = Math.floor((options.sizeMb * MB) / largeCount);
  const block = randomFillSync(Buffer.alloc(8 * MiB));
  const large: string[] = [];
  for (let i = 0; i < largeCount; i++) {
    const path = join(dir, `large-${i}.bin`);
    const fd = openSync(path, 'w');
    for (let written = 0; written < largeSize;) {
      block.writeUInt32LE(i * 1_000_003 + written, 0); // no two blocks alike
      const n = Math.min(block.length, largeSize - written);
      writeSync(fd, block, 0, n);
      written += n;
    }
    closeSync(fd);
    large.push(path);
  }
  const small: string[] = [];
  const smallSize = 4096;
  for (let i = 0; i < options.small; i++) {
    const path = join(dir, `small-${String(i).padStart(5, '0')}.txt`);
    writeFileSync(path, block.subarray(i * 64, i * 64 + smallSize));
    small.push(path);
  }
  const smallBytes = small.length * smallSize;
  return {
    dir,
    large,
    small,
    all: [...large, ...small],
    totalBytes: largeCount * largeSize + smallBytes,
    smallBytes,
  };
}

interface Row {
  variant: string;
  nodeCryptoOneCore: number;
  hashWasmOneCore: number;
  coreutils?: number;
  pool1: number;
  poolAll: number;
  pool1FilesPerSec: number;
  poolAllFilesPerSec: number;
  ratios: {
    hashWasmVsNode: number;
    pool1VsNode: number;
    poolAllVsNodeTimesCores: number;
    pool1VsCoreutils?: number;
    poolAllVsCoreutils?: number;
  };
}

async function main(): Promise<void> {
  const options = parseArgs(process.argv.slice(2));
  const cores = availableParallelism();
  const log = (line: string): void => {
    if (!options.json) process.stderr.write(line + '\n');
  };
  log(`preparing ${options.sizeMb} MB in 8 large files + ${options.small} × 4 KiB under ${tmpdir()} …`);
  const data = makeDataSet(options);
  const buffer = randomFillSync(Buffer.alloc(64 * MiB));
  const pools = { one: createHasher({ workers: 1 }), all: createHasher({ workers: cores }) };
  const rows: Row[] = [];
  const smallOnly: { variant: string; pool1: number; poolAll: number }[] = [];
  const started = process.hrtime.bigint();
  const loadBefore = loadavg()[0]!;
  try {
    for (const variant of VARIANTS) {
      log(`measuring ${variant.name} …`);
      // Warm-up: page cache, JIT, hash-wasm instances.
      await poolSeconds(pools.all, data.all, variant);
      await inMemoryRate(buffer, variant.native, 0.05);
      await inMemoryRate(buffer, variant.wasm, 0.05);
      const samples = {
        node: [] as number[],
        wasm: [] as number[],
        pool1: [] as number[],
        poolAll: [] as number[],
        coreutils: [] as number[],
      };
      for (let round = 0; round < ROUNDS; round++) {
        samples.node.push(await inMemoryRate(buffer, variant.native));
        samples.pool1.push(await poolSeconds(pools.one, data.all, variant));
        const core = round < COREUTILS_ROUNDS ? coreutilsSeconds(variant.coreutils, data.all) : undefined;
        if (core !== undefined) samples.coreutils.push(core);
        samples.poolAll.push(await poolSeconds(pools.all, data.all, variant));
        samples.wasm.push(await inMemoryRate(buffer, variant.wasm));
      }
      const nodeCryptoOneCore = median(samples.node);
      const hashWasmOneCore = median(samples.wasm);
      const coreutils =
        samples.coreutils.length > 0 ? data.totalBytes / median(samples.coreutils) / MB : undefined;
      const pool1 = {
        mbPerSec: data.totalBytes / median(samples.pool1) / MB,
        filesPerSec: data.all.length / median(samples.pool1),
      };
      const poolAll = {
        mbPerSec: data.totalBytes / median(samples.poolAll) / MB,
        filesPerSec: data.all.length / median(samples.poolAll),
      };
      rows.push({
        variant: variant.name,
        nodeCryptoOneCore,
        hashWasmOneCore,
        ...(coreutils === undefined ? {} : { coreutils }),
        pool1: pool1.mbPerSec,
        poolAll: poolAll.mbPerSec,
        pool1FilesPerSec: pool1.filesPerSec,
        poolAllFilesPerSec: poolAll.filesPerSec,
        ratios: {
          hashWasmVsNode: hashWasmOneCore / nodeCryptoOneCore,
          pool1VsNode: pool1.mbPerSec / nodeCryptoOneCore,
          poolAllVsNodeTimesCores: poolAll.mbPerSec / (nodeCryptoOneCore * cores),
          ...(coreutils === undefined
            ? {}
            : {
                pool1VsCoreutils: pool1.mbPerSec / coreutils,
                poolAllVsCoreutils: poolAll.mbPerSec / coreutils,
              }),
        },
      });
      if (variant.name === 'md5' || variant.name === 'sha256') {
        if (data.small.length > 0) {
          const one: number[] = [];
          const all: number[] = [];
          for (let round = 0; round < ROUNDS; round++) {
            one.push(data.small.length / (await poolSeconds(pools.one, data.small, variant)));
            all.push(data.small.length / (await poolSeconds(pools.all, data.small, variant)));
          }
          smallOnly.push({ variant: variant.name, pool1: median(one), poolAll: median(all) });
        }
      }
    }
  } finally {
    await Promise.all([pools.one.close(), pools.all.close()]);
    rmSync(data.dir, { recursive: true, force: true });
  }

  const machine = {
    cpu: cpus()[0]?.model ?? 'unknown',
    cores,
    node: process.version,
    openssl: process.versions.openssl,
    dataSet: `${data.large.length} × ${(data.totalBytes - data.smallBytes) / data.large.length / MB} MB + ${data.small.length} × 4 KiB = ${(data.totalBytes / MB).toFixed(1)} MB, page cache`,
    seconds: Number(seconds(started).toFixed(1)),
    /** 1-minute load average before and after: above the core count, other work shared the CPUs. */
    loadAverage: [Number(loadBefore.toFixed(2)), Number(loadavg()[0]!.toFixed(2))],
  };
  if (options.json) {
    process.stdout.write(JSON.stringify({ machine, rows, smallOnly }, null, 2) + '\n');
    return;
  }
  const f0 = (n: number | undefined): string => (n === undefined ? '–' : n.toFixed(0));
  const f2 = (n: number | undefined): string => (n === undefined ? '–' : n.toFixed(2));
  const header = [
    'digest',
    'node 1 core',
    'hash-wasm (×node)',
    'coreutils',
    'pool 1 worker (×node, ×coreutils)',
    `pool ${cores} workers (×node·${cores}, ×coreutils)`,
  ];
  const table = rows.map((r) => [
    r.variant,
    f0(r.nodeCryptoOneCore),
    `${f0(r.hashWasmOneCore)} (${f2(r.ratios.hashWasmVsNode)})`,
    f0(r.coreutils),
    `${f0(r.pool1)} (${f2(r.ratios.pool1VsNode)}, ${f2(r.ratios.pool1VsCoreutils)})`,
    `${f0(r.poolAll)} (${f2(r.ratios.poolAllVsNodeTimesCores)}, ${f2(r.ratios.poolAllVsCoreutils)})`,
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...table.map((row) => row[i]!.length)));
  const line = (cells: string[]): string =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  const out: string[] = [
    `fixity bench: ${machine.cpu}, ${cores} cores, Node ${machine.node} (OpenSSL ${machine.openssl})`,
    `data: ${machine.dataSet}; MB = 10^6 bytes; MB/s, median of ${ROUNDS} interleaved rounds after a warm-up`,
    'node/hash-wasm: one 64 MiB in-memory buffer, 1 MiB updates, one core. crc32 "node" = zlib.crc32.',
    'coreutils: one process over all files, whole-process time (md5+sha256 = md5sum then sha256sum).',
    '',
    line(header),
    line(widths.map((w) => '-'.repeat(w))),
    ...table.map(line),
  ];
  if (smallOnly.length > 0) {
    out.push('', `small files only (${data.small.length} × 4 KiB), files/s:`);
    for (const s of smallOnly)
      out.push(
        `  ${s.variant.padEnd(7)} pool 1 worker ${f0(s.pool1)}, pool ${cores} workers ${f0(s.poolAll)}`,
      );
  }
  out.push(
    '',
    `total ${machine.seconds} s; load average ${machine.loadAverage.join(' → ')} on ${cores} cores`,
  );
  process.stdout.write(out.join('\n') + '\n');
}

await main();
