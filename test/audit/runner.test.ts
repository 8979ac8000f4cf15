/**
 * The audit runner end to end on a temporary repository (real catalog, real fixity pool, real
 * bags in storage): clean audits, one failure per damaged package naming the problem, resume
 * after a stop without counting anything twice, one audit at a time, progress, the rate limit,
 * and exactly one webhook POST per audit.
 */
import { once } from 'node:events';
import { appendFile, chmod, open, readFile, rm, unlink, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import t from 'tap';
import type { AuditHasher } from '../../src/audit/runner.js';
import type { AuditWebhookPayload } from '../../src/audit/webhook.js';
import { failFor } from './fixtures/fail-for.js';
import { auditAll, makeWorld, until, type AuditWorld } from './fixtures/world.js';

async function flipByte(path: string, at = 0): Promise<void> {
  const fh = await open(path, 'r+');
  const b = Buffer.alloc(1);
  await fh.read(b, 0, 1, at);
  b[0] = b[0]! ^ 0x01;
  await fh.write(b, 0, 1, at);
  await fh.close();
}

/** Each bag's events in this audit, to prove nothing was counted twice. */
function eventsPerBag(w: AuditWorld, auditId: number): Map<string, number> {
  const counts = new Map<string, number>();
  for (const e of w.events(auditId)) counts.set(e.bagId, (counts.get(e.bagId) ?? 0) + 1);
  return counts;
}

interface Received {
  body: AuditWebhookPayload;
  contentType: string | undefined;
}

async function webhookServer(
  t: { teardown(fn: () => unknown): void },
  status = 204,
): Promise<{ url: string; received: Received[]; server: Server }> {
  const received: Received[] = [];
  const server = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method === 'POST')
        received.push({
          body: JSON.parse(Buffer.concat(chunks).toString('utf8')),
          contentType: req.headers['content-type'],
        });
      res.statusCode = status;
      res.end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, received, server };
}

t.test('an intact repository audits clean', async (t) => {
  const w = await makeWorld(t, { packages: 5 });
  const runner = w.runner();
  const id = await auditAll(runner, 'root');
  const audit = w.catalog.audits.get(id)!;
  t.match(audit, { packages: 5, successes: 5, failures: 0, user: 'root' });
  t.ok(audit.finishedAt, 'finished');
  t.equal(
    audit.bytes,
    w.packages.reduce((n, p) => n + p.bytes, 0),
    'every byte counted once',
  );
  const events = w.events(id);
  t.equal(events.length, 5, 'one event per package');
  for (const e of events)
    t.match(e, { type: 'fixity check', executor: 'root', outcome: 'success', detail: null, auditId: id });
  t.same([...eventsPerBag(w, id).keys()].sort(), w.packages.map((p) => p.bagId).sort());
  const summary = w.logger.matching(/^audit \d+ finished/);
  t.equal(summary.length, 1, 'one summary line');
  t.match(summary[0]!.message, /5 packages, 5 passed, 0 failed, .* in [\d.]+ s \([\d.]+ MB\/s\)/);
  t.match(summary[0]!.fields, { auditId: id, packages: 5, successes: 5, failures: 0, bytes: audit.bytes });
  t.equal(runner.progress(), undefined, 'no progress once finished');
});

