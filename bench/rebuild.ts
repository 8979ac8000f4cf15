/**
 * `preservd rebuild` of N packages (default 10,000) from the primary and from a Ceph (S3) replica,
 * beside the physical floor of a rebuild from the same root in the same run
 * (`node dist/bench/rebuild.js [--packages N] [--rounds 3] [--payload-kb 64] [--roots primary,ceph]
 * [--json]`; `--roots primary` needs no Ceph):
 *
 * - the repository is made as the daemon makes it, without N HTTP ingests: each package's bag is
 *   written by `makeBag` (a BagIt 1.0 bag, md5 and sha256 manifests, one payload file of
 *   `--payload-kb` KiB and one small text) into `staging/`, then recorded with the ingest's own
 *   catalog calls in its order (request, queue item, files staged, `validation` event, the object
 *   assembled and committed by `storage/assembly.ts` from `firstInventory`, then stored,
 *   `ingestion` event, queue item DONE; ingest/stages.ts); a few users and grants. Then a real
 *   daemon (`dist/src/cli.js serve`) starts on that data dir and its record writer writes every
 *   `logs/` record; the bench waits until every object has its events record, stops the daemon
 *   and drops its catalog (not timed). The Ceph root is then the primary root's files copied by
 *   `rclone copy` (the files the replicator writes, at the gateway's full rate; the default), or
 *   with `--ceph-copy daemon` the daemon's own replicator fills it, with its `replication`
 *   events, verifying each copy (~4 packages/s here: 40 minutes for 10,000);
 * - per root and round: `runRebuild` (the command `preservd rebuild --from NAME`, in this process,
 *   into an empty catalog, deleted after) with `--no-verify` and with the default verify, each
 *   checked to have rebuilt all N; and the floors, plain reads of 8 objects at once as the
 *   rebuild reads them (node:fs for the primary, the AWS SDK's GetObject for Ceph; one listing of
 *   the root first): `inventories` reads every object's `inventory.json` and its sidecar and the two
 *   `logs/` records, checks the sidecar's sha256 and parses the three JSON files; `bytes` adds
 *   every content file read once (what `--no-verify` reads too, for the CRC-32 the zip download
 *   needs); `hashed` adds every content file's sha256 and md5 (the digests the inventory lists);
 *   `commits` is N LMDB transactions of 4 KB each, synced on commit (a rebuild writes each
 *   package in one, so that a kill loses nothing done). For Ceph the floor's client makes a
 *   connection per request (a kept-alive one waits ~40 ms for the delayed ACK on each small
 *   object: docs/performance.md, "Replication").
 *
 * Printed: packages per second, and ratios to the floors (median of the per-round ratios, the
 * order rotated each round). Ceph runs on memstore (test/helpers/ceph.ts); everything is made
 * under the OS temporary folder and deleted at the end.
 */
