/**
 * Continuous audits (`audit.everyDays`) with an injected clock: every package verified within
 * each period, the stalest first, a flat share per day, the share kept across a restart, and a
 * repository left alone longer than a period caught up at once. Real catalog, real fixity pool,
 * real bags.
 */
import t from 'tap';
import { ContinuousAudit, CONTINUOUS_EXECUTOR } from '../../src/audit/continuous.js';
import { Catalog } from '../../src/catalog/catalog.js';
import { DataLayout } from '../../src/storage/layout.js';
import { auditAll, makeWorld } from './fixtures/world.js';

const DAY = 86_400_000;
const HOUR = 3_600_000;

t.test(
  'every package verified within each period, stalest first, a flat share a day, across a restart',
  async (t) => {
    const n = 20;
    const everyDays = 10;
    const w = await makeWorld(t, { packages: n, audit: { everyDays } });
    let now = Date.now() + 1_000;
    const clock = () => now;
    let catalog = w.catalog;
    let continuous = new ContinuousAudit({
      catalog,
      storage: w.storage,
      hasher: w.pool,
      config: w.config,
      logger: w.logger,
      now: clock,
    });
    const ids = w.packages.map((p) => p.bagId);
    const checksPerDay = new Map<number, number>();
    const start = now;
    let stalestFirst = true;
    let withinPeriod = true;

    const round = async () => {
      const before = new Map(ids.map((id) => [id, catalog.fixity.get(id)!]));
      const checked = await continuous.runOnce();
      const after = new Map(ids.map((id) => [id, catalog.fixity.get(id)!]));
      const done = ids.filter((id) => after.get(id)!.checkedAt !== before.get(id)!.checkedAt);
      if (done.length !== checked) throw new Error(`${checked} checks reported, ${done.length} recorded`);
      const day = Math.floor((now - start) / DAY);
      checksPerDay.set(day, (checksPerDay.get(day) ?? 0) + done.length);
      const newestChecked = Math.max(...done.map((id) => before.get(id)!.verifiedAt));
      const stalestLeft = Math.min(
        ...ids.filter((id) => !done.includes(id)).map((id) => before.get(id)!.verifiedAt),
      );
      if (done.length > 0 && newestChecked > stalestLeft) stalestFirst = false;
      if (ids.some((id) => now - after.get(id)!.verifiedAt > everyDays * DAY) || continuous.overdue() !== 0)
        withinPeriod = false;
    };

    // Fifteen days, one round an hour; then a restart (a new catalog handle and scheduler on the
    // same data); then fifteen more days.
    for (let h = 0; h < 15 * 24; h++, now += HOUR) await round();
    await continuous.stop();
    await catalog.close();
    catalog = Catalog.open(new DataLayout(w.dataDir));
    t.teardown(() => catalog.close());
    continuous = new ContinuousAudit({
      catalog,
      storage: w.storage,
      hasher: w.pool,
      config: w.config,
      logger: w.logger,
      now: clock,
    });
    for (let h = 0; h < 15 * 24; h++, now += HOUR) await round();

    t.ok(withinPeriod, 'no package was ever last verified longer than a period ago');
    t.ok(stalestFirst, 'each round checked the least recently verified packages');
    const perDay = [...checksPerDay.values()];
    const share = n / everyDays;
    t.ok(
      perDay.every((c) => c <= Math.ceil(share) + 1),
      `a flat share a day (${share}): ${perDay.join(' ')}`,
    );
    const total = perDay.reduce((a, b) => a + b, 0);
    t.ok(
      total >= 30 * share - 2 && total <= 30 * share + 2,
      `${total} checks in 30 days, ${30 * share} expected: no burst after the restart, none lost`,
    );
    const events = ids.flatMap((id) =>
      [...catalog.events.forPackage(id)].filter((e) => e.type === 'fixity check'),
    );
    t.equal(events.length, total, 'one fixity check event per check');
    t.ok(
      events.every(
        (e) =>
          e.executor === CONTINUOUS_EXECUTOR &&
          e.outcome === 'success' &&
          e.detail === `continuous audit (every ${everyDays} days)`,
      ),
    );
    for (const id of ids)
      t.ok(events.filter((e) => e.bagId === id).length >= 2, `${id} checked in every period`);

    // Twelve days without the daemon: everything is overdue, and the first round catches up.
    now += 12 * DAY;
    t.equal(continuous.overdue(), n, 'all overdue after a long stop');
    t.equal(await continuous.runOnce(), n, 'the first round checks every overdue package');
    t.equal(continuous.overdue(), 0);
    now += HOUR;
    t.ok((await continuous.runOnce()) <= 1, 'and then back to the daily share');
  },
);

