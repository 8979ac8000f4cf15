/**
 * kill -9 in the middle of an audit: a child process audits ~50 packages slowly and is killed
 * with SIGKILL partway; the counts it left are consistent (every recorded package has exactly
 * one event, the rest are still to do), and a runner started afterwards on the same catalog
 * completes the audit with successes + failures == packages and no package counted twice.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { makeWorld, until } from './fixtures/world.js';
import { node } from '../helpers/node.js';

const PACKAGES = 50;
const CHILD = join(dirname(fileURLToPath(import.meta.url)), 'fixtures/crash-child.js');

t.test('an audit killed with SIGKILL resumes without counting anything twice', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'preservd-audit-crash-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true })); // teardowns run last-in first-out: after the world's

  const child = spawn(...node([CHILD, dataDir, String(PACKAGES), '2']), {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<NodeJS.Signals | null>((resolve) =>
    child.on('exit', (_code, signal) => resolve(signal)),
  );
  let auditId: number | undefined;
  let checked = 0;
  createInterface({ input: child.stdout }).on('line', (line) => {
    const m = /^audit (\d+)$/.exec(line);
    if (m) auditId = Number(m[1]);
    if (line.startsWith('checked ')) checked++;
  });
  try {
    await until(() => checked >= 15, 60_000, 'the child to check 15 packages');
  } finally {
    child.kill('SIGKILL');
  }
  t.equal(await exited, 'SIGKILL', 'the child was killed');
  t.ok(auditId !== undefined, 'the child started an audit');

  const w = await makeWorld(t, { dataDir });
  const id = auditId!;
  const left = w.catalog.audits.get(id)!;
  const done = left.successes + left.failures;
  t.ok(done >= 15 && done < PACKAGES, `killed partway (${done} of ${PACKAGES} recorded)`);
  t.equal(left.finishedAt, undefined, 'not finished');
  t.equal(w.events(id).length, done, 'one event per recorded package, no more');
  t.equal(w.catalog.audits.remaining(id).length, PACKAGES - done, 'the rest is still to do');

  const runner = w.runner();
  runner.start();
  await until(
    () => w.catalog.audits.get(id)!.finishedAt !== undefined,
    60_000,
    'the resumed audit to finish',
  );
  await runner.idle();
  const final = w.catalog.audits.get(id)!;
  t.equal(final.successes + final.failures, final.packages);
  t.equal(final.packages, PACKAGES);
  t.equal(final.failures, 0);
  const perBag = new Map<string, number>();
  for (const e of w.events(id)) perBag.set(e.bagId, (perBag.get(e.bagId) ?? 0) + 1);
  t.equal(perBag.size, PACKAGES, 'every package has an event');
  t.ok(
    [...perBag.values()].every((n) => n === 1),
    'no package counted twice',
  );
  t.equal(w.catalog.audits.remaining(id).length, 0);
});
