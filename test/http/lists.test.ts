/**
 * Lists against the real daemon (API.md, Conventions): `limit`/`after` paging with
 * `Link: rel="next"` gives every item exactly once, in order; bad `limit` and `after` are 400;
 * the `content_type` and `stored` filters, alone and with paging; a regular user's pages hold
 * only theirs; and a whole list is streamed, so the daemon's memory does not grow with it.
 *
 * The catalog is seeded through its own API before the daemon starts (thousands of requests
 * through HTTP would take minutes).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { Catalog } from '../../src/catalog/catalog.js';
import { DataLayout } from '../../src/storage/layout.js';
import { Storage } from '../../src/storage/storage.js';
import { TestDaemon, type HttpResult } from '../helpers/daemon.js';

const TYPES = ['audio', 'video', 'digital'] as const;
const OWNERS = ['alice', 'bob', 'carol'] as const;

interface Seeded {
  bagId: string;
  user: string;
  contentType: string;
  stored: boolean;
}

/** `n` packages, owners and types in turn, every third one stored; oldest first. */
async function seed(dataDir: string, n: number): Promise<Seeded[]> {
  const catalog = Catalog.open(new DataLayout(dataDir));
  const out: Seeded[] = [];
  try {
    for (let start = 0; start < n; start += 2_000) {
      catalog.transaction(() => {
        for (let i = start; i < Math.min(n, start + 2_000); i++) {
          const bagId = randomUUID();
          const user = OWNERS[i % 3]!;
          const contentType = TYPES[Math.floor(i / 3) % 3]!;
          catalog.packages.create({
            bagId,
            externalId: `ext-${i}`,
            contentType,
            user,
            capability: randomBytes(16).toString('hex'),
          });
          const stored = i % 3 === 2 || i % 7 === 0;
          if (stored) {
            catalog.files.put(bagId, [
              { path: 'data/a.txt', size: 1, crc32: '00000000', digests: { sha256: '0'.repeat(64) } },
            ]);
            catalog.packages.markStored(bagId, Storage.storagePath(bagId));
          }
          out.push({ bagId, user, contentType, stored });
        }
      });
    }
  } finally {
    await catalog.close();
  }
  return out;
}

/** Follows `Link: rel="next"` from `path` to the end; every page's items and how many pages. */
async function allPages(
  d: TestDaemon,
  path: string,
  token: string,
): Promise<{ items: any[]; pages: number; sizes: number[] }> {
  const items: any[] = [];
  const sizes: number[] = [];
  let next: string | undefined = path;
  while (next !== undefined) {
    const res: HttpResult = await d.request('GET', next, { token });
    if (res.status !== 200) throw new Error(`${next}: ${res.status} ${res.text}`);
    items.push(...res.json);
    sizes.push(res.json.length);
    const link = res.headers.get('link');
    next = link === null ? undefined : /^<([^>]+)>; rel="next"$/.exec(link)?.[1];
    if (link !== null && next === undefined) throw new Error(`unreadable Link header: ${link}`);
  }
  return { items, pages: sizes.length, sizes };
}