import { CreateBucketCommand, GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { Agent as HttpAgent } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { open } from 'lmdb';
import pLimit from 'p-limit';
import { Catalog } from '../src/catalog/catalog.js';
import { runRebuild } from '../src/commands/rebuild.js';
import { loadConfig } from '../src/config/config.js';
import { newCapability } from '../src/ingest/capability.js';
import { firstInventory } from '../src/ocfl/inventory.js';
import { objectIdOf } from '../src/ocfl/layout.js';
import { assembleObject, commitObject } from '../src/storage/assembly.js';
import { DataLayout } from '../src/storage/layout.js';
import { prepareStorageRoot } from '../src/storage/ocfl-root.js';
import { Storage } from '../src/storage/storage.js';
import { startCeph, type Ceph } from '../test/helpers/ceph.js';
import { TestDaemon } from '../test/helpers/daemon.js';
import { makeBag } from '../test/helpers/make-bag.js';
import { fileRecordOf } from '../test/helpers/stored-package.js';
import { filesUnder } from '../test/helpers/walk.js';
import { rcloneEnv } from './lib/rclone.js';
import { median, range } from './stats.js';

const USAGE =
  'usage: rebuild.js [--packages 10000] [--rounds 3] [--payload-kb 64] [--roots primary,ceph] [--ceph-copy rclone|daemon] [--json]';
const BUCKET = 'bench';
const PREFIX = 'preservd/';
/** Objects read at once, by the floors as by the rebuild (storage/rebuild.ts, READ_AHEAD). */
const READ_AHEAD = 8;
const TYPES = ['audio', 'video', 'digital'];
const USERS = ['alice', 'bob', 'dana'];

interface Options {
  packages: number;
  rounds: number;
  payloadKB: number;
  json: boolean;
  roots: string[];
  /** Who fills the Ceph root: rclone copying the primary root's files, or the daemon's replicator. */
  cephCopy: 'rclone' | 'daemon';
}

function parseArgs(argv: string[]): Options {
  const o: Options = {
    packages: 10_000,
    rounds: 3,
    payloadKB: 64,
    json: false,
    roots: ['primary', 'ceph'],
    cephCopy: 'rclone',
  };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--json') o.json = true;
    else if (argv[i] === '--packages') o.packages = Number(argv[++i]);
    else if (argv[i] === '--rounds') o.rounds = Number(argv[++i]);
    else if (argv[i] === '--payload-kb') o.payloadKB = Number(argv[++i]);
    else if (argv[i] === '--roots') o.roots = (argv[++i] ?? '').split(',');
    else if (argv[i] === '--ceph-copy') {
      const how = argv[++i];
      if (how !== 'rclone' && how !== 'daemon')
        throw new Error(`--ceph-copy takes rclone or daemon; ${USAGE}`);
      o.cephCopy = how;
    } else throw new Error(`unknown argument ${argv[i]}; ${USAGE}`);
  }
  if (o.roots.length === 0 || o.roots.some((r) => r !== 'primary' && r !== 'ceph'))
    throw new Error(`--roots takes primary, ceph or both (primary,ceph); ${USAGE}`);
  for (const [name, n] of [
    ['--packages', o.packages],
    ['--rounds', o.rounds],
    ['--payload-kb', o.payloadKB],
  ] as const)
    if (!(Number.isInteger(n) && n >= 1)) throw new Error(`${name} must be an integer ≥ 1; ${USAGE}`);
  return o;
}

/** Teardowns of what the run started (Ceph, the daemon), run at its end, last first. */
class Scope {
  private readonly fns: Array<() => unknown> = [];
  teardown(fn: () => unknown): void {
    this.fns.push(fn);
  }
  async end(): Promise<void> {
    for (const fn of this.fns.reverse()) await fn();
  }
}

// ---------------------------------------------------------------- the repository

