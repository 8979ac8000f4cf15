/**
 * The primary storage is an OCFL 1.1 storage root (STORAGE.md). Through the real daemon and our
 * rsync: the root's declaration and layout files, and each ingested package an object with its
 * declaration, identical root and v1 inventories (id, head, sha256 manifest over every file, the
 * bag's md5 in fixity, the version's created, user and message), sidecars that are the sha256 of
 * the inventory, and content byte for byte the upload, an empty folder dropped with a warning.
 * A storage in the layout before OCFL is refused at start-up, naming `preservd migrate`. And
 * the pieces on their own: the root files written whole and only once; an assembly rolled back.
 */
import { spawn } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { REPOSITORY_RECORD } from '../../src/ocfl/record.js';
import { INVENTORY_TYPE, layoutFiles, packageObjectPath } from '../../src/ocfl/layout.js';
import { firstInventory } from '../../src/ocfl/inventory.js';
import { assembleObject, commitObject, undoAssembly } from '../../src/storage/assembly.js';
import { DataLayout } from '../../src/storage/layout.js';
import { prepareStorageRoot } from '../../src/storage/ocfl-root.js';
import { Storage } from '../../src/storage/storage.js';
import { cliPath, DAEMON_NODE_OPTIONS, freePort, TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';
import { filesUnder } from '../helpers/walk.js';
import { node } from '../helpers/node.js';

const sha256 = (bytes: Buffer | string) => createHash('sha256').update(bytes).digest('hex');

/** `digest path` lines of a manifest, as path → digest. */
function manifestOf(file: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of readFileSync(file, 'utf8').split('\n').filter(Boolean)) {
    const at = line.indexOf(' ');
    out.set(line.slice(at + 1).trim(), line.slice(0, at));
  }
  return out;
}

t.test('an ingest through the daemon and rsync leaves an OCFL object in an OCFL root', async (t) => {
  const d = await TestDaemon.start(t);
  const alice = d.addUser('alice');
  const before = Date.now();
  const payload = { 'a.txt': 'alpha\n', 'sub/b.bin': Buffer.alloc(70_000, 3), 'empty.dat': '' };
  // An empty folder (two deep) beside the files: OCFL content holds no folder without a file (E024).
  const ingested = await ingestBag(d, alice, payload, {
    contentType: 'digital',
    extraTagFiles: { 'notes/made-by.txt': 'a test\n' },
    beforeUpload: (dir) => mkdirSync(join(dir, 'data/nothing/here'), { recursive: true }),
  });
  const after = Date.now();
  const bagId = ingested.request.bag_id as string;
  const root = join(d.dataDir, 'storage');

  t.equal(readFileSync(join(root, '0=ocfl_1.1'), 'utf8'), 'ocfl_1.1\n', 'the root declaration');
  for (const { path, text } of layoutFiles()) t.equal(readFileSync(join(root, path), 'utf8'), text, path);
  const admin = (await d.request('GET', `/v1/packages/${bagId}`)).json;
  const objectDir = join(root, packageObjectPath(bagId));
  t.equal(admin.storage_location, objectDir, 'storage_location is the object folder');
  t.same(
    // The repository's record (storage/record-writer.ts) is written within seconds of a change.
    readdirSync(root)
      .filter((name) => name !== REPOSITORY_RECORD)
      .sort(),
    ['0=ocfl_1.1', 'extensions', 'ocfl_layout.json', packageObjectPath(bagId).split('/')[0]].sort(),
    'nothing else in the root (the repository record aside)',
  );

  t.equal(readFileSync(join(objectDir, '0=ocfl_object_1.1'), 'utf8'), 'ocfl_object_1.1\n');
  const json = readFileSync(join(objectDir, 'inventory.json'));
  t.ok(json.equals(readFileSync(join(objectDir, 'v1/inventory.json'))), 'root and v1 inventories identical');
  for (const dir of [objectDir, join(objectDir, 'v1')])
    t.equal(
      readFileSync(join(dir, 'inventory.json.sha256'), 'utf8'),
      `${sha256(json)} inventory.json\n`,
      `${dir}: the sidecar is the inventory's sha256`,
    );
  t.same(readdirSync(objectDir).sort(), [
    '0=ocfl_object_1.1',
    'inventory.json',
    'inventory.json.sha256',
    'v1',
  ]);
  t.same(readdirSync(join(objectDir, 'v1')).sort(), ['content', 'inventory.json', 'inventory.json.sha256']);

  const inventory = JSON.parse(json.toString('utf8'));
  t.equal(inventory.id, `urn:uuid:${bagId}`);
  t.equal(inventory.type, INVENTORY_TYPE);
  t.equal(inventory.digestAlgorithm, 'sha256');
  t.equal(inventory.head, 'v1');
  t.same(Object.keys(inventory.versions), ['v1']);
  const v1 = inventory.versions.v1;
  t.equal(v1.message, 'deposit');
  t.same(v1.user, { name: 'alice', address: 'urn:preservd:user:alice' });
  const created = Date.parse(v1.created);
  t.ok(created >= before - 1000 && created <= after + 1000, `created ${v1.created} is the ingest's date`);

  // The content: byte for byte the upload, every file in the manifest under its sha256.
  const content = join(objectDir, 'v1/content');
  const uploaded = filesUnder(ingested.bagDir);
  t.same(filesUnder(content), uploaded, 'v1/content holds exactly the files of the upload');
  t.notOk(existsSync(join(content, 'data/nothing')), 'the empty folder is not stored');
  const manifest = new Map<string, string>();
  for (const [digest, paths] of Object.entries(inventory.manifest as Record<string, string[]>))
    for (const path of paths) manifest.set(path, digest);
  t.same(
    [...manifest.keys()].sort(),
    uploaded.map((p) => `v1/content/${p}`).sort(),
    'the manifest: every file',
  );
  const state = new Map<string, string>();
  for (const [digest, paths] of Object.entries(v1.state as Record<string, string[]>))
    for (const path of paths) state.set(path, digest);
  for (const path of uploaded) {
    const bytes = readFileSync(join(content, path));
    if (!bytes.equals(readFileSync(join(ingested.bagDir, path)))) t.fail(`${path} differs from the upload`);
    if (manifest.get(`v1/content/${path}`) !== sha256(bytes)) t.fail(`${path}: manifest digest`);
    if (state.get(path) !== sha256(bytes)) t.fail(`${path}: state digest`);
  }
  // The bag's own md5 digests (payload and tag manifests) are in the fixity block.
  const md5 = new Map<string, string>();
  for (const [digest, paths] of Object.entries(inventory.fixity.md5 as Record<string, string[]>))
    for (const path of paths) md5.set(path, digest);
  const bagMd5 = new Map([
    ...manifestOf(join(ingested.bagDir, 'manifest-md5.txt')),
    ...manifestOf(join(ingested.bagDir, 'tagmanifest-md5.txt')),
  ]);
  t.ok(bagMd5.size >= 6, 'the bag lists payload and tag files');
  for (const [path, digest] of bagMd5)
    t.equal(md5.get(`v1/content/${path}`), digest, `fixity md5 of ${path}`);

  const events = (await d.request('GET', `/v1/packages/${bagId}/events`)).json as any[];
  const validation = events.find((e) => e.type === 'validation');
  t.match(validation.detail, /data\/nothing.*: empty folder, not stored/, 'the validation warned');
  t.same(readdirSync(join(d.dataDir, 'staging')), [], 'staging is empty again');
});