t.test('paging, filters and scopes', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'preservd-lists-'));
  const seeded = await seed(dataDir, 250);
  const d = await TestDaemon.start(t, { dataDir });
  const token = { alice: d.addUser('alice'), bob: d.addUser('bob'), admin: d.adminToken };

  await t.test('every item exactly once, in order, with the Link header', async (t) => {
    for (const prefix of ['/v1/requests', '/v1/packages', '/v1/bags']) {
      const { items, sizes } = await allPages(d, `${prefix}?limit=40`, token.admin);
      t.same(
        items.map((p) => p.bag_id),
        seeded.map((s) => s.bagId),
        `${prefix}: all 250, oldest first, once each`,
      );
      t.same(sizes, [40, 40, 40, 40, 40, 40, 10], `${prefix}: full pages, then the rest`);
    }
    const whole = await d.request('GET', '/v1/requests', { token: token.admin });
    t.equal(whole.headers.get('link'), null, 'no Link without limit');
    t.same(
      whole.json.map((p: any) => p.bag_id),
      seeded.map((s) => s.bagId),
      'unpaged: the whole list, streamed',
    );
    const exact = await d.request('GET', '/v1/requests?limit=250', { token: token.admin });
    t.equal(exact.json.length, 250);
    t.equal(exact.headers.get('link'), null, 'no next page when nothing follows');
    const link = (
      await d.request('GET', '/v1/packages?stored=true&limit=5', { token: token.admin })
    ).headers.get('link')!;
    t.match(
      link,
      /^<\/v1\/packages\?stored=true&limit=5&after=[A-Za-z0-9_-]+>; rel="next"$/,
      'same path and filters, limit and after',
    );
  });

  await t.test('filters, alone and with paging', async (t) => {
    for (const contentType of TYPES) {
      const want = seeded.filter((s) => s.contentType === contentType).map((s) => s.bagId);
      t.same(
        (await allPages(d, `/v1/packages?content_type=${contentType}&limit=17`, token.admin)).items.map(
          (p) => p.bag_id,
        ),
        want,
        contentType,
      );
    }
    for (const stored of [true, false]) {
      const want = seeded.filter((s) => s.stored === stored).map((s) => s.bagId);
      const { items } = await allPages(d, `/v1/packages?stored=${stored}&limit=30`, token.admin);
      t.same(
        items.map((p) => p.bag_id),
        want,
        `stored=${stored}`,
      );
      t.ok(items.every((p) => p.stored === stored));
    }
    const both = seeded.filter((s) => s.contentType === 'video' && s.stored).map((s) => s.bagId);
    t.same(
      (await allPages(d, '/v1/requests?content_type=video&stored=true&limit=9', token.admin)).items.map(
        (p) => p.bag_id,
      ),
      both,
      'both filters',
    );
    t.same(
      (await d.request('GET', '/v1/requests?content_type=nonesuch', { token: token.admin })).json,
      [],
      'an unknown type matches nothing',
    );
  });

  await t.test("a regular user's pages hold only theirs", async (t) => {
    const want = seeded.filter((s) => s.user === 'alice').map((s) => s.bagId);
    const { items } = await allPages(d, '/v1/requests?limit=25', token.alice);
    t.same(
      items.map((p) => p.bag_id),
      want,
    );
    const audio = seeded
      .filter((s) => s.user === 'alice' && s.contentType === 'audio' && !s.stored)
      .map((s) => s.bagId);
    t.same(
      (await allPages(d, '/v1/requests?content_type=audio&stored=false&limit=4', token.alice)).items.map(
        (p) => p.bag_id,
      ),
      audio,
      'filters within their own',
    );
    const streamed = await d.request('GET', '/v1/requests', { token: token.bob });
    t.same(
      streamed.json.map((p: any) => p.bag_id),
      seeded.filter((s) => s.user === 'bob').map((s) => s.bagId),
      'unpaged: theirs only',
    );
  });

  await t.test('bad limit or after: 400 in the error shape', async (t) => {
    const bad = [
      'limit=0',
      'limit=1001',
      'limit=-1',
      'limit=abc',
      'limit=2.5',
      'limit=',
      'after=nonsense',
      'after=',
      'limit=10&after=Zm9v',
      'stored=maybe',
    ];
    for (const query of bad) {
      for (const path of [
        '/v1/requests',
        '/v1/queue',
        '/v1/events',
        '/v1/audits',
        `/v1/packages/${seeded[2]!.bagId}/events`,
      ]) {
        if (query.startsWith('stored') && path !== '/v1/requests') continue;
        const res = await d.request('GET', `${path}?${query}`, { token: token.admin });
        t.equal(res.status, 400, `${path}?${query}`);
        t.same(Object.keys(res.json ?? {}), ['error'], `${path}?${query}: {"error": ...}`);
      }
    }
    t.equal(
      (await d.request('GET', '/v1/requests?limit=1000', { token: token.admin })).status,
      200,
      '1000 is allowed',
    );
  });

  await t.test('events and queue page the same way, within scope', async (t) => {
    // One event per stored package, and one per stored package of alice's more.
    const catalog = Catalog.open(new DataLayout(dataDir));
    const events: Array<{ bagId: string; user: string }> = [];
    catalog.transaction(() => {
      for (const s of seeded.filter((s) => s.stored)) {
        catalog.events.add({
          bagId: s.bagId,
          type: 'ingestion',
          executor: s.user,
          outcome: 'success',
          detail: null,
        });
        events.push(s);
        if (s.user === 'alice') {
          catalog.events.add({
            bagId: s.bagId,
            type: 'fixity check',
            executor: 'admin',
            outcome: 'success',
            detail: null,
          });
          events.push(s);
        }
      }
    });
    await catalog.close();
    const all = await allPages(d, '/v1/events?limit=13', token.admin);
    t.same(
      all.items.map((e) => e.id),
      [...all.items.map((e) => e.id)].sort((a, b) => a - b),
      'ids ascending',
    );
    t.equal(new Set(all.items.map((e) => e.id)).size, all.items.length, 'each once');
    t.equal(all.items.filter((e) => e.type !== 'transfer').length, events.length);
    const alices = await allPages(d, '/v1/events?limit=7', token.alice);
    t.equal(alices.items.length, events.filter((e) => e.user === 'alice').length, "alice's events only");
    const one = seeded.find((s) => s.stored && s.user === 'alice')!;
    t.same(
      (await allPages(d, `/v1/packages/${one.bagId}/events?limit=1`, token.alice)).items.map((e) => e.type),
      ['ingestion', 'fixity check'],
    );
    t.same(
      (await allPages(d, `/v1/events?bag_id=${one.bagId}&limit=1`, token.alice)).items.map((e) => e.type),
      ['ingestion', 'fixity check'],
    );
    t.same(
      (await d.request('GET', `/v1/events?bag_id=${one.bagId}`, { token: token.bob })).json,
      [],
      "another user's package: nothing",
    );

    const queued: string[] = [];
    for (const s of seeded.filter((s) => !s.stored && s.user === 'bob').slice(0, 5)) {
      const res = await d.request('POST', `/v1/requests/${s.bagId}/complete`, { token: token.bob });
      t.equal(res.status, 201);
      queued.push(res.json.id);
    }
    t.same(
      (await allPages(d, '/v1/queue?limit=2', token.bob)).items.map((i) => i.id),
      queued,
      "bob's queue, in order",
    );
    t.same((await allPages(d, '/v1/queue?limit=2', token.alice)).items, [], 'none of it for alice');
    t.same(
      (await allPages(d, '/v1/queue?limit=3', token.admin)).items.map((i) => i.id),
      queued,
      'the admin sees all',
    );
  });
  // The daemon's own teardown stops it and then removes dataDir; a second removal registered here
  // could run while it is still writing there.
});