/** One package as the ingest stores it (ingest/stages.ts: stage, validate, store, record the result). */
async function ingestOne(catalog: Catalog, storage: Storage, i: number, payload: Buffer): Promise<void> {
  const bagId = randomUUID();
  const user = USERS[i % USERS.length]!;
  const created = catalog.packages.create({
    bagId,
    externalId: `bench-${i}`,
    contentType: TYPES[i % TYPES.length]!,
    user,
    capability: newCapability(),
  });
  if ('existing' in created) throw new Error(`package ${bagId} exists`);
  const queued = catalog.queue.enqueue(bagId, user);
  if ('existing' in queued) throw new Error(`a queue item of ${bagId} exists`);
  const item = queued.created;
  const staged = storage.stagingDir(bagId);
  await makeBag(staged, {
    files: { [`masters/tape-${i}.wav`]: payload, 'notes.txt': `package ${i}, ${bagId}\n` },
  });
  catalog.queue.advance(item.id, 'staged');
  const files = await Promise.all(filesUnder(staged).map((p) => fileRecordOf(staged, p, ['md5', 'sha256'])));
  catalog.files.unstage(bagId);
  const total = catalog.files.stageBatch(bagId, files);
  const payloadBytes = payload.length + Buffer.byteLength(`package ${i}, ${bagId}\n`);
  catalog.transaction(() => {
    catalog.files.staged(bagId, total);
    catalog.events.add({
      bagId,
      type: 'validation',
      executor: user,
      outcome: 'success',
      detail: `valid BagIt 1.0 bag: 2 payload files, ${payloadBytes} bytes, md5, sha256 manifests`,
    });
    catalog.queue.advance(item.id, 'validated');
  });
  const versionFiles = files.map((f) => ({
    path: f.path,
    digests: { ...f.digests, sha256: f.digests.sha256! },
  }));
  const inventory = firstInventory(objectIdOf(bagId), versionFiles, {
    created: Date.now(),
    user,
    message: 'deposit',
  });
  await assembleObject(storage, bagId, inventory);
  await commitObject(storage, bagId);
  const storagePath = Storage.storagePath(bagId);
  catalog.transaction(() => {
    catalog.packages.markStored(bagId, storagePath);
    catalog.events.add({
      bagId,
      type: 'ingestion',
      executor: user,
      outcome: 'success',
      detail: `stored at ${storagePath}`,
    });
    catalog.queue.finish(item.id, { status: 'DONE' });
  });
}

/** The data dir's catalog and primary root with `o.packages` stored packages, users and grants. */
async function buildPrimary(dataDir: string, o: Options): Promise<void> {
  const layout = new DataLayout(dataDir);
  await layout.ensure();
  await prepareStorageRoot(layout);
  const catalog = Catalog.open(layout);
  const storage = new Storage(layout);
  try {
    // The first admin as the daemon's first start makes it (daemon.ts, ensureFirstAdmin).
    catalog.users.add('admin', true);
    writeFileSync(layout.adminToken, `${catalog.users.issueToken('admin').secret}\n`, { mode: 0o600 });
    for (const name of USERS) catalog.users.add(name, false);
    catalog.grants.grant('alice', 'content_manager', 'video', TYPES);
    catalog.grants.grant('bob', 'viewer', 'all', TYPES);
    const pool = randomBytes(o.payloadKB * 1024 + 4096);
    const started = performance.now();
    for (let i = 0; i < o.packages; i++) {
      await ingestOne(catalog, storage, i, pool.subarray(i % 4096, (i % 4096) + o.payloadKB * 1024));
      if (!o.json && (i + 1) % 2000 === 0)
        console.log(`  … ${i + 1} packages stored (${((performance.now() - started) / 1000).toFixed(0)} s)`);
    }
  } finally {
    await catalog.close();
  }
}

/**
 * The floor's client: a connection per request, as the daemon's read-backs make them (replicas/
 * http-digest.ts), since on a kept-alive one each small object waits ~40 ms for the delayed ACK.
 */