/** `preservd serve` on a data directory that is refused: its exit code and what it said. */
async function serveRefused(dataDir: string): Promise<{ code: number | null; stderr: string }> {
  const proc = spawn(...node([...DAEMON_NODE_OPTIONS, cliPath, 'serve']), {
    env: {
      ...process.env,
      PRESERVD_DATA_DIR: dataDir,
      PRESERVD_HTTP_PORT: String(await freePort()),
      PRESERVD_RSYNC_PORT: String(await freePort()),
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  proc.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  const timer = setTimeout(() => proc.kill('SIGKILL'), 60_000);
  const code = await new Promise<number | null>((resolve) => proc.once('exit', resolve));
  clearTimeout(timer);
  return { code, stderr };
}

t.test('the daemon refuses a storage that is not an OCFL root, naming preservd migrate', async (t) => {
  const scratch = mkdtempSync(join(tmpdir(), 'preservd-unmigrated-'));
  t.teardown(() => rmSync(scratch, { recursive: true, force: true }));
  const id = randomUUID();
  // A repository of an earlier preservd: storage/ab/cd/ef/<bag_id>/.
  const old = join(scratch, 'old');
  const bag = join(old, 'storage', id.slice(0, 2), id.slice(2, 4), id.slice(4, 6), id);
  mkdirSync(join(bag, 'data'), { recursive: true });
  writeFileSync(join(bag, 'bagit.txt'), 'BagIt-Version: 1.0\nTag-File-Character-Encoding: UTF-8\n');
  const refused = await serveRefused(old);
  t.equal(refused.code, 1, 'the exit code of a start-up refusal');
  t.match(refused.stderr, /layout before OCFL/);
  t.match(refused.stderr, /preservd migrate/);
  t.same(readdirSync(join(old, 'storage')), [id.slice(0, 2)], 'nothing was written into the storage');
  t.same(filesUnder(join(old, 'storage')), [
    `${id.slice(0, 2)}/${id.slice(2, 4)}/${id.slice(4, 6)}/${id}/bagit.txt`,
  ]);

  // Anything else without a declaration, and an OCFL root with old folders beside its objects.
  const stray = join(scratch, 'stray');
  mkdirSync(join(stray, 'storage'), { recursive: true });
  writeFileSync(join(stray, 'storage', 'README'), 'hello\n');
  const strayRefused = await serveRefused(stray);
  t.equal(strayRefused.code, 1);
  t.match(strayRefused.stderr, /not an OCFL storage root.*preservd migrate/);
  t.notOk(existsSync(join(stray, 'storage', '0=ocfl_1.1')));

  writeFileSync(join(old, 'storage', '0=ocfl_1.1'), 'ocfl_1.1\n');
  const halfRefused = await serveRefused(old);
  t.equal(halfRefused.code, 1, 'old folders in a declared root: still refused');
  t.match(halfRefused.stderr, /preservd migrate/);
});

t.test('the root files: written whole from staging, once; an existing root completed', async (t) => {
  const layout = new DataLayout(join(t.testdir(), 'var'));
  await layout.ensure();
  await prepareStorageRoot(layout);
  const files = [
    '0=ocfl_1.1',
    'ocfl_layout.json',
    'extensions/0003-hash-and-id-n-tuple-storage-layout/config.json',
  ];
  t.same(filesUnder(layout.storage).sort(), files.sort());
  t.same(readdirSync(layout.staging), [], 'no temporary file left in staging');
  const layoutJson = JSON.parse(readFileSync(join(layout.storage, 'ocfl_layout.json'), 'utf8'));
  t.equal(layoutJson.extension, '0003-hash-and-id-n-tuple-storage-layout');

  // A crash after the declaration, before the rest: the next start writes what is missing.
  rmSync(join(layout.storage, 'extensions'), { recursive: true });
  writeFileSync(join(layout.storage, 'ocfl_layout.json'), 'kept as it is\n');
  await prepareStorageRoot(layout);
  t.same(filesUnder(layout.storage).sort(), files.sort());
  t.equal(
    readFileSync(join(layout.storage, 'ocfl_layout.json'), 'utf8'),
    'kept as it is\n',
    'never rewritten',
  );

  // Scratch files a crash left in staging go at the next start; uploads and assemblies stay.
  writeFileSync(layout.scratchFile('repair'), 'half');
  mkdirSync(join(layout.staging, `${randomUUID()}.object`));
  await layout.clearScratch();
  t.same(
    readdirSync(layout.staging).map((n) => n.endsWith('.object')),
    [true],
    'only the scratch file was removed',
  );
});

t.test('an assembly, and an object the catalog never called stored, roll back to staging', async (t) => {
  const layout = new DataLayout(join(t.testdir(), 'var'));
  await layout.ensure();
  await prepareStorageRoot(layout);
  const storage = new Storage(layout);
  const bagId = randomUUID();
  const staged = storage.stagingDir(bagId);
  mkdirSync(join(staged, 'data/empty'), { recursive: true });
  writeFileSync(join(staged, 'bagit.txt'), 'BagIt-Version: 1.0\n');
  writeFileSync(join(staged, 'data/a.txt'), 'a\n');
  const files = ['bagit.txt', 'data/a.txt'].map((path) => ({
    path,
    digests: { sha256: sha256(readFileSync(join(staged, path))) },
  }));
  const inventory = firstInventory(`urn:uuid:${bagId}`, files, { created: 0, user: 'u', message: 'deposit' });

  await assembleObject(storage, bagId, inventory);
  t.notOk(existsSync(staged), 'the upload is in the assembly');
  t.same(filesUnder(join(storage.assemblyDir(bagId), 'v1/content')), ['bagit.txt', 'data/a.txt']);
  await undoAssembly(storage, bagId);
  t.same(readdirSync(layout.staging), [bagId], 'the assembly is gone, the upload back');
  t.same(filesUnder(staged), ['bagit.txt', 'data/a.txt'], 'whole (its empty folder was dropped)');

  // The files hashed and flushed as they landed are not flushed again: asked by their path in the bag.
  const asked: Array<[string, string]> = [];
  await assembleObject(storage, bagId, inventory, (path, abs) => {
    asked.push([path, abs]);
    return path === 'data/a.txt';
  });
  const content = join(storage.assemblyDir(bagId), 'v1/content');
  t.same(
    asked.sort(),
    ['bagit.txt', 'data/a.txt'].map((path) => [path, join(content, path)]),
    'each content file asked once, by its path in the bag and where it is now',
  );
  await commitObject(storage, bagId);
  t.ok(existsSync(join(storage.objectDir(bagId), 'inventory.json')), 'renamed into the root');
  await undoAssembly(storage, bagId);
  t.notOk(existsSync(storage.objectDir(bagId)), 'out of the root again');
  t.same(filesUnder(staged), ['bagit.txt', 'data/a.txt'], 'and back in staging, whole');
  t.same(readdirSync(layout.staging), [bagId]);

  // A file the inventory does not list: refused, the upload left in the assembly to roll back.
  writeFileSync(join(staged, 'data/unlisted.txt'), 'x\n');
  await t.rejects(assembleObject(storage, bagId, inventory), /holds 3 files, its inventory lists 2/);
  t.notOk(existsSync(storage.objectDir(bagId)), 'nothing in the root');
});
