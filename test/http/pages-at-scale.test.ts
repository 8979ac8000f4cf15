/**
 * The pages on a catalog larger than one search budget (src/http/pages/search.ts): a whole
 * bag_id or external_id is found however old its package; a part of one pages newest first, every
 * match once, and a search that reads its budget without filling a page says so and links on;
 * a regular user's search and overview hold only theirs; the overview's counts and latest
 * failures come from the queue's indexes and agree with the records.
 *
 * The catalog is seeded through its own API before the daemon starts.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { Catalog } from '../../src/catalog/catalog.js';
import { DataLayout } from '../../src/storage/layout.js';
import { SEARCH_BUDGET } from '../../src/http/pages/search.js';
import { TestDaemon } from '../helpers/daemon.js';
import { getPage, Jar, logIn } from '../helpers/session.js';

const N = SEARCH_BUDGET + 4_000;
const OLDEST_NAMED = 5;

interface Seeded {
  bagId: string;
  externalId: string;
  user: string;
  contentType: string;
  // No PENDING items: the daemon's worker would take them up (and fail them) while the test reads.
  queue: 'none' | 'DONE' | 'FAILED';
  queueId?: number;
}

/** `N` packages, oldest first: one old one named `Needle-Old`, every 250th `batch-<i>`; every 10th deposited (a third of those failed). */
async function seed(dataDir: string): Promise<Seeded[]> {
  const catalog = Catalog.open(new DataLayout(dataDir));
  const out: Seeded[] = [];
  try {
    for (let start = 0; start < N; start += 4_000) {
      catalog.transaction(() => {
        for (let i = start; i < Math.min(N, start + 4_000); i++) {
          const s: Seeded = {
            bagId: randomUUID(),
            externalId: i === OLDEST_NAMED ? 'Needle-Old' : i % 250 === 0 ? `batch-${i}` : `ext-${i}`,
            user: i % 3 === 0 ? 'alice' : 'bob',
            contentType: i % 2 === 0 ? 'audio' : 'video',
            queue: i % 10 !== 0 ? 'none' : i % 30 === 0 ? 'FAILED' : 'DONE',
          };
          catalog.packages.create({
            bagId: s.bagId,
            externalId: s.externalId,
            contentType: s.contentType,
            user: s.user,
            capability: randomBytes(16).toString('hex'),
          });
          if (s.queue !== 'none') {
            const item = catalog.queue.enqueue(s.bagId, s.user);
            if (!('created' in item)) throw new Error('seeding: a second queue item');
            s.queueId = item.created.id;
            if (s.queue === 'DONE') catalog.queue.finish(item.created.id, { status: 'DONE' });
            if (s.queue === 'FAILED')
              catalog.queue.finish(item.created.id, {
                status: 'FAILED',
                errors: [{ code: 'bag-invalid', severity: 'error', message: `failure ${i}` }],
              });
          }
          out.push(s);
        }
      });
    }
  } finally {
    await catalog.close();
  }
  return out;
}

/** The bag_ids of the result rows, in page order, the summary line, and the older link. */
function results(html: string): { ids: string[]; summary: string; older: string | undefined } {
  const ids = [...html.matchAll(/<td><code>([0-9a-f-]{36})<\/code><\/td>/g)].map((m) => m[1]!);
  const summary = (/<p id="results-summary">([^<]*)<\/p>/.exec(html)?.[1] ?? '').replace(/\s+/g, ' ');
  const older = /<a href="([^"]+)" rel="next">Older packages<\/a>/.exec(html)?.[1]?.replaceAll('&amp;', '&');
  return { ids, summary, older };
}

