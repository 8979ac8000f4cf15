/**
 * kill -9 the real daemon in the middle of an audit, twice on one data directory: once at the
 * failpoint right after a batch of fixity checks was committed (`audit:after-record`), once from
 * outside while files are being read (the audit is rate-limited so it is surely mid-way). After
 * each restart the audit resumes by itself and finishes with successes + failures == packages,
 * exactly one fixity check event per package (the damaged one a failure), and the data
 * directory holds every invariant.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { Catalog } from '../../src/catalog/catalog.js';
import { DataLayout } from '../../src/storage/layout.js';
import { TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';
import { assertInvariants } from '../helpers/invariants.js';

const PACKAGES = 6;
// 2 MB/s over ~6.3 MB: a few seconds per audit, several commits apart.
const config = { audit: { rateLimitMBps: 2, concurrency: 2 } };

/** What the killed daemon left: the audit not finished, counts and events agreeing. */
async function assertLeftMidway(t: Test, dataDir: string, auditId: number): Promise<void> {
  const catalog = Catalog.open(new DataLayout(dataDir), { readOnly: true });
  try {
    const audit = catalog.audits.get(auditId)!;
    const done = audit.successes + audit.failures;
    t.equal(audit.finishedAt, undefined, `audit ${auditId} was killed before it finished`);
    t.ok(done >= 1 && done < PACKAGES, `killed mid-way: ${done} of ${PACKAGES} recorded`);
    t.equal([...catalog.events.forAudit(auditId)].length, done, 'one event per recorded package, no more');
    t.equal(catalog.audits.remaining(auditId).length, PACKAGES - done, 'the rest is still to do');
  } finally {
    await catalog.close();
  }
}

/** The resumed audit (GET /v1/audits/{id}: its events listed): one event per package, the damaged one failed. */
function assertCompleted(t: Test, audit: any, damagedBagId: string): void {
  const successes = audit.successes as any[];
  const failures = audit.failures as any[];
  t.equal(audit.packages, PACKAGES);
  t.equal(successes.length + failures.length, audit.packages, 'successes + failures == packages');
  t.equal(failures.length, 1, 'one failure: the damaged package');
  const perBag = new Map<string, number>();
  for (const e of [...successes, ...failures]) perBag.set(e.bag_id, (perBag.get(e.bag_id) ?? 0) + 1);
  t.equal(perBag.size, PACKAGES, 'every package has a fixity check event');
  t.ok(
    [...perBag.values()].every((n) => n === 1),
    'exactly one per package',
  );
  t.equal(failures[0]?.bag_id, damagedBagId);
  t.match(failures[0]?.detail, /data\/payload\.bin: sha256 changed/);
}

t.test('an audit killed with SIGKILL resumes after restart and counts every package once', async (t) => {
  const first = await TestDaemon.start(t, {
    config,
    keepDataDir: true,
    env: { PRESERVD_FAILPOINT: 'audit:after-record@2' },
  });
  const { dataDir } = first;
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const token = first.addUser('alice');
  const bags = [];
  for (let i = 0; i < PACKAGES; i++)
    bags.push(
      await ingestBag(first, token, { 'payload.bin': randomBytes(1_000_000), 'note.txt': `bag ${i}\n` }),
    );

  // Damage one stored file (same size) so the audit has a failure to count; put back at the end.
  const damaged = (await first.request('GET', `/v1/packages/${bags[2]!.request.bag_id}`)).json;
  const damagedPath = join(damaged.storage_location, 'v1/content/data/payload.bin');
  const original = readFileSync(damagedPath);
  const changed = Buffer.from(original);
  changed[0] = changed[0]! ^ 0xff;
  writeFileSync(damagedPath, changed);

  await t.test('killed by the failpoint right after a commit', async (t) => {
    const started = await first.request('POST', '/v1/audits');
    t.equal(started.status, 201);
    const id = started.json.id as number;
    t.ok(await first.exitsWithin(30_000), 'the daemon died at audit:after-record');
    await first.kill9();
    await assertLeftMidway(t, dataDir, id);

    const second = await TestDaemon.start(t, { dataDir, config, keepDataDir: true });
    const audit = await second.waitForAudit(id, (a) => a.finished_at !== null);
    assertCompleted(t, audit, damaged.bag_id);
    const summary = (await second.request('GET', '/v1/audits')).json.find((a: any) => a.id === id);
    t.equal(summary.successes + summary.failures, PACKAGES, 'the summary counts agree');

    await t.test('killed from outside while reading files', async (t) => {
      const again = await second.request('POST', '/v1/audits');
      t.equal(again.status, 201);
      const id2 = again.json.id as number;
      await second.waitForAudit(id2, (a) => a.successes.length + a.failures.length >= 2);
      await second.kill9();
      await assertLeftMidway(t, dataDir, id2);

      const third = await TestDaemon.start(t, { dataDir, config, keepDataDir: true });
      const audit2 = await third.waitForAudit(id2, (a) => a.finished_at !== null);
      assertCompleted(t, audit2, damaged.bag_id);

      writeFileSync(damagedPath, original);
      await third.stop();
      await assertInvariants(t, dataDir);
    });
  });
});