/**
 * The daemon's own memory (RssAnon) in bytes. Not VmRSS: that also counts the catalog pages the
 * list reads, mapped into the process (and their cached neighbours with each fault), which grow
 * with the list whatever the daemon holds and are the page cache's, not the daemon's.
 */
function rssOf(pid: number): number {
  const match = /RssAnon:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(match![1]) * 1024;
}

/**
 * Streams `path` from a freshly started daemon on `dataDir`, sampling its own memory; returns
 * how much it grew at the peak, the bytes received and the packages in them.
 */
async function streamedGrowth(
  t: Test,
  dataDir: string,
  path: string,
): Promise<{ growth: number; bytes: number; items: number; chunked: boolean }> {
  const d = await TestDaemon.start(t, { dataDir, keepDataDir: true });
  const pid = d.proc.pid!;
  // Warm up (JIT, fastify's first responses) with pages, then measure one whole list.
  for (let i = 0; i < 3; i++) await d.request('GET', '/v1/requests?limit=1000');
  const before = rssOf(pid);
  let peak = before;
  const sampler = setInterval(() => (peak = Math.max(peak, rssOf(pid))), 10);
  const res = await fetch(`${d.url}${path}`, { headers: { authorization: `Bearer ${d.adminToken}` } });
  let bytes = 0;
  let items = 0;
  let carry = '';
  const decoder = new TextDecoder();
  for await (const chunk of res.body!) {
    bytes += chunk.length;
    const text = carry + decoder.decode(chunk, { stream: true });
    items += (text.match(/"bag_id"/g) ?? []).length;
    carry = text.slice(-7); // a name cut in two is counted once the rest arrives
    items -= (carry.match(/"bag_id"/g) ?? []).length;
  }
  items += (carry.match(/"bag_id"/g) ?? []).length;
  clearInterval(sampler);
  peak = Math.max(peak, rssOf(pid));
  await d.stop();
  return {
    growth: peak - before,
    bytes,
    items,
    chunked: res.status === 200 && res.headers.get('transfer-encoding') === 'chunked',
  };
}

t.test('a whole list is streamed: the daemon does not hold it in memory', async (t) => {
  const n = 60_000;
  const dataDir = mkdtempSync(join(tmpdir(), 'preservd-lists-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const seeded = await seed(dataDir, n);
  // A third of the packages, then all of them, each from a daemon just started.
  const third = await streamedGrowth(t, dataDir, '/v1/requests?content_type=audio');
  const whole = await streamedGrowth(t, dataDir, '/v1/requests');
  t.equal(third.items, seeded.filter((s) => s.contentType === 'audio').length, 'every audio package');
  t.equal(whole.items, n, 'every package');
  t.ok(third.chunked && whole.chunked, 'streamed: 200, its length not known in advance');
  t.ok(whole.bytes > 15e6, `the whole list is ${(whole.bytes / 1e6).toFixed(1)} MB of JSON`);
  // Held whole, three times the list would take about three times the memory.
  const mb = (x: number) => (x / 1e6).toFixed(1);
  t.ok(
    whole.growth < 1.5 * third.growth + 8e6,
    `the daemon grew by ${mb(third.growth)} MB sending ${mb(third.bytes)} MB, by ${mb(whole.growth)} MB sending ${mb(whole.bytes)} MB`,
  );
});