t.test('search and overview on a catalog larger than the search budget', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'preservd-pages-scale-'));
  const seeded = await seed(dataDir);
  const d = await TestDaemon.start(t, { dataDir });
  const admin = new Jar();
  t.equal((await logIn(d, admin, d.adminToken)).res.status, 303);
  const alice = new Jar();
  t.equal((await logIn(d, alice, d.addUser('alice'))).res.status, 303);
  const newestFirst = (keep: (s: Seeded) => boolean) =>
    seeded
      .filter(keep)
      .reverse()
      .map((s) => s.bagId);

  await t.test('a whole external_id is one index read, however old its package', async (t) => {
    const page = results((await getPage(d, admin, '/packages?q=Needle-Old')).text);
    t.same(page.ids, [seeded[OLDEST_NAMED]!.bagId]);
    t.equal(page.summary, '1 package, named exactly.');
    const byId = results((await getPage(d, admin, `/packages?q=${seeded[OLDEST_NAMED]!.bagId}`)).text);
    t.same(byId.ids, [seeded[OLDEST_NAMED]!.bagId], 'and a whole bag_id');
    t.same(results((await getPage(d, alice, '/packages?q=Needle-Old')).text).ids, [], "not another user's");
  });

  await t.test('a part of one beyond the budget: said so, and found by following the link', async (t) => {
    const first = results((await getPage(d, admin, '/packages?q=needle-old')).text);
    t.same(first.ids, []);
    t.equal(
      first.summary,
      `No packages; ${SEARCH_BUDGET.toLocaleString('en')} packages read, older ones not searched yet.`,
    );
    t.ok(first.older);
    const next = results((await getPage(d, admin, first.older!)).text);
    t.same(next.ids, [seeded[OLDEST_NAMED]!.bagId]);
    t.equal(next.summary, '1 package further on.');
    t.equal(next.older, undefined);
  });

  await t.test('many matches: pages of 50, newest first, each once', async (t) => {
    const ids: string[] = [];
    const summaries: string[] = [];
    for (let path: string | undefined = '/packages?q=BATCH-'; path !== undefined;) {
      const page = results((await getPage(d, admin, path)).text);
      ids.push(...page.ids);
      summaries.push(page.summary);
      path = page.older;
    }
    t.same(
      ids,
      newestFirst((s) => s.externalId.startsWith('batch-')),
    );
    t.same(summaries, ['50 packages; more follow.', `${ids.length - 50} packages further on.`]);
    const mine = results((await getPage(d, alice, '/packages?q=batch-')).text);
    t.same(
      mine.ids,
      newestFirst((s) => s.externalId.startsWith('batch-') && s.user === 'alice'),
      "a user's: only theirs",
    );
    const audio = results((await getPage(d, alice, '/packages?q=batch-&content_type=audio')).text);
    t.same(
      audio.ids,
      newestFirst(
        (s) => s.externalId.startsWith('batch-') && s.user === 'alice' && s.contentType === 'audio',
      ),
      'with a content type',
    );
    const latest = results((await getPage(d, admin, '/packages?content_type=video')).text);
    t.same(
      latest.ids,
      newestFirst((s) => s.contentType === 'video').slice(0, 50),
      'no query: the latest deposits',
    );
  });

  await t.test('a cursor that is not ours: 400', async (t) => {
    t.equal((await getPage(d, admin, '/packages?q=x&before=nonsense')).status, 400);
  });

  await t.test("the overview's counts and latest failures agree with the records", async (t) => {
    const expect = (keep: (s: Seeded) => boolean) => {
      const mine = seeded.filter(keep);
      const count = (status: Seeded['queue'] | 'PENDING') => mine.filter((s) => s.queue === status).length;
      const failures = mine
        .filter((s) => s.queue === 'FAILED')
        .reverse()
        .slice(0, 5)
        .map((s) => s.bagId);
      return { pending: count('PENDING'), done: count('DONE'), failed: count('FAILED'), failures };
    };
    for (const [who, jar, keep] of [
      ['admin', admin, () => true],
      ['alice', alice, (s: Seeded) => s.user === 'alice'],
    ] as const) {
      const html = (await getPage(d, jar, '/')).text;
      const shown = (status: string) =>
        Number(
          new RegExp(`<strong>([\\d,]+)</strong> <span class="status-${status}">`)
            .exec(html)?.[1]
            ?.replaceAll(',', ''),
        );
      const failures = [...html.matchAll(/<td><a href="\/packages\/([0-9a-f-]{36})">/g)].map((m) => m[1]);
      const want = expect(keep);
      t.ok(want.failed > 5, `${who}: more failures than the overview shows`);
      t.same(
        { pending: shown('PENDING'), done: shown('DONE'), failed: shown('FAILED'), failures },
        want,
        who,
      );
    }
  });
});
