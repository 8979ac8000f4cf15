/**
 * kill -9 at every step boundary of an ingest (failpoints), and at random moments of a large
 * one; restart on the same data directory; the item must end, the bag must be stored as a
 * complete OCFL object and verifiable (or given back, for a failing bag), and nothing may be
 * left half-done (checked at the end by the data directory's invariants, helpers/invariants.ts,
 * which also check each object's declaration and inventories).
 */
import { createHash, randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { rsyncUpload, TestDaemon } from '../helpers/daemon.js';
import { assertInvariants } from '../helpers/invariants.js';
import { makeBag } from '../helpers/make-bag.js';
import { filesUnder } from '../helpers/walk.js';

const scratch = mkdtempSync(join(tmpdir(), 'preservd-crash-'));
t.teardown(() => rmSync(scratch, { recursive: true, force: true }));

interface Scenario {
  name: string;
  failpoint?: string;
  /** Kill this long after complete instead of at a failpoint. */
  killAfterMs?: number;
  broken?: boolean;
  big?: boolean;
}

async function crashAndRecover(t: Test, s: Scenario): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'preservd-crashdata-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const first = await TestDaemon.start(t, {
    dataDir,
    keepDataDir: true,
    env: s.failpoint ? { PRESERVD_FAILPOINT: s.failpoint } : {},
  });
  const token = first.addUser('alice');
  const bagId = randomUUID();
  const req = await first.createRequest(token, {
    bag_id: bagId,
    external_id: `crash-${bagId.slice(0, 8)}`,
    content_type: 'video',
  });
  const bagDir = join(scratch, bagId);
  const files: Record<string, Buffer | string> = {
    'a.txt': 'crash test\n',
    'x/y.bin': Buffer.alloc(100_000, 1),
  };
  if (s.big === true)
    for (let i = 0; i < 6; i++) files[`big/${i}.bin`] = Buffer.alloc(40 * 1024 * 1024, i + 1);
  await makeBag(bagDir, {
    files,
    chipmunkInfo: { externalId: req.external_id, bagId, contentType: 'video' },
    ...(s.broken ? { corrupt: ['data/a.txt'] } : {}),
  });
  t.equal(rsyncUpload(bagDir, req.upload_link).code, 0, 'uploaded');
  const complete = await first.request('POST', `/v1/requests/${bagId}/complete`, { token });
  t.equal(complete.status, 201);
  if (s.killAfterMs !== undefined) {
    await new Promise((r) => setTimeout(r, s.killAfterMs));
    await first.kill9();
  } else {
    t.ok(await first.exitsWithin(30_000), `the daemon died at ${s.failpoint}`);
    await first.kill9(); // its rsync child too
  }

  const second = await TestDaemon.start(t, { dataDir, keepDataDir: true });
  const item = await second.waitForQueueItem(complete.json.id, token);
  const pkg = await second.request('GET', `/v1/packages/${bagId}`);
  const events = (await second.request('GET', `/v1/packages/${bagId}/events`)).json as any[];
  const ingestions = events.filter((e) => e.type === 'ingestion');
  t.equal(ingestions.length, 1, 'exactly one ingestion event');

  if (s.broken === true) {
    t.equal(item.status, 'FAILED');
    t.ok(item.errors.some((e: any) => e.code === 'manifest-mismatch' && e.path === 'data/a.txt'));
    t.equal(pkg.json.stored, false);
    // Given back under a new link (the old one retired: security-probe.md, finding 1).
    t.not(pkg.json.upload_link.split('/').at(-2), req.upload_link.split('/').at(-2), 'under a new link');
    const landing = join(dataDir, 'landing', pkg.json.upload_link.split('/').at(-2));
    t.same(filesUnder(landing), filesUnder(bagDir), 'the upload is back in its landing folder, whole');
    t.equal(rsyncUpload(bagDir, pkg.json.upload_link).code, 0, 'and the link is open again');
    await second.stop();
    nothingInStaging(t, dataDir);
    await assertInvariants(t, dataDir);
    return;
  }
  t.equal(item.status, 'DONE', JSON.stringify(item));
  t.equal(pkg.json.stored, true);
  const stored = join(pkg.json.storage_location as string, 'v1/content');
  t.same(filesUnder(stored), filesUnder(bagDir), "the object's v1 content is exactly the bag");
  for (const rel of filesUnder(bagDir)) {
    const want = createHash('sha256')
      .update(readFileSync(join(bagDir, rel)))
      .digest('hex');
    const got = createHash('sha256')
      .update(readFileSync(join(stored, rel)))
      .digest('hex');
    if (want !== got) t.fail(`${rel} differs in storage`);
  }
  const landingName = req.upload_link.split('/').at(-2);
  t.notOk(existsSync(join(dataDir, 'landing', landingName)), 'the landing folder is gone');
  t.equal(ingestions[0].outcome, 'success');
  const file = await second.request('GET', `/v1/packages/${bagId}/x/y.bin`, { token });
  t.equal(file.status, 200, 'files are served');
  t.equal(pkg.json.upload_link, null, 'a stored package shows no link');
  const oldLink = req.upload_link.replace(`:${first.rsyncPort}/`, `:${second.rsyncPort}/`);
  t.not(rsyncUpload(bagDir, oldLink).code, 0, 'the link stays closed');
  await second.stop();
  nothingInStaging(t, dataDir);
  await assertInvariants(t, dataDir);
}

/** Checked once the restarted daemon has stopped: while it runs, its record writer may hold a temporary file there. */
function nothingInStaging(t: Test, dataDir: string): void {
  t.same(readdirSync(join(dataDir, 'staging')), [], 'nothing left in staging');
}

const scenarios: Scenario[] = [
  { name: 'before staging', failpoint: 'ingest:before-stage' },
  { name: 'after staging', failpoint: 'ingest:after-stage' },
  { name: 'after validation, before the intent is recorded', failpoint: 'ingest:after-validate' },
  { name: 'after a batch of file records, before the intent', failpoint: 'ingest:after-file-batch' },
  { name: 'after the intent, before the object is assembled', failpoint: 'ingest:after-intent' },
  {
    name: 'with the upload moved into the assembly, before its inventories',
    failpoint: 'ingest:in-assembly',
  },
  { name: 'between the assembly and the rename into storage', failpoint: 'ingest:after-assembly' },
  { name: 'between the rename and the catalog commit', failpoint: 'ingest:after-store' },
  { name: 'after the catalog commit', failpoint: 'ingest:after-result' },
  { name: 'a failing bag, after it was given back', failpoint: 'ingest:after-return', broken: true },
  { name: 'a failing bag, before staging', failpoint: 'ingest:before-stage', broken: true },
  { name: 'in the middle of hashing a large bag', big: true, killAfterMs: 600 },
  { name: 'later in a large bag', big: true, killAfterMs: 1100 },
];

// 13 daemons killed and restarted, one after another: ~4 minutes alone, over the suite's 10-minute
// limit once at load ~20 (stress beside the suite), so this file gets 20.
t.setTimeout(1_200_000);
for (const s of scenarios) t.test(`kill -9 ${s.name}`, (t) => crashAndRecover(t, s));
