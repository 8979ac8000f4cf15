/**
 * Audits check each package's primary copy as an OCFL object (issue 25): its structure and
 * inventories by our validator, and the head inventory's digests against the catalog's. Real
 * objects made by the ingest's own assembly (createStoredPackage), real catalog and fixity pool,
 * through both a `POST /v1/audits` run (the runner) and a continuous audit.
 */
import { createHash } from 'node:crypto';
import { readFile, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { ContinuousAudit, CONTINUOUS_EXECUTOR } from '../../src/audit/continuous.js';
import { auditAll, makeWorld, type AuditWorld } from './fixtures/world.js';

const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

/** Rewrites the object's inventory (root and head) and both sidecars consistently: OCFL stays valid. */
async function rewriteInventory(
  objectDir: string,
  change: (inv: Record<string, any>) => void,
): Promise<void> {
  const inv = JSON.parse(await readFile(join(objectDir, 'inventory.json'), 'utf8')) as Record<string, any>;
  change(inv);
  const json = Buffer.from(JSON.stringify(inv, null, 2) + '\n');
  for (const folder of ['', 'v1']) {
    await writeFile(join(objectDir, folder, 'inventory.json'), json);
    await writeFile(join(objectDir, folder, 'inventory.json.sha256'), `${sha256(json)} inventory.json\n`);
  }
}

/** Four packages: intact, sidecar altered, an md5 in the inventory not the catalog's, no declaration. */
async function damagedWorld(t: Test): Promise<{ w: AuditWorld; expect: Map<string, RegExp | null> }> {
  const w = await makeWorld(t, { packages: 4, spec: () => ({ payload: { 'a.txt': 'alpha\n' } }) });
  const [, sidecar, md5, declaration] = w.packages.map((p) => w.storage.objectDir(p.bagId));
  await writeFile(join(sidecar!, 'inventory.json.sha256'), `${'0'.repeat(64)} inventory.json\n`);
  await rewriteInventory(md5!, (inv) => {
    const md5s = inv.fixity.md5 as Record<string, string[]>;
    const [digest] = Object.entries(md5s).find(([, paths]) => paths.includes('v1/content/data/a.txt'))!;
    md5s[digest] = md5s[digest]!.filter((p) => p !== 'v1/content/data/a.txt');
    if (md5s[digest].length === 0) delete md5s[digest];
    md5s['f'.repeat(32)] = ['v1/content/data/a.txt'];
  });
  await unlink(join(declaration!, '0=ocfl_object_1.1'));
  const [a, b, c, d] = w.packages.map((p) => p.bagId);
  const expect = new Map<string, RegExp | null>([
    [a!, null],
    [b!, /^the object is not valid OCFL: E060 inventory\.json\.sha256$/],
    [
      c!,
      /^data\/a\.txt: the inventory differs from the catalog: md5 is f{32} in the inventory, [0-9a-f]{32} in the catalog$/,
    ],
    [d!, /^the object is not valid OCFL: E003 the object root$/],
  ]);
  return { w, expect };
}

function judge(
  t: Test,
  w: AuditWorld,
  events: ReadonlyArray<{ bagId: string; outcome: string; detail: string | null }>,
  expect: Map<string, RegExp | null>,
  prefix = '',
): void {
  const byBag = new Map(events.map((e) => [e.bagId, e]));
  for (const [bagId, detail] of expect) {
    const e = byBag.get(bagId)!;
    if (detail === null) {
      t.equal(e.outcome, 'success', `${bagId}: a valid object passes`);
      continue;
    }
    t.equal(e.outcome, 'failure', bagId);
    const text = (e.detail ?? '').slice(prefix.length);
    t.match(text, detail, text);
    t.notOk(text.includes(w.dataDir), 'no server path in the detail');
  }
}

t.test(
  'an audit run fails each package whose object is not valid OCFL or whose inventory differs',
  async (t) => {
    const { w, expect } = await damagedWorld(t);
    const id = await auditAll(w.runner());
    t.match(w.catalog.audits.get(id), { packages: 4, successes: 1, failures: 3 });
    judge(t, w, w.events(id), expect);
  },
);

t.test('a continuous audit checks the object too', async (t) => {
  const { w, expect } = await damagedWorld(t);
  const now = Date.now() + 11 * 86_400_000;
  const continuous = new ContinuousAudit({
    catalog: w.catalog,
    storage: w.storage,
    hasher: w.pool,
    config: { ...w.config, audit: { ...w.config.audit, everyDays: 10 } },
    logger: w.logger,
    now: () => now,
  });
  t.teardown(() => continuous.stop());
  t.equal(await continuous.runOnce(), 4, 'every package overdue is checked');
  const events = w.packages.map((p) => {
    const own = [...w.catalog.events.forPackage(p.bagId)].filter((e) => e.executor === CONTINUOUS_EXECUTOR);
    return own[own.length - 1]!;
  });
  judge(t, w, events, expect, 'continuous audit (every 10 days):\n');
});