function s3Client(ceph: Ceph): S3Client {
  return new S3Client({
    endpoint: ceph.endpoint,
    requestHandler: { httpAgent: new HttpAgent({ keepAlive: false }) },
    region: ceph.region,
    forcePathStyle: true,
    credentials: { accessKeyId: ceph.accessKeyId, secretAccessKey: ceph.secretAccessKey },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
}

/** Every key under the prefix with its size, in the bucket's order. */
async function listAll(s3: S3Client): Promise<Array<{ key: string; size: number }>> {
  const keys: Array<{ key: string; size: number }> = [];
  let token: string | undefined;
  do {
    const page = await s3.send(
      new ListObjectsV2Command({ Bucket: BUCKET, Prefix: PREFIX, ContinuationToken: token }),
    );
    for (const o of page.Contents ?? []) keys.push({ key: o.Key!.slice(PREFIX.length), size: o.Size ?? 0 });
    token = page.NextContinuationToken;
  } while (token !== undefined);
  return keys;
}

/** Where the daemon's records of every object are counted: the primary's folder, or the bucket. */
type RecordsIn = () => Promise<number>;

const EVENTS_KEY = /^[0-9a-f]{3}\/[0-9a-f]{3}\/[0-9a-f]{3}\/[^/]+\/logs\/preservd-events\.json$/;

/**
 * A daemon on the data dir, with the Ceph replica when there is one: it copies every package and
 * writes every record; stopped once every copy is verified and every object has its events record.
 */
async function runDaemon(
  scope: Scope,
  dataDir: string,
  replica: object | undefined,
  records: RecordsIn,
  o: Options,
) {
  const started = performance.now();
  const d = await TestDaemon.start(scope, {
    dataDir,
    keepDataDir: true,
    config: { replicas: replica ? [replica] : [], storage: { recordDelayMs: 100 }, logLevel: 'warn' },
  });
  for (let last = ''; replica !== undefined; await sleep(2000)) {
    const res = await fetch(`${d.url}/metrics`, { headers: { authorization: `Bearer ${d.adminToken}` } });
    const text = await res.text();
    const count = (status: string) =>
      Number(
        new RegExp(`preservd_replica_copies\\{[^}]*status="${status}"[^}]*\\} (\\d+)`).exec(text)?.[1] ?? 0,
      );
    const now = `${count('verified')} verified, ${count('failed')} failed`;
    if (!o.json && now !== last) console.log(`  … copies on Ceph: ${now}`);
    last = now;
    if (count('verified') === o.packages) break;
  }
  while ((await records()) !== o.packages) await sleep(2000);
  const code = await d.stop();
  if (code !== 0) throw new Error(`the daemon exited with ${code}:\n${d.output.slice(-3000)}`);
  return (performance.now() - started) / 1000;
}

// ---------------------------------------------------------------- the floors

type FloorKind = 'inventories' | 'bytes' | 'hashed';
/** An object's root inventory: layout 0003's three tuples of three hex digits, the encoded id, `inventory.json`. */
const OBJECT_INVENTORY = /^([0-9a-f]{3}\/[0-9a-f]{3}\/[0-9a-f]{3}\/[^/]+)\/inventory\.json$/;

/** A root read plainly: every file's path under the root with its size, and a file's bytes. */
interface PlainRoot {
  list(): Promise<Array<{ key: string; size: number }>>;
  read(key: string): Promise<Buffer>;
}

function dirRoot(root: string): PlainRoot {
  return {
    list: async () =>
      (await readdir(root, { recursive: true, withFileTypes: true }))
        .filter((e) => e.isFile())
        .map((e) => ({ key: join(e.parentPath, e.name).slice(root.length + 1), size: 0 })),
    read: (key) => readFile(join(root, key)),
  };
}

function s3Root(s3: S3Client): PlainRoot {
  return {
    list: () => listAll(s3),
    read: async (key) => {
      const res = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: PREFIX + key }));
      return Buffer.from(await res.Body!.transformToByteArray());
    },
  };
}

/** The floor of one kind: seconds to read (and check, and hash) what it names, 8 objects at once as the rebuild reads them. */
async function floor(root: PlainRoot, kind: FloorKind): Promise<{ seconds: number; objects: number }> {
  const started = performance.now();
  const keys = await root.list();
  const objects = keys.flatMap((k) => OBJECT_INVENTORY.exec(k.key)?.[1] ?? []);
  const limit = pLimit(READ_AHEAD);
  await Promise.all(objects.map((object) => limit(() => readObjectPlainly(root, object, kind))));
  return { seconds: (performance.now() - started) / 1000, objects: objects.length };
}

