/**
 * kill -9 at every step boundary of a revision's ingest (failpoints), then a restart on the same
 * data directory: the revision ends stored as version 2 (the object valid, its root inventory the
 * head's, only the new bytes in v2) or, for an invalid one, failed with the package still at
 * version 1 and the upload back whole under a new link. Nothing is left in staging.
 */
import { randomUUID } from 'node:crypto';
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { fsReader, validateObject } from '../../src/ocfl/validate/index.js';
import { packageObjectPath } from '../../src/ocfl/layout.js';
import { rsyncUpload, TestDaemon } from '../helpers/daemon.js';
import { assertInvariants } from '../helpers/invariants.js';
import { makeBag, writeManifests } from '../helpers/make-bag.js';
import { filesUnder } from '../helpers/walk.js';

const scratch = mkdtempSync(join(tmpdir(), 'preservd-revision-crash-'));
t.teardown(() => rmSync(scratch, { recursive: true, force: true }));

interface Scenario {
  name: string;
  failpoint: string;
  broken?: boolean;
}

/** A stored package with a revision open and its corrected bag uploaded, the daemon stopped. */
async function revisionUploaded(t: Test, dataDir: string, broken: boolean) {
  const d = await TestDaemon.start(t, { dataDir, keepDataDir: true });
  const bagId = randomUUID();
  const req = await d.createRequest(d.adminToken, {
    bag_id: bagId,
    external_id: `rc-${bagId.slice(0, 8)}`,
    content_type: 'video',
  });
  const bagDir = join(scratch, bagId);
  await makeBag(bagDir, {
    files: { 'a.txt': 'first\n', 'b.txt': 'kept\n', 'x/y.bin': Buffer.alloc(100_000, 1) },
    chipmunkInfo: { externalId: req.external_id, bagId, contentType: 'video' },
  });
  t.equal(rsyncUpload(bagDir, req.upload_link).code, 0);
  const done = await d.request('POST', `/v1/requests/${bagId}/complete`);
  t.equal((await d.waitForQueueItem(done.json.id)).status, 'DONE');
  const opened = await d.request('POST', `/v1/packages/${bagId}/revisions`, { json: { note: 'fix a' } });
  t.equal(opened.status, 201);
  writeFileSync(join(bagDir, 'data', 'a.txt'), 'FIRST\n');
  writeFileSync(join(bagDir, 'data', 'x', 'new.txt'), 'added\n');
  const info = join(bagDir, 'bag-info.txt');
  writeFileSync(info, readFileSync(info, 'utf8').replace(/Payload-Oxum: .*/, 'Payload-Oxum: 100017.4'));
  await writeManifests(bagDir);
  if (broken) writeFileSync(join(bagDir, 'data', 'b.txt'), 'KEPT\n'); // after the manifests: a mismatch
  // rsync's quick check compares whole seconds: a file changed within the second of its first
  // upload, at the same size (a.txt, bag-info.txt, b.txt), would not be sent again.
  const later = new Date(Date.now() + 5_000);
  const manifests = readdirSync(bagDir).filter((name) => name.includes('manifest-'));
  for (const path of ['data/a.txt', 'data/b.txt', 'data/x/new.txt', 'bag-info.txt', ...manifests])
    utimesSync(join(bagDir, path), later, later);
  t.equal(rsyncUpload(bagDir, opened.json.upload_link).code, 0);
  await d.stop();
  return { bagId, bagDir, capability: opened.json.upload_link.split('/').at(-2) as string };
}

