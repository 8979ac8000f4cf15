/**
 * Storage roots built here with preservd's own layout (src/ocfl/layout.ts) and inventories
 * (src/ocfl/inventory.ts), then broken one way at a time: each break is reported with its code,
 * and nothing else is.
 */
import { createHash, randomUUID } from 'node:crypto';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  renameSync,
  rmdirSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { blake2b } from 'hash-wasm';
import t from 'tap';
import { firstInventory, inventoryBytes, INVENTORY, INVENTORY_SIDECAR } from '../../src/ocfl/inventory.js';
import {
  contentPathOf,
  layoutFiles,
  OBJECT_DECLARATION,
  objectIdOf,
  packageObjectPath,
  ROOT_DECLARATION,
} from '../../src/ocfl/layout.js';
import { fsReader, validateRoot, type RootReport } from '../../src/ocfl/validate/index.js';

const write = (path: string, data: string | Buffer) => {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, data);
};
const digest = (algorithm: string, data: string) => createHash(algorithm).update(data).digest('hex');

const FILES = { 'bagit.txt': 'BagIt-Version: 1.0\n', 'data/a.txt': 'a\n', 'data/sub/b.txt': 'b\n' };
const BLAKE2B_256 = new Map(
  await Promise.all(
    Object.entries(FILES).map(async ([path, text]) => [path, await blake2b(text, 256)] as const),
  ),
);

/** Moves an object folder, and removes the folders it leaves empty (which would be E073). */
function move(root: string, from: string, to: string): void {
  mkdirSync(dirname(join(root, to)), { recursive: true });
  renameSync(join(root, from), join(root, to));
  for (let dir = dirname(from); dir !== '.' && readdirSync(join(root, dir)).length === 0; dir = dirname(dir))
    rmdirSync(join(root, dir));
}

/**
 * A package's object as preservd writes it: v1 holds the files, md5 and sha512 in fixity; and
 * blake2b-256 and sha512/256 (extension 0001), which preservd does not write, to check those too.
 */
function writeObject(root: string, bagId: string, at = packageObjectPath(bagId)): string {
  const files = FILES;
  const dir = join(root, at);
  const inventory = firstInventory(
    objectIdOf(bagId),
    Object.entries(files).map(([path, text]) => ({
      path,
      digests: { sha256: digest('sha256', text), md5: digest('md5', text), sha512: digest('sha512', text) },
    })),
    { created: Date.UTC(2025, 0, 2, 3, 4, 5), user: 'alice', message: 'deposit' },
  );
  const fixity = inventory.fixity as Record<string, Record<string, string[]>>;
  fixity['blake2b-256'] = {};
  fixity['sha512/256'] = {};
  for (const [path, text] of Object.entries(files)) {
    fixity['blake2b-256'][BLAKE2B_256.get(path)!] = [contentPathOf(1, path)];
    fixity['sha512/256'][digest('sha512-256', text)] = [contentPathOf(1, path)];
  }
  const { json, sidecar } = inventoryBytes(inventory);
  write(join(dir, OBJECT_DECLARATION.name), OBJECT_DECLARATION.text);
  for (const [path, text] of Object.entries(files)) write(join(dir, contentPathOf(1, path)), text);
  for (const folder of [dir, join(dir, 'v1')]) {
    write(join(folder, INVENTORY), json);
    write(join(folder, INVENTORY_SIDECAR), sidecar);
  }
  return at;
}

