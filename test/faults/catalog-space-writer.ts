/**
 * The child of catalog-space.test.ts: writes to a catalog on a small filesystem that is filled
 * again and again, leaving a different few bytes free each round, and reports every refusal.
 * Run as `node catalog-space-writer.js <dataDir> <fsDir> <rounds> <seed>`; prints one JSON line.
 * It fills the disk itself, between its own writes, as an upload beside the daemon would.
 */
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { Catalog } from '../../src/catalog/catalog.js';
import { fill } from '../helpers/small-fs.js';

const [dataDir, fsDir, roundsArg, seedArg] = process.argv.slice(2);
const rounds = Number(roundsArg);
let seed = Number(seedArg);
/** xorshift: the same rounds on every run, so a failure can be repeated. */
function random(): number {
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  return (seed >>> 0) / 2 ** 32;
}

const catalog = Catalog.open(dataDir!);

/** Records a success for every package still to do; a refusal stops it where it was. */
function finishAudit(auditId: number): void {
  for (const { bagId } of catalog.audits.remaining(auditId)) {
    catalog.audits.record(auditId, bagId, () => catalog.events.add({ type: 'fixity check', bagId, executor: 'admin', outcome: 'success', detail: 'checked', auditId }));
  }
}
const refusals: Record<string, number> = {};
let created = 0;
for (let round = 0; round < rounds; round++) {
  const filler = fill(fsDir!, Math.floor(random() * 256 * 1024));
  for (let i = 0; i < 150; i++) {
    try {
      const r = random();
      if (r < 0.6) {
        const bagId = randomUUID();
        catalog.packages.create({ bagId, externalId: `ext-${bagId}-${'x'.repeat(Math.floor(random() * 600))}`, contentType: 'video', user: 'alice', capability: randomUUID().replace(/-/g, '') });
        created++;
      } else if (r < 0.8) {
        const todo = new Map<string, number>();
        for (let j = Math.floor(random() * 300); j > 0; j--) todo.set(randomUUID(), j);
        const started = catalog.audits.start('admin', todo);
        finishAudit('created' in started ? started.created.id : started.existing.id);
      } else {
        catalog.events.add({ type: 'fixity check', bagId: randomUUID(), executor: 'admin', outcome: 'success', detail: 'y'.repeat(Math.floor(random() * 8000)) });
      }
    } catch (err) {
      const e = err as { name?: string; code?: unknown; message?: string };
      const key = `${e.name} ${String(e.code)}${e.name === 'CatalogSpaceError' ? '' : ` ${e.message}`}`;
      refusals[key] = (refusals[key] ?? 0) + 1;
    }
  }
  rmSync(filler);
}
// With room again, the audit a refusal left half done is finished.
const unfinished = catalog.audits.inProgress();
if (unfinished !== undefined) finishAudit(unfinished.id);
await catalog.close();
process.stdout.write(`${JSON.stringify({ created, refusals })}\n`);