t.test('each kind of damage gives exactly one failure naming the problem', async (t) => {
  const w = await makeWorld(t, {
    packages: 7,
    spec: () => ({ payload: { 'a.txt': 'alpha\n', 'b/c.bin': Buffer.alloc(50_000, 3) } }),
  });
  const [intact, flipped, deleted, added, tag, gone, unreadable] = w.packages;
  await flipByte(join(flipped!.dir, 'data/b/c.bin'), 25_000);
  await unlink(join(deleted!.dir, 'data/a.txt'));
  await writeFile(join(added!.dir, 'data/b/new.txt'), 'new');
  await appendFile(join(tag!.dir, 'bag-info.txt'), 'Contact-Name: someone\n');
  await rm(gone!.dir, { recursive: true });

  const target = join(unreadable!.dir, 'data/a.txt');
  await chmod(target, 0o000);
  t.teardown(() => chmod(target, 0o644).catch(() => undefined));
  let hasher: AuditHasher = w.pool;
  const rootReads = await readFile(target).then(
    () => true,
    () => false,
  );
  if (rootReads) {
    t.comment(
      'chmod 000 does not stop this user (root): the pool is wrapped to fail that file with EACCES, as it would',
    );
    hasher = failFor(w.pool, target, 'EACCES');
  }

  const id = await auditAll(w.runner({ hasher }));
  const audit = w.catalog.audits.get(id)!;
  t.match(audit, { packages: 7, successes: 1, failures: 6 });
  const byBag = new Map(w.events(id).map((e) => [e.bagId, e]));
  t.equal(byBag.size, 7);
  t.match(byBag.get(intact!.bagId), { outcome: 'success', detail: null });
  const expect: Array<[string, RegExp]> = [
    [flipped!.bagId, /^data\/b\/c\.bin: sha256 changed: expected [0-9a-f]{64}, found [0-9a-f]{64}$/],
    [deleted!.bagId, /^data\/a\.txt: missing$/],
    [added!.bagId, /^data\/b\/new\.txt: extra file not in the catalog$/],
    [tag!.bagId, /^bag-info\.txt: size changed: expected \d+ bytes, found \d+$/],
    [gone!.bagId, /^the package folder is missing$/],
    [unreadable!.bagId, /^data\/a\.txt: could not be read \(EACCES\)$/],
  ];
  for (const [bagId, detail] of expect) {
    const e = byBag.get(bagId)!;
    t.equal(e.outcome, 'failure', bagId);
    t.match(e.detail, detail, e.detail ?? '');
    t.notMatch(
      e.detail,
      new RegExp(w.dataDir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')),
      'no server path in the detail',
    );
  }
  t.equal(
    w.logger.lines.filter((l) => l.level === 'warn' && /fixity check of .* failed/.test(l.message)).length,
    6,
    'each failure logged',
  );
});

t.test('stop mid-audit, a new runner resumes: every package counted exactly once', async (t) => {
  const w = await makeWorld(t, {
    packages: 8,
    spec: () => ({ payload: { 'big.bin': Buffer.alloc(300_000, 9), 'small.txt': 'x\n' } }),
    audit: { concurrency: 1, rateLimitMBps: 1 },
  });
  let stopping: Promise<void> | undefined;
  const first = w.runner({
    onChecked: () => {
      if (w.catalog.audits.inProgress()!.successes >= 2) stopping ??= first.stop();
    },
  });
  first.start();
  const result = first.startAudit('admin');
  t.ok('created' in result);
  const id = 'created' in result ? result.created.id : 0;
  await until(() => stopping !== undefined, 30_000, 'two packages checked');
  await stopping;
  const paused = w.catalog.audits.get(id)!;
  const done = paused.successes + paused.failures;
  // A lane reads ahead into the next package, so a check that finished by the time stop() was
  // called is kept too; the one cut short is not.
  t.ok(done >= 2 && done < 8, `stopped partway (${done} of 8 recorded)`);
  t.equal(paused.finishedAt, undefined, 'not finished');
  t.equal(w.catalog.audits.remaining(id).length, 8 - done, 'the packages not recorded stay in the to-do set');
  t.equal(w.events(id).length, done, 'one event per recorded package, none for the aborted check');

  const second = w.runner({});
  second.start();
  await until(() => w.catalog.audits.get(id)!.finishedAt !== undefined, 30_000, 'the audit to finish');
  await second.idle();
  const final = w.catalog.audits.get(id)!;
  t.equal(final.successes + final.failures, final.packages);
  t.equal(final.successes, 8);
  t.equal(
    final.bytes,
    w.packages.reduce((n, p) => n + p.bytes, 0),
    'bytes counted once',
  );
  const perBag = eventsPerBag(w, id);
  t.equal(perBag.size, 8);
  t.ok(
    [...perBag.values()].every((n) => n === 1),
    'one event per package',
  );
  t.equal(
    w.logger.matching(new RegExp(`^audit \\d+ resumes: ${8 - done} of 8 packages left$`)).length,
    1,
    'the resume is logged',
  );
});

t.test('one audit at a time; progress while it runs; the rate limit holds', async (t) => {
  const w = await makeWorld(t, {
    packages: 4,
    spec: () => ({ payload: { 'big.bin': Buffer.alloc(500_000, 1) } }),
    audit: { rateLimitMBps: 1 },
  });
  const runner = w.runner();
  runner.start();
  const started = Date.now();
  const a = runner.startAudit('admin');
  const b = runner.startAudit('someone-else');
  t.ok('created' in a, 'the first POST creates');
  t.ok('existing' in b, 'the second gets the one in progress');
  const id = 'created' in a ? a.created.id : -1;
  t.equal('existing' in b ? b.existing.id : -2, id);

  await until(() => (runner.progress()?.bytes ?? 0) > 0, 20_000, 'progress');
  const p = runner.progress()!;
  t.match(p, { auditId: id, packages: 4 });
  t.ok(p.done < 4 && p.bytes <= p.totalBytes, 'partway');
  t.equal(
    p.totalBytes,
    w.packages.reduce((n, x) => n + x.bytes, 0),
  );
  // Read until the audit finishes: progress only moves forward and never passes the total.
  const readings = [p];
  for (let q = runner.progress(); q !== undefined; q = runner.progress()) {
    readings.push(q);
    await new Promise((r) => setTimeout(r, 5));
  }
  t.same(
    [...new Set(readings.map((r) => `${r.auditId} ${r.packages} ${r.totalBytes}`))],
    [`${id} 4 ${p.totalBytes}`],
    'the same audit throughout',
  );
  const backwards = readings.filter(
    (r, i) =>
      i > 0 && (r.bytes < readings[i - 1]!.bytes || r.done < readings[i - 1]!.done || r.bytes > r.totalBytes),
  );
  t.same(
    backwards,
    [],
    `progress only moves forward (${readings.length} readings, ${readings.at(-1)!.bytes} of ${p.totalBytes} bytes at the last)`,
  );
  await runner.idle();
  const seconds = (Date.now() - started) / 1000;
  const total = w.catalog.audits.get(id)!.totalBytes;
  t.ok(
    seconds >= (total / 1e6) * 0.7,
    `${(total / 1e6).toFixed(2)} MB at 1 MB/s took ${seconds.toFixed(2)} s`,
  );
  t.equal(runner.progress(), undefined);
  const again = runner.startAudit('admin');
  t.ok('created' in again, 'a new audit may start once the last finished');
  await runner.idle();
});

t.test('the webhook gets exactly one POST per audit', async (t) => {
  const hook = await webhookServer(t);
  const w = await makeWorld(t, { packages: 3 });
  w.config.audit.webhookUrl = hook.url;
  await rm(w.packages[1]!.dir, { recursive: true });
  const runner = w.runner();
  const first = await auditAll(runner, 'admin');
  const second = await auditAll(runner, 'admin');
  t.equal(hook.received.length, 2, 'two audits, two POSTs');
  const [one, two] = hook.received as [Received, Received];
  t.match(one.contentType, /^application\/json/);
  t.match(one.body, {
    audit: {
      id: first,
      user: 'admin',
      packages: 3,
      successes: 2,
      failures: 1,
      bytes: w.catalog.audits.get(first)!.bytes,
    },
    failures: [
      {
        bag_id: w.packages[1]!.bagId,
        external_id: w.packages[1]!.pkg.externalId,
        detail: 'the package folder is missing',
      },
    ],
  });
  t.match(one.body.audit.started_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  t.match(one.body.audit.finished_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  t.equal(two.body.audit.id, second);
  t.equal(w.logger.matching(/summary delivered to the webhook/).length, 2);

  // An empty repository's audit finishes at once and is announced too.
  const empty = await makeWorld(t, {});
  empty.config.audit.webhookUrl = hook.url;
  const r = empty.runner();
  const result = r.startAudit('admin');
  t.ok('created' in result && result.created.finishedAt !== undefined, 'finished at once');
  await r.idle();
  t.equal(hook.received.length, 3);
  t.match(hook.received[2]!.body, { audit: { packages: 0, successes: 0, failures: 0 }, failures: [] });
});

t.test('a webhook that fails is logged, retried a bounded number of times, never thrown', async (t) => {
  const broken = await webhookServer(t, 503);
  const w = await makeWorld(t, { packages: 1 });
  w.config.audit.webhookUrl = broken.url;
  const runner = w.runner({ webhook: { retryDelaysMs: [10, 10] } });
  await auditAll(runner);
  t.equal(broken.received.length, 3, 'three attempts on 503');
  t.equal(w.logger.matching(/summary not delivered to the webhook: the webhook answered 503$/).length, 1);

  const refusing = await webhookServer(t, 400);
  w.config.audit.webhookUrl = refusing.url;
  await auditAll(runner);
  t.equal(refusing.received.length, 1, 'no retry after a 4xx');

  const closed = await webhookServer(t);
  await new Promise<void>((resolve) => closed.server.close(() => resolve()));
  w.config.audit.webhookUrl = closed.url;
  await auditAll(runner);
  t.ok(
    w.logger.matching(/summary not delivered to the webhook: .*(ECONNREFUSED|fetch failed)/).length >= 1,
    'a refused connection is logged',
  );
});