t.test(
  'a damaged package fails its continuous check; a full audit moves packages to the back too',
  async (t) => {
    const w = await makeWorld(t, { packages: 3, audit: { everyDays: 1 } });
    const { writeFile } = await import('node:fs/promises');
    const { join } = await import('node:path');
    const bad = w.packages[0]!;
    await writeFile(join(bad.dir, 'data/hello.txt'), 'tampered\n');
    let now = Date.now() + 2 * DAY;
    const continuous = new ContinuousAudit({
      catalog: w.catalog,
      storage: w.storage,
      hasher: w.pool,
      config: w.config,
      logger: w.logger,
      now: () => now,
    });
    t.equal(continuous.overdue(), 3);
    t.equal(await continuous.runOnce(), 3);
    t.same(w.catalog.fixity.get(bad.bagId), { verifiedAt: now, checkedAt: now, outcome: 'failure' });
    const failed = [...w.catalog.events.forPackage(bad.bagId)].filter((e) => e.type === 'fixity check');
    t.same(
      failed.map((e) => [e.outcome, e.detail?.split('\n')[0]]),
      [['failure', 'continuous audit (every 1 days):']],
    );
    t.match(failed[0]!.detail, /data\/hello\.txt: size changed/);
    t.equal(w.logger.matching(/continuous fixity check of .* failed/).length, 1);

    const auditId = await auditAll(w.runner());
    for (const p of w.packages) {
      const event = w.events(auditId).find((e) => e.bagId === p.bagId)!;
      t.equal(
        w.catalog.fixity.get(p.bagId)?.checkedAt,
        event.date,
        'a full audit records the check date too',
      );
    }
    now = Date.now() + HOUR; // the full audit ran on the real clock
    t.equal(await continuous.runOnce(), 0, 'nothing due just after a full audit');
  },
);