async function crashAndRecover(t: Test, s: Scenario): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'preservd-revision-crashdata-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const { bagId, bagDir, capability } = await revisionUploaded(t, dataDir, s.broken === true);
  const dying = await TestDaemon.start(t, {
    dataDir,
    keepDataDir: true,
    env: { PRESERVD_FAILPOINT: s.failpoint },
  });
  const complete = await dying.request('POST', `/v1/packages/${bagId}/revisions/2/complete`);
  t.equal(complete.status, 201);
  t.ok(await dying.exitsWithin(30_000), `the daemon died at ${s.failpoint}`);
  await dying.kill9();

  const d = await TestDaemon.start(t, { dataDir, keepDataDir: true });
  const item = await d.waitForQueueItem(complete.json.id);
  const pkg = (await d.request('GET', `/v1/packages/${bagId}`)).json;
  const object = join(dataDir, 'storage', packageObjectPath(bagId));
  const report = await validateObject(fsReader(object), '', { digests: true });
  t.equal(report.valid, true, `a valid object: ${JSON.stringify(report.problems ?? report)}`);
  const rootInventory = JSON.parse(readFileSync(join(object, 'inventory.json'), 'utf8'));
  if (s.broken === true) {
    t.equal(item.status, 'FAILED');
    t.ok(
      item.errors.some((e: any) => e.path === 'data/b.txt'),
      item.error,
    );
    t.equal(pkg.version, 1, 'still version 1');
    t.equal(rootInventory.head, 'v1');
    t.notOk(existsSync(join(object, 'v2')), 'no v2');
    const revision = (await d.request('GET', `/v1/packages/${bagId}/revisions/2`)).json;
    t.equal(revision.status, 'open');
    const fresh = revision.upload_link.split('/').at(-2);
    t.not(fresh, capability, 'under a new link');
    t.same(filesUnder(join(dataDir, 'landing', fresh)), filesUnder(bagDir), 'the upload is back, whole');
    await d.stop();
    nothingInStaging(t, dataDir);
    await assertInvariants(t, dataDir, 'the invariants hold at v1, the revision open again');
    return;
  }
  t.equal(item.status, 'DONE', JSON.stringify(item));
  t.equal(pkg.version, 2);
  t.equal(rootInventory.head, 'v2');
  t.equal(
    readFileSync(join(object, 'inventory.json'), 'utf8'),
    readFileSync(join(object, 'v2', 'inventory.json'), 'utf8'),
  );
  t.same(
    filesUnder(join(object, 'v2', 'content')).filter((p) => p.startsWith('data/')),
    ['data/a.txt', 'data/x/new.txt'],
    'only the new bytes in v2',
  );
  t.equal((await d.request('GET', `/v1/packages/${bagId}/a.txt`)).text, 'FIRST\n');
  t.equal((await d.request('GET', `/v1/packages/${bagId}/versions/1/a.txt`)).text, 'first\n');
  t.equal((await d.request('GET', `/v1/packages/${bagId}/b.txt`)).text, 'kept\n');
  const ingestions = ((await d.request('GET', `/v1/packages/${bagId}/events`)).json as any[]).filter(
    (e) => e.type === 'ingestion' && /^version 2/.test(e.detail),
  );
  t.equal(ingestions.length, 1, 'one ingestion event for version 2');
  t.notOk(existsSync(join(dataDir, 'landing', capability)), 'the upload is gone');
  await d.stop();
  nothingInStaging(t, dataDir);
  await assertInvariants(t, dataDir, 'the invariants hold over v1 and v2');
}

/** Checked once the restarted daemon has stopped: while it runs, its record writer may hold a temporary file there. */
function nothingInStaging(t: Test, dataDir: string): void {
  t.same(readdirSync(join(dataDir, 'staging')), [], 'nothing left in staging');
}

const scenarios: Scenario[] = [
  { name: 'after staging', failpoint: 'ingest:after-stage' },
  { name: 'after the intent', failpoint: 'ingest:after-intent' },
  { name: 'with new content moved into the assembly', failpoint: 'revision:in-assembly' },
  { name: 'after the version is assembled, before it is moved in', failpoint: 'revision:after-assembly' },
  { name: 'with v2 in the object, before the root inventory', failpoint: 'revision:after-version' },
  { name: 'between the root inventory and its sidecar', failpoint: 'revision:between-inventories' },
  { name: 'after the commit, before the clean-up', failpoint: 'revision:after-commit' },
  { name: 'before the catalog result', failpoint: 'ingest:after-store' },
  { name: 'an invalid revision, after it was given back', failpoint: 'ingest:after-return', broken: true },
];

// 9 daemons killed and restarted, one after another: ~4 minutes alone, over the suite's 10-minute
// limit once at load ~20 (stress beside the suite), so this file gets 20.
t.setTimeout(1_200_000);
for (const s of scenarios) t.test(`kill -9 ${s.name}`, (t) => crashAndRecover(t, s));