/** A root with two objects and preservd's file beside the declaration. */
function buildRoot(t: Tap): { root: string; objects: string[] } {
  const root = mkdtempSync(join(tmpdir(), 'preservd-ocfl-root-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  write(join(root, ROOT_DECLARATION.name), ROOT_DECLARATION.text);
  for (const { path, text } of layoutFiles()) write(join(root, path), text);
  write(join(root, 'preservd-repository.json'), '{}\n');
  return { root, objects: [writeObject(root, randomUUID()), writeObject(root, randomUUID())] };
}

type Tap = Parameters<Parameters<typeof t.test>[0]>[0];
const check = (root: string) => validateRoot(fsReader(root));
const codes = (r: RootReport) => [...new Set(r.problems.map((p) => p.code as string))].sort();
/** The codes reported, W004 aside (preservd addresses content with sha256, as OCFL allows). */
const faults = (r: RootReport) => codes(r).filter((c) => c !== 'W004');

t.test(
  'a root preservd lays out is valid: every object found at its path, W004 its only warning',
  async (t) => {
    const { root, objects } = buildRoot(t);
    const report = await check(root);
    t.equal(report.valid, true);
    t.same(codes(report), ['W004'], 'an unknown file at the top (preservd-repository.json) is allowed');
    t.same(report.objects.map((o) => o.path).sort(), [...objects].sort());
    t.ok(report.objects.every((o) => o.valid && o.id?.startsWith('urn:uuid:')));
  },
);

t.test('the root declaration: missing, two, a wrong name, wrong text', async (t) => {
  const { root } = buildRoot(t);
  unlinkSync(join(root, ROOT_DECLARATION.name));
  t.same(faults(await check(root)), ['E069']);
  write(join(root, '0=ocfl_1.1'), 'ocfl_1.0\n');
  t.same(faults(await check(root)), ['E080']);
  write(join(root, '0=ocfl_1.1'), ROOT_DECLARATION.text);
  write(join(root, '0=ocfl_2.0'), 'ocfl_2.0\n');
  t.same(faults(await check(root)), ['E076', 'E079']);
});

t.test('ocfl_layout.json without its keys, or naming no registered layout', async (t) => {
  const { root } = buildRoot(t);
  write(join(root, 'ocfl_layout.json'), '{"extension": "0003-hash-and-id-n-tuple-storage-layout"}');
  t.same(faults(await check(root)), ['E070']);
  write(join(root, 'ocfl_layout.json'), '{"extension": "9999-mine", "description": "x"}');
  t.same(faults(await check(root)), ['E071']);
});

t.test('the extensions folder: a file is an error, an unregistered extension a warning', async (t) => {
  const { root } = buildRoot(t);
  write(join(root, 'extensions', 'notes.txt'), 'x');
  t.same(faults(await check(root)), ['E112']);
  unlinkSync(join(root, 'extensions', 'notes.txt'));
  mkdirSync(join(root, 'extensions', 'local-thing'));
  const report = await check(root);
  t.equal(report.valid, true);
  t.same(faults(report), ['W016']);
});

t.test('the hierarchy: a file between objects, an empty folder, a link', async (t) => {
  const { root, objects } = buildRoot(t);
  const tuple = objects[0]!.split('/').slice(0, 2).join('/');
  write(join(root, tuple, 'stray.txt'), 'x');
  t.same(faults(await check(root)), ['E084']);
  unlinkSync(join(root, tuple, 'stray.txt'));
  mkdirSync(join(root, 'fff', 'eee'), { recursive: true });
  const empty = await check(root);
  t.same(faults(empty), ['E073']);
  t.equal(empty.problems.find((p) => p.code === 'E073')?.path, 'fff/eee');
  rmSync(join(root, 'fff'), { recursive: true });
  symlinkSync(join(root, objects[0]!), join(root, 'aaa'));
  t.same(faults(await check(root)), ['E090']);
});

t.test('an object inside another object', async (t) => {
  const { root, objects } = buildRoot(t);
  writeObject(root, randomUUID(), `${objects[0]!}/inner`);
  const report = await check(root);
  t.ok(faults(report).includes('E082'), faults(report).join());
  t.ok(faults(report).includes('E001'), 'the outer object has a folder OCFL does not name');
});

t.test('an object away from the path the layout gives its id, and two objects with one id', async (t) => {
  const { root, objects } = buildRoot(t);
  move(root, objects[0]!, 'zzz/zzz/zzz/moved');
  const moved = await check(root);
  t.same(faults(moved), ['E083']);
  t.equal(moved.problems.find((p) => p.code === 'E083')?.path, 'zzz/zzz/zzz/moved');
  const bagId = randomUUID();
  writeObject(root, bagId);
  writeObject(root, bagId, 'yyy/yyy/yyy/copy');
  t.same(faults(await check(root)), ['E037', 'E083']);
});

t.test('the layout check follows the root: another 0003 configuration is not ours to check', async (t) => {
  const { root, objects } = buildRoot(t);
  write(
    join(root, 'extensions', '0003-hash-and-id-n-tuple-storage-layout', 'config.json'),
    '{"extensionName": "0003-hash-and-id-n-tuple-storage-layout", "digestAlgorithm": "md5"}',
  );
  move(root, objects[0]!, 'zzz/moved');
  t.same(faults(await check(root)), []);
});

t.test("an object's problems come with its path; an object newer than the root", async (t) => {
  const { root, objects } = buildRoot(t);
  unlinkSync(join(root, objects[0]!, 'v1', 'content', 'data', 'a.txt'));
  const report = await check(root);
  t.equal(report.valid, false);
  t.same(faults(report), ['E092', 'E093'], 'listed in the manifest, and in fixity');
  t.equal(report.problems.find((p) => p.code === 'E092')?.path, `${objects[0]!}/v1/content/data/a.txt`);
  t.same(
    report.objects.filter((o) => !o.valid).map((o) => o.path),
    [objects[0]],
  );
  unlinkSync(join(root, ROOT_DECLARATION.name));
  write(join(root, '0=ocfl_1.0'), 'ocfl_1.0\n');
  t.ok(faults(await check(root)).includes('E081'));
});
