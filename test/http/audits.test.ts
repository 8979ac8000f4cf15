/**
 * Audits through the real daemon: an intact repository audits clean (and a second POST while
 * the audit runs answers 303 to it), only admins may start or list audits, five kinds of damage
 * to five stored packages give exactly five failures with one `fixity check` event each naming
 * the problem, and the webhook receives one summary per audit, not one per package.
 *
 * The audit read rate is limited (`audit.rateLimitMBps`) and one package holds a few MB, so an
 * audit lasts about a second: long enough to be caught in progress, short enough for a fast test.
 */
import { createHash, randomBytes } from 'node:crypto';
import { appendFileSync, chmodSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import t from 'tap';
import { TestDaemon, type Teardown } from '../helpers/daemon.js';
import { ingestBag, type IngestedBag } from '../helpers/ingest.js';

const RATE_LIMIT_MBPS = 3;
const BIG_BYTES = 3_000_000;

const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface WebhookDelivery {
  headers: IncomingHttpHeaders;
  body: any;
}

/** A webhook receiver on loopback that keeps every POST it gets. */
async function startWebhook(t: Teardown): Promise<{ url: string; deliveries: WebhookDelivery[] }> {
  const deliveries: WebhookDelivery[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let body: unknown;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        body = Buffer.concat(chunks).toString('utf8');
      }
      deliveries.push({ headers: { ...req.headers, 'x-method': req.method }, body });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  t.teardown(() => new Promise<void>((ok) => server.close(() => ok())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/audit-finished`, deliveries };
}

/** Waits until `count` webhook POSTs arrived, then a little longer so an extra one would be seen. */
async function webhookDeliveries(
  deliveries: WebhookDelivery[],
  count: number,
  timeoutMs = 10_000,
): Promise<WebhookDelivery[]> {
  const deadline = Date.now() + timeoutMs;
  while (deliveries.length < count && Date.now() < deadline) await sleep(25);
  await sleep(300);
  return [...deliveries];
}

/** Makes a stored folder writable for the damage (root ignores modes; anyone else may not). */
const writable = (dir: string) => chmodSync(dir, 0o755);

t.test('audits through the real daemon', async (t) => {
  const webhook = await startWebhook(t);
  const d = await TestDaemon.start(t, {
    config: { audit: { rateLimitMBps: RATE_LIMIT_MBPS, webhookUrl: webhook.url } },
  });
  const alice = d.addUser('alice');

  const flipped = randomBytes(20_000);
  const bags: Record<'intact' | 'big' | 'flip' | 'deleted' | 'extra' | 'tag' | 'removed', IngestedBag> = {
    intact: await ingestBag(d, alice, { 'a.txt': 'left alone\n', 'sub/b.txt': 'also left alone\n' }),
    big: await ingestBag(d, alice, { 'big.bin': randomBytes(BIG_BYTES) }),
    flip: await ingestBag(d, alice, { 'audio/take1.wav': flipped, 'notes.txt': 'take one\n' }),
    deleted: await ingestBag(d, alice, { 'keep.txt': 'keep\n', 'gone.txt': 'soon gone\n' }),
    extra: await ingestBag(d, alice, { 'a.txt': 'a\n' }),
    tag: await ingestBag(d, alice, { 'a.txt': 'a\n' }),
    removed: await ingestBag(d, alice, { 'a.txt': 'a\n' }),
  };
  t.teardown(() => {
    for (const bag of Object.values(bags)) rmSync(dirname(bag.bagDir), { recursive: true, force: true });
  });
  const packages = Object.keys(bags).length;
  const location = async (bag: IngestedBag): Promise<string> => {
    // The admin's package view says where its object is stored; the bag is its v1/content/.
    const res = await d.request('GET', `/v1/packages/${bag.request.bag_id}`);
    if (typeof res.json?.storage_location !== 'string')
      throw new Error(`no storage_location: ${res.status} ${res.text}`);
    return join(res.json.storage_location as string, 'v1/content');
  };
  const audits: number[] = [];

  await t.test(
    'an intact repository audits clean; a second POST while it runs answers 303 to it',
    async (t) => {
      const started = await d.request('POST', '/v1/audits');
      const again = await d.request('POST', '/v1/audits');

      t.equal(started.status, 201, 'POST /v1/audits: 201');
      const audit = started.json;
      t.equal(started.headers.get('location'), `/v1/audits/${audit.id}`, 'Location of the new audit');
      t.match(
        audit,
        {
          id: Number,
          user: 'admin',
          successes: 0,
          failures: 0,
          packages,
          created_at: String,
          updated_at: String,
        },
        'API.md shape with integer counts',
      );
      for (const key of ['id', 'successes', 'failures', 'packages'])
        t.ok(Number.isInteger(audit[key]), `${key} is an integer`);
      t.equal(audit.finished_at, null, 'not finished yet');
      t.equal(audit.total_bytes > BIG_BYTES, true, 'total_bytes covers the stored bytes');
      audits.push(audit.id);

      t.equal(again.status, 303, 'an audit is in progress: 303');
      t.equal(again.headers.get('location'), `/v1/audits/${audit.id}`, 'to the running audit');
      const followed = await d.request('GET', again.headers.get('location')!);
      t.equal(followed.status, 200, 'Location can be followed');
      t.equal(followed.json.id, audit.id, 'to the same audit');
      t.equal(followed.json.finished_at, null, 'it really was still running (the rate limit holds it)');

      const done = await d.waitForAudit(audit.id);
      t.equal(done.successes.length, packages, 'successes == packages');
      t.equal(done.failures.length, 0, 'no failures');
      t.not(done.finished_at, null, 'finished_at is set');
      t.same(
        new Set(done.successes.map((e: any) => e.bag_id)),
        new Set(Object.values(bags).map((b) => b.request.bag_id)),
        'one success per stored package',
      );
      for (const event of done.successes) {
        t.match(
          event,
          {
            type: 'fixity check',
            outcome: 'success',
            detail: null,
            executor: 'admin',
            bag_id: String,
            external_id: String,
          },
          `${event.bag_id}: a fixity check success with bag_id and external_id`,
        );
      }

      const list = await d.request('GET', '/v1/audits');
      t.equal(list.status, 200, 'GET /v1/audits');
      const item = list.json.find((a: any) => a.id === audit.id);
      t.match(
        item,
        {
          id: audit.id,
          user: 'admin',
          successes: packages,
          failures: 0,
          packages,
          created_at: String,
          updated_at: String,
        },
        'the list carries integer counts',
      );

      const third = await d.request('POST', '/v1/audits');
      t.equal(third.status, 201, 'once finished, a new POST starts a new audit');
      t.not(third.json.id, audit.id, 'with an id of its own');
      audits.push(third.json.id);
      await d.waitForAudit(third.json.id);
    },
  );

  await t.test('only admins: 403 for a regular user, 404 for an unknown audit', async (t) => {
    t.equal((await d.request('POST', '/v1/audits', { token: alice })).status, 403, 'POST /v1/audits');
    t.equal((await d.request('GET', '/v1/audits', { token: alice })).status, 403, 'GET /v1/audits');
    t.equal(
      (await d.request('GET', `/v1/audits/${audits[0]}`, { token: alice })).status,
      403,
      'GET /v1/audits/{id}',
    );
    t.equal((await d.request('GET', '/v1/audits/999999')).status, 404, 'an unknown audit id');
    t.equal((await d.request('POST', '/v1/audits', { token: null })).status, 401, 'no token at all');
    const list = await d.request('GET', '/v1/audits');
    t.equal(list.json.length, audits.length, 'the refused POST started nothing');
  });

  await t.test(
    'five kinds of damage to five packages: five failures, one fixity check failure event each, naming the problem',
    async (t) => {
      // 1. One byte of a payload file flipped (same size).
      const flip = join(await location(bags.flip), 'data/audio/take1.wav');
      const damaged = Buffer.from(flipped);
      damaged[1000] = damaged[1000]! ^ 0x01;
      chmodSync(flip, 0o644);
      writeFileSync(flip, damaged);
      // 2. A payload file deleted.
      const deletedDir = await location(bags.deleted);
      writable(join(deletedDir, 'data'));
      unlinkSync(join(deletedDir, 'data/gone.txt'));
      // 3. An extra file in data/.
      const extraDir = await location(bags.extra);
      writable(join(extraDir, 'data'));
      writeFileSync(join(extraDir, 'data/extra.txt'), 'slipped in\n');
      // 4. A tag file changed.
      const bagInfo = join(await location(bags.tag), 'bag-info.txt');
      const bagInfoSize = readFileSync(bagInfo).length;
      const appended = 'Bag-Group-Identifier: edited by hand\n';
      chmodSync(bagInfo, 0o644);
      appendFileSync(bagInfo, appended);
      // 5. The whole package (its OCFL object) gone.
      const removedDir = join(await location(bags.removed), '../..');
      writable(join(removedDir, '..'));
      rmSync(removedDir, { recursive: true, force: true });

      const expected: Array<[string, IngestedBag, string]> = [
        [
          'a flipped byte',
          bags.flip,
          `data/audio/take1.wav: sha256 changed: expected ${sha256(flipped)}, found ${sha256(damaged)}`,
        ],
        ['a deleted payload file', bags.deleted, 'data/gone.txt: missing'],
        ['an extra file in data/', bags.extra, 'data/extra.txt: extra file not in the catalog'],
        [
          'an edited tag file',
          bags.tag,
          `bag-info.txt: size changed: expected ${bagInfoSize} bytes, found ${bagInfoSize + Buffer.byteLength(appended)}`,
        ],
        ['a removed package folder', bags.removed, 'the package folder is missing'],
      ];

      const started = await d.request('POST', '/v1/audits');
      t.equal(started.status, 201, 'the next audit starts');
      audits.push(started.json.id);
      const audit = await d.waitForAudit(started.json.id);
      t.equal(audit.failures.length, 5, 'exactly five failures');
      t.equal(audit.successes.length, packages - 5, 'the untouched packages pass');
      t.same(
        new Set(audit.successes.map((e: any) => e.bag_id)),
        new Set([bags.intact.request.bag_id, bags.big.request.bag_id]),
        'and they are the two untouched ones',
      );
      const summary = (await d.request('GET', '/v1/audits')).json.find((a: any) => a.id === audit.id);
      t.match(summary, { successes: packages - 5, failures: 5, packages }, 'the list counts agree');

      for (const [damage, bag, detail] of expected) {
        const bagId: string = bag.request.bag_id;
        const inAudit = audit.failures.filter((e: any) => e.bag_id === bagId);
        t.equal(inAudit.length, 1, `${damage}: one failure in the audit`);
        t.match(
          inAudit[0],
          {
            type: 'fixity check',
            outcome: 'failure',
            executor: 'admin',
            external_id: bag.request.external_id,
          },
          `${damage}: the audit's failure event`,
        );
        t.equal(inAudit[0]?.detail, detail, `${damage}: the detail names the problem and the file`);
        t.notMatch(inAudit[0]?.detail ?? '', d.dataDir, `${damage}: no server path in the detail`);

        const events = await d.request('GET', `/v1/packages/${bagId}/events`);
        t.equal(events.status, 200, `${damage}: the package's events`);
        const failed = events.json.filter((e: any) => e.type === 'fixity check' && e.outcome === 'failure');
        t.equal(failed.length, 1, `${damage}: exactly one fixity check failure event`);
        t.match(
          failed[0],
          { id: inAudit[0]?.id, executor: 'admin', detail },
          `${damage}: it is the audit's event`,
        );
        t.equal(
          events.json.filter((e: any) => e.type === 'fixity check' && e.outcome === 'success').length,
          2,
          `${damage}: after the two clean audits' successes`,
        );
      }
    },
  );

  await t.test('the webhook receives one summary per audit, not one per package', async (t) => {
    const deliveries = await webhookDeliveries(webhook.deliveries, audits.length);
    t.equal(deliveries.length, audits.length, `${audits.length} audits, ${audits.length} POSTs`);
    for (const [i, id] of audits.entries()) {
      const delivery = deliveries.find((x) => x.body?.audit?.id === id);
      t.ok(delivery, `audit ${id} was announced`);
      if (delivery === undefined) continue;
      t.equal(delivery.headers['x-method'], 'POST', `audit ${id}: a POST`);
      t.match(delivery.headers['content-type'], /^application\/json/, `audit ${id}: of JSON`);
      const audit = (await d.request('GET', `/v1/audits/${id}`)).json;
      t.match(
        delivery.body.audit,
        {
          id,
          user: 'admin',
          packages,
          successes: audit.successes.length,
          failures: audit.failures.length,
          started_at: String,
          finished_at: String,
          bytes: Number,
        },
        `audit ${id}: the counts match`,
      );
      t.equal(delivery.body.failures.length, audit.failures.length, 'one entry per failed package');
      if (i === audits.length - 1) {
        const byBag = new Map(audit.failures.map((e: any) => [e.bag_id, e.detail]));
        for (const failure of delivery.body.failures)
          t.equal(
            failure.detail,
            byBag.get(failure.bag_id),
            `${failure.bag_id}: the same detail as the event`,
          );
      }
    }
  });
});