async function readObjectPlainly(root: PlainRoot, object: string, kind: FloorKind): Promise<void> {
  const json = await root.read(`${object}/inventory.json`);
  const sidecar = (await root.read(`${object}/inventory.json.sha256`)).toString();
  if (!sidecar.startsWith(createHash('sha256').update(json).digest('hex')))
    throw new Error(`${object}: the sidecar does not match`);
  const inventory = JSON.parse(json.toString()) as { manifest: Record<string, string[]> };
  JSON.parse((await root.read(`${object}/logs/preservd-package.json`)).toString());
  JSON.parse((await root.read(`${object}/logs/preservd-events.json`)).toString());
  if (kind === 'inventories') return;
  for (const [digest, [path]] of Object.entries(inventory.manifest)) {
    const bytes = await root.read(`${object}/${path}`);
    if (kind === 'hashed') {
      if (createHash('sha256').update(bytes).digest('hex') !== digest) throw new Error(`${path} differs`);
      createHash('md5').update(bytes).digest('hex');
    }
  }
}

/**
 * The floor of a durable write per package: N LMDB transactions (lmdb, as the catalog opens it),
 * each putting 4 KB (about a small package's records) and synced on commit, in a folder of its own.
 */
function commitsFloor(n: number): number {
  const dir = mkdtempSync(join(tmpdir(), 'preservd-bench-rebuild-lmdb-'));
  try {
    const root = open({ path: dir, maxDbs: 64, compression: false });
    const value = randomBytes(4096);
    const started = performance.now();
    for (let i = 0; i < n; i++) root.transactionSync(() => root.putSync(`package-${i}`, value));
    const seconds = (performance.now() - started) / 1000;
    void root.close();
    return seconds;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------- the rebuild

const sink = () =>
  new Writable({
    write(chunk: Buffer, _enc, done) {
      sink.text += chunk.toString();
      done();
    },
  });
sink.text = '';

/** `preservd rebuild --from NAME [--no-verify]` into an empty catalog under `dataDir`, deleted after: seconds. */
async function rebuild(configPath: string, dataDir: string, from: string, verify: boolean, n: number) {
  const config = loadConfig({ PRESERVD_CONFIG: configPath, PRESERVD_DATA_DIR: dataDir });
  const catalogDir = new DataLayout(dataDir).catalog;
  rmSync(catalogDir, { recursive: true, force: true });
  sink.text = '';
  const started = performance.now();
  const code = await runRebuild(
    ['--from', from, ...(verify ? [] : ['--no-verify'])],
    { stdout: sink(), stderr: sink() },
    config,
  );
  const seconds = (performance.now() - started) / 1000;
  rmSync(catalogDir, { recursive: true, force: true });
  if (code !== 0 || !sink.text.includes(`rebuilt ${n} packages`))
    throw new Error(`rebuild --from ${from} exited with ${code}: ${sink.text.slice(0, 2000)}`);
  return seconds;
}

// ---------------------------------------------------------------- the run

interface Round {
  rebuild: number;
  rebuildNoVerify: number;
  inventories: number;
  bytes: number;
  hashed: number;
  commits: number;
}

type Measure = () => Promise<[keyof Round, number]>;

async function rounds(measures: Measure[], o: Options, label: string): Promise<Round[]> {
  const out: Round[] = [];
  for (let r = 0; r < o.rounds; r++) {
    const round = {} as Round;
    for (let m = 0; m < measures.length; m++) {
      const [key, seconds] = await measures[(m + r) % measures.length]!();
      round[key] = seconds;
    }
    out.push(round);
    if (!o.json)
      console.log(
        `  ${label} round ${r + 1}: ${Object.entries(round)
          .map(([k, s]) => `${k} ${s.toFixed(2)} s`)
          .join(', ')}`,
      );
  }
  return out;
}

function measuresOf(root: PlainRoot, run: (verify: boolean) => Promise<number>, n: number): Measure[] {
  const checked = async (kind: FloorKind): Promise<[keyof Round, number]> => {
    const f = await floor(root, kind);
    if (f.objects !== n) throw new Error(`the ${kind} floor found ${f.objects} objects, not ${n}`);
    return [kind, f.seconds];
  };
  return [
    () => checked('inventories'),
    async () => ['rebuildNoVerify', await run(false)],
    () => checked('bytes'),
    async () => ['rebuild', await run(true)],
    () => checked('hashed'),
    async () => ['commits', commitsFloor(n)],
  ];
}

function summary(rs: Round[], n: number) {
  const ratio = (a: keyof Round, b: keyof Round) => rs.map((r) => r[a] / r[b]);
  return {
    seconds: Object.fromEntries(
      (['rebuildNoVerify', 'rebuild', 'inventories', 'bytes', 'hashed', 'commits'] as const).map((k) => [
        k,
        median(rs.map((r) => r[k])),
      ]),
    ),
    packagesPerSecond: {
      noVerify: median(rs.map((r) => n / r.rebuildNoVerify)),
      verify: median(rs.map((r) => n / r.rebuild)),
      inventoriesFloor: median(rs.map((r) => n / r.inventories)),
    },
    ratios: {
      noVerifyToInventories: range(ratio('rebuildNoVerify', 'inventories'), 2),
      noVerifyToBytes: range(ratio('rebuildNoVerify', 'bytes'), 2),
      verifyToHashed: range(ratio('rebuild', 'hashed'), 2),
      verifyToInventories: range(ratio('rebuild', 'inventories'), 2),
      noVerifyToBytesAndCommits: range(
        rs.map((r) => r.rebuildNoVerify / (r.bytes + r.commits)),
        2,
      ),
      verifyToHashedAndCommits: range(
        rs.map((r) => r.rebuild / (r.hashed + r.commits)),
        2,
      ),
    },
  };
}

function print(name: string, s: ReturnType<typeof summary>): void {
  const pps = s.packagesPerSecond;
  console.log(`${name}:`);
  console.log(
    `  rebuild --no-verify: ${pps.noVerify.toFixed(0)} packages/s; floors: inventories ${pps.inventoriesFloor.toFixed(0)} packages/s`,
  );
  console.log(`  rebuild (verify):    ${pps.verify.toFixed(0)} packages/s`);
  console.log(`  --no-verify / inventories floor: ${s.ratios.noVerifyToInventories}`);
  console.log(`  --no-verify / bytes floor:       ${s.ratios.noVerifyToBytes}`);
  console.log(`  verify / hashed floor:           ${s.ratios.verifyToHashed}`);
  console.log(`  verify / inventories floor:      ${s.ratios.verifyToInventories}`);
  console.log(
    `  --no-verify / (bytes + one synced commit per package): ${s.ratios.noVerifyToBytesAndCommits}`,
  );
  console.log(
    `  verify / (hashed + one synced commit per package):     ${s.ratios.verifyToHashedAndCommits}`,
  );
}

async function main(): Promise<void> {
  const o = parseArgs(process.argv.slice(2));
  const scope = new Scope();
  const scratch = mkdtempSync(join(tmpdir(), 'preservd-bench-rebuild-'));
  scope.teardown(() => rmSync(scratch, { recursive: true, force: true }));
  // Stopped early (Ctrl-C, kill), it still deletes what it made.
  for (const signal of ['SIGINT', 'SIGTERM'] as const)
    process.once(signal, () => void scope.end().finally(() => process.exit(130)));
  try {
    const ceph = o.roots.includes('ceph') ? await cephReplica(scope) : undefined;
    const dataDir = join(scratch, 'data');
    const configPath = join(scratch, 'config.json');
    writeFileSync(configPath, JSON.stringify({ replicas: ceph ? [ceph.replica] : [], logLevel: 'warn' }));
    let started = performance.now();
    await buildPrimary(dataDir, o);
    const built = (performance.now() - started) / 1000;
    const primaryRoot = dirRoot(new DataLayout(dataDir).storage);
    const byDaemon = ceph !== undefined && o.cephCopy === 'daemon';
    const records = async () =>
      (await (byDaemon ? s3Root(ceph.s3) : primaryRoot).list()).filter((k) => EVENTS_KEY.test(k.key)).length;
    const daemon = await runDaemon(scope, dataDir, byDaemon ? ceph.replica : undefined, records, o);
    const copied =
      ceph !== undefined && !byDaemon ? rcloneCopy(new DataLayout(dataDir).storage, ceph.replica) : 0;
    if (!o.json)
      console.log(
        `${o.packages} packages (${o.payloadKB} KiB payload each) stored in ${built.toFixed(0)} s; the daemon wrote their records${byDaemon ? ' and copied them to Ceph' : ''} in ${daemon.toFixed(0)} s${copied > 0 ? `; rclone copied the root to Ceph in ${copied.toFixed(0)} s` : ''}; load ${loadavg()[0]!.toFixed(1)}`,
      );
    started = performance.now();
    const result: Record<string, unknown> = {
      packages: o.packages,
      payloadKB: o.payloadKB,
      rounds: o.rounds,
    };
    if (o.roots.includes('primary')) {
      const run = (verify: boolean) => rebuild(configPath, dataDir, 'primary', verify, o.packages);
      result.primary = summary(
        await rounds(measuresOf(primaryRoot, run, o.packages), o, 'primary'),
        o.packages,
      );
    }
    if (ceph !== undefined) {
      const run = (verify: boolean) =>
        rebuild(configPath, join(scratch, 'from-ceph'), 'ceph', verify, o.packages);
      result.ceph = summary(
        await rounds(measuresOf(s3Root(ceph.s3), run, o.packages), o, 'ceph'),
        o.packages,
      );
    }
    result.load = loadavg()[0] ?? 0;
    if (o.json) console.log(JSON.stringify(result));
    else {
      if (result.primary) print('from the primary', result.primary as ReturnType<typeof summary>);
      if (result.ceph) print('from Ceph (S3)', result.ceph as ReturnType<typeof summary>);
      console.log(
        `load ${(result.load as number).toFixed(1)} at the end (${((performance.now() - started) / 1000).toFixed(0)} s measured)`,
      );
    }
  } finally {
    await scope.end();
  }
}

/**
 * Seconds to copy the primary root's files into the replica's bucket and prefix with rclone: the
 * same files the replicator writes (replicas/object-files.ts), made here at the gateway's full
 * rate rather than the replicator's verified one (that copy is bench/replicate's measure).
 */
function rcloneCopy(root: string, replica: CephReplica): number {
  const env = rcloneEnv(replica);
  const started = performance.now();
  const run = spawnSync(
    'rclone',
    ['copy', root, `:s3:${BUCKET}/${PREFIX}`, '--transfers', '32', '--checkers', '32'],
    { env, encoding: 'utf8' },
  );
  if (run.status !== 0) throw new Error(`rclone copy failed (${run.status}): ${run.stderr}`);
  return (performance.now() - started) / 1000;
}

interface CephReplica {
  name: string;
  kind: 's3';
  endpoint: string;
  bucket: string;
  region: string;
  prefix: string;
  forcePathStyle: boolean;
  accessKeyId: string;
  secretAccessKey: string;
}

/** A Ceph of its own (memstore), its bucket, a client, and the replica's configuration entry. */
async function cephReplica(scope: Scope): Promise<{ s3: S3Client; replica: CephReplica }> {
  const ceph = await startCeph(scope);
  const s3 = s3Client(ceph);
  scope.teardown(() => s3.destroy());
  await s3.send(new CreateBucketCommand({ Bucket: BUCKET }));
  const replica: CephReplica = {
    name: 'ceph',
    kind: 's3',
    endpoint: ceph.endpoint,
    bucket: BUCKET,
    region: ceph.region,
    prefix: PREFIX,
    forcePathStyle: true,
    accessKeyId: ceph.accessKeyId,
    secretAccessKey: ceph.secretAccessKey,
  };
  return { s3, replica };
}

await main();
