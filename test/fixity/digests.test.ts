import t from 'tap';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { ALGORITHMS, type Algorithm } from '../../src/fixity/index.js';
import type { FileHasher } from '../../src/bagit/index.js';
import { createHasher, FixityPool } from '../../src/fixity/index.js';
import { repoRoot } from '../helpers/daemon.js';
import { MiB, scratch } from './files.js';
import { node } from '../helpers/node.js';

const files = scratch();
const pool = createHasher({ workers: 2, readSize: 64 * 1024 });
t.teardown(async () => {
  await pool.close();
  files.remove();
});

// The pool is what the BagIt engine codes against.
const asBagitHasher: FileHasher = pool;
void asBagitHasher;

function coreutils(algorithm: Algorithm, path: string): string {
  return execFileSync(`${algorithm}sum`, ['--', path], { encoding: 'utf8' }).split(' ')[0]!;
}

function oneShot(path: string): { size: number; crc32: string; digests: Record<Algorithm, string> } {
  const bytes = readFileSync(path);
  const digests = Object.fromEntries(ALGORITHMS.map((a) => [a, createHash(a).update(bytes).digest('hex')]));
  return {
    size: bytes.length,
    crc32: (crc32(bytes) >>> 0).toString(16).padStart(8, '0'),
    digests: digests as Record<Algorithm, string>,
  };
}

function pythonCrc32(path: string): string | undefined {
  try {
    const script = 'import sys, zlib; print("%08x" % zlib.crc32(open(sys.argv[1], "rb").read()))';
    return execFileSync('python3', ['-c', script, path], { encoding: 'utf8' }).trim();
  } catch {
    return undefined;
  }
}

const sizes: [string, number][] = [
  ['empty', 0],
  ['one byte', 1],
  ['one read exactly (64 KiB)', 64 * 1024],
  ['two reads exactly', 128 * 1024],
  ['larger than readSize, not a multiple', 3 * MiB + 12345],
];

for (const [label, size] of sizes) {
  t.test(`all six digests and CRC-32 of a file: ${label}`, async (t) => {
    const path = files.file(`f-${size}`, size);
    const result = await pool.hashFile(path, [...ALGORITHMS], { crc32: true });
    const expected = oneShot(path);
    t.same(result, expected, 'equal to node:crypto and zlib.crc32 over the whole file at once');
    for (const algorithm of ALGORITHMS) {
      t.equal(result.digests[algorithm], coreutils(algorithm, path), `${algorithm} equals ${algorithm}sum`);
    }
    const python = pythonCrc32(path);
    if (python === undefined) t.comment('python3 not available; CRC-32 checked against zlib.crc32 only');
    else t.equal(result.crc32, python, "CRC-32 equals python's zlib.crc32");
  });
}

t.test('only the requested digests, lower-case hex; no crc32 unless asked', async (t) => {
  const path = files.file('subset', 100_000);
  const result = await pool.hashFile(path, ['sha256', 'md5', 'sha256']);
  t.same(Object.keys(result.digests).sort(), ['md5', 'sha256']);
  t.notOk('crc32' in result);
  t.match(result.digests.sha256, /^[0-9a-f]{64}$/);
  t.same(await pool.hashFile(path, []), { size: 100_000, digests: {} }, 'no algorithm: just the size');
});

t.test('the known answers for "abc"', async (t) => {
  const path = files.file('abc', Buffer.from('abc'));
  const r = await pool.hashFile(path, ['md5', 'sha1', 'sha256'], { crc32: true });
  t.equal(r.digests.md5, '900150983cd24fb0d6963f7d28e17f72');
  t.equal(r.digests.sha1, 'a9993e364706816aba3e25717850c26c9cd0d89d');
  t.equal(r.digests.sha256, 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  t.equal(r.crc32, '352441c2');
});

t.test('the default pool (1 MiB reads, one worker per core) gives the same digests', async (t) => {
  const path = files.file('default', 2 * MiB + 1);
  const defaultPool = new FixityPool();
  t.teardown(() => defaultPool.close());
  t.same(await defaultPool.hashFile(path, [...ALGORITHMS], { crc32: true }), oneShot(path));
  t.match(defaultPool.stats(), { bytesHashed: 2 * MiB + 1, filesHashed: 1, queued: 0, running: 0 });
});

t.test('a worker’s hashing code loads hash-wasm only for a resumable job', async (t) => {
  // hash-wasm took each worker ~0.15 s to load on a busy host; most workers (every `preservd
  // validate`) never use it. CommonJS loaded through import lands in require's cache too.
  const hashFile = join(repoRoot, 'dist/src/fixity/hash-file.js');
  const script = `
    const { createRequire } = await import('node:module');
    const cache = () => Object.keys(createRequire(import.meta.url).cache).filter((k) => k.includes('hash-wasm'));
    const { createWasmHasherSet } = await import(${JSON.stringify(join(repoRoot, 'dist/src/fixity/digesters.js'))});
    await import(${JSON.stringify(hashFile)});
    const before = cache().length;
    const set = await createWasmHasherSet();
    console.log(JSON.stringify({ before, after: cache().length, md5: set.md5.init().update('abc').digest('hex') }));
  `;
  const out = execFileSync(...node(['--input-type=module', '-e', script]), { encoding: 'utf8' });
  const { before, after, md5 } = JSON.parse(out) as { before: number; after: number; md5: string };
  t.equal(before, 0, 'not loaded with the hashing code');
  t.ok(after > 0, 'loaded for the first resumable hasher set');
  t.equal(md5, createHash('md5').update('abc').digest('hex'));
});