t.test(
  'the daemon runs them: the overdue package is checked at start, counted by status and /metrics',
  async (t) => {
    const { mkdtempSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const { randomBytes, randomUUID } = await import('node:crypto');
    const { TestDaemon } = await import('../helpers/daemon.js');
    const dataDir = mkdtempSync(join(tmpdir(), 'preservd-continuous-'));
    const seeded = Catalog.open(new DataLayout(dataDir));
    const bagId = randomUUID();
    seeded.packages.create({
      bagId,
      externalId: 'old',
      contentType: 'audio',
      user: 'admin',
      capability: randomBytes(16).toString('hex'),
    });
    seeded.files.put(bagId, [
      { path: 'data/a.txt', size: 1, crc32: '00000000', digests: { sha256: '0'.repeat(64) } },
    ]);
    seeded.packages.markStored(
      bagId,
      `${bagId.slice(0, 2)}/${bagId.slice(2, 4)}/${bagId.slice(4, 6)}/${bagId}`,
    );
    seeded.fixity.put(bagId, { verifiedAt: Date.now() - 400 * DAY }); // ingested long ago, never audited
    await seeded.close();
    const d = await TestDaemon.start(t, { dataDir, config: { audit: { everyDays: 30 } } });
    let events: any[] = [];
    // Checked within a second on a quiet machine; the bound is for a loaded one.
    for (const deadline = Date.now() + 60_000; Date.now() < deadline && events.length === 0;) {
      events = (await d.request('GET', `/v1/packages/${bagId}/events`)).json.filter(
        (e: any) => e.type === 'fixity check',
      );
      await new Promise((r) => setTimeout(r, 50));
    }
    t.same(
      events.map((e) => [e.executor, e.outcome]),
      [['preservd', 'failure']],
      'checked at once: its folder is missing',
    );
    const show = await d.request('GET', `/v1/packages/${bagId}`);
    t.equal(show.json.last_fixity_check, events[0].date, 'admins see the last fixity check');
    const status = d.cli(['status']);
    t.equal(status.code, 0, status.stderr);
    t.match(
      status.stdout,
      /\ncontinuous audits: every 30 days: 0 of 1 stored packages overdue, least recently verified \d{4}-\d\d-\d\dT[\d:.]+Z\n$/,
    );
    const metrics = await d.request('GET', '/metrics', { token: null });
    t.match(metrics.text, /\npreservd_audit_overdue_packages 0\n/);
  },
);

t.test(
  'continuous checks read every replica copy back too: a damaged copy is named, marked, and repair asked for',
  async (t) => {
    const { cp, mkdtemp, rm, writeFile } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const { targetsFor, contentKey, objectPrefix } = await import('../../src/replicas/index.js');
    const w = await makeWorld(t, { packages: 2, audit: { everyDays: 1, repair: 'auto' } });
    const mirror = await mkdtemp(join(tmpdir(), 'preservd-mirror-'));
    t.teardown(() => rm(mirror, { recursive: true, force: true }));
    t.teardown(() => rm(`${mirror}.preservd-tmp`, { recursive: true, force: true }));
    // Each package's object on the dir replica, byte for byte (content and inventories), recorded verified.
    for (const p of w.packages) {
      await cp(join(p.dir, '..', '..'), join(mirror, objectPrefix(p.bagId)), { recursive: true });
      w.catalog.replication.enqueue(p.bagId, ['mirror'], p.bytes);
      w.catalog.replication.verified(p.bagId, 'mirror', () =>
        w.catalog.events.add({
          bagId: p.bagId,
          type: 'replication',
          executor: 'preservd',
          outcome: 'success',
          detail: 'copied',
        }),
      );
    }
    const bad = w.packages[1]!;
    await writeFile(
      join(mirror, contentKey(bad.bagId, { path: 'data/hello.txt' })),
      'tampered on the replica\n',
    );

    const repairs: string[] = [];
    const replicas = {
      targets: await targetsFor([{ name: 'mirror', kind: 'dir', path: mirror }]),
      bytesPerSec: () => 0,
      repair: (bagId: string) => repairs.push(bagId),
    };
    const now = Date.now() + 2 * DAY;
    const continuous = new ContinuousAudit({
      catalog: w.catalog,
      storage: w.storage,
      hasher: w.pool,
      config: w.config,
      logger: w.logger,
      now: () => now,
      replicas,
    });
    t.equal(await continuous.runOnce(), 2, 'both packages checked');
    const outcomes = w.packages.map((p) => w.catalog.fixity.get(p.bagId)?.outcome);
    t.same(outcomes, ['success', 'failure'], 'the package whose copy is damaged fails, its primary intact');
    const event = [...w.catalog.events.forPackage(bad.bagId)].find((e) => e.type === 'fixity check')!;
    t.match(
      event.detail,
      /mirror.*data\/hello\.txt|data\/hello\.txt.*mirror/,
      `the finding names the copy and the file: ${event.detail}`,
    );
    t.equal(
      w.catalog.replication.get(bad.bagId, 'mirror')?.damaged,
      true,
      'the copy is marked damaged, for repair',
    );
    t.equal(
      w.catalog.replication.get(w.packages[0]!.bagId, 'mirror')?.status,
      'verified',
      'the intact copy stays verified',
    );
    t.same(repairs, [bad.bagId], 'audit.repair auto: repair asked for the damaged package only');
  },
);
