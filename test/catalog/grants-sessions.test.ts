/**
 * The grants and sessions stores on a real LMDB catalog: refused grants change nothing and name
 * every problem, grants join outer transactions, sessions keep only digests, expire, end at
 * logout and with the token that opened them; a login's cost does not grow with the number of
 * sessions (counted in records touched), the per-user cap and the idle limit hold.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { open, type RootDatabase } from 'lmdb';
import t from 'tap';
import { Catalog } from '../../src/catalog/catalog.js';
import { DataLayout } from '../../src/storage/layout.js';
import { SessionStore, SWEEP_BATCH } from '../../src/catalog/sessions.js';
import { tokenDigest } from '../../src/catalog/users.js';

const TYPES = ['audio', 'video'];

function openCatalog(t: { teardown(fn: () => unknown): void }): Catalog {
  const dir = mkdtempSync(join(tmpdir(), 'preservd-grants-'));
  const catalog = Catalog.open(new DataLayout(dir));
  t.teardown(async () => {
    await catalog.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return catalog;
}

t.test('grants: refused together, idempotent, revocable, all or nothing', async (t) => {
  const catalog = openCatalog(t);
  catalog.users.add('alice', false);
  t.throws(() => catalog.grants.grant('bob', 'boss', 'films', TYPES), {
    message:
      'grant refused, nothing changed: no user "bob" (preservd user add bob creates one); no role "boss": the roles are viewer, content_manager, admin; no content type "films": the scope is one of audio, video, all',
  });
  t.throws(() => catalog.grants.grant('alice', 'viewer', 'films', TYPES), /no content type "films"/);
  t.same(catalog.grants.list(), [], 'nothing written');

  t.equal(catalog.grants.grant('alice', 'viewer', 'video', TYPES), true);
  t.equal(catalog.grants.grant('alice', 'viewer', 'video', TYPES), false, 'already held');
  t.equal(catalog.grants.grant('alice', 'admin', 'all', TYPES), true);
  t.same(
    catalog.grants.of('alice').map((g) => [g.user, g.role, g.scope]),
    [
      ['alice', 'admin', 'all'],
      ['alice', 'viewer', 'video'],
    ],
  );
  t.same(catalog.grants.of('bob'), []);

  t.throws(() => catalog.grants.revoke('alice', 'content_manager', 'video'), {
    message: 'alice holds no grant content_manager on video',
  });
  catalog.grants.revoke('alice', 'admin', 'all');
  t.same(
    catalog.grants.of('alice').map((g) => g.role),
    ['viewer'],
  );

  // Inside a transaction that fails later, a grant is rolled back with it.
  t.throws(() =>
    catalog.transaction(() => {
      catalog.grants.grant('alice', 'content_manager', 'audio', TYPES);
      throw new Error('later step failed');
    }),
  );
  t.same(
    catalog.grants.of('alice').map((g) => g.role),
    ['viewer'],
    'rolled back',
  );
});

t.test('sessions: digests only, expiry, logout, the token’s revocation', async (t) => {
  const catalog = openCatalog(t);
  catalog.users.add('alice', false);
  const token = catalog.users.issueToken('alice');
  const { secret, session } = catalog.sessions.open('alice', token.secret, 60_000);
  t.ok(Buffer.from(secret, 'base64url').length >= 32, '256 random bits');
  t.equal(session.digest, tokenDigest(secret));
  t.notOk(JSON.stringify(session).includes(secret), 'the secret is not stored');
  t.notOk(JSON.stringify(session).includes(token.secret), 'nor the token');
  t.equal(catalog.sessions.find(secret)?.userName, 'alice');
  t.equal(catalog.sessions.find(`${secret}x`), undefined);
  t.equal(catalog.sessions.find('x'.repeat(5000)), undefined, 'an absurd cookie finds nothing');

  catalog.sessions.end(secret);
  t.equal(catalog.sessions.find(secret), undefined, 'logged out');

  const short = catalog.sessions.open('alice', token.secret, 30);
  await new Promise((r) => setTimeout(r, 60));
  t.equal(catalog.sessions.find(short.secret), undefined, 'expired');

  const live = catalog.sessions.open('alice', token.secret, 60_000);
  t.equal(catalog.sessions.find(live.secret)?.userName, 'alice');
  catalog.users.revokeToken(token.id);
  t.equal(catalog.sessions.find(live.secret), undefined, 'ended with its token');
});

/**
 * A real LMDB root whose databases count every record they read or write, so a test can say how
 * much of the catalog one call touched (not how long it took).
 */
function countingRoot(root: RootDatabase): { root: RootDatabase; touched: () => number; reset: () => void } {
  let touched = 0;
  const counted = <T extends object>(db: T): T =>
    new Proxy(db, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver) as unknown;
        if (typeof value !== 'function') return value;
        if (prop === 'getRange' || prop === 'getKeys' || prop === 'getValues')
          return (...args: unknown[]) => {
            const range = (value as (...a: unknown[]) => Iterable<unknown>).apply(target, args);
            return (function* () {
              for (const item of range) {
                touched++;
                yield item;
              }
            })();
          };
        if (prop === 'get' || prop === 'put' || prop === 'remove')
          return (...args: unknown[]) => {
            touched++;
            return (value as (...a: unknown[]) => unknown).apply(target, args);
          };
        return (value as (...a: unknown[]) => unknown).bind(target);
      },
    });
  const wrapped = new Proxy(root, {
    get(target, prop, receiver) {
      if (prop === 'openDB')
        return (...args: unknown[]) =>
          counted((target.openDB as (...a: unknown[]) => object).apply(target, args));
      const value = Reflect.get(target, prop, receiver) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { root: wrapped, touched: () => touched, reset: () => (touched = 0) };
}

t.test(
  'sessions at scale: a login touches a bounded number of records, whatever the number of sessions',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'preservd-sessions-'));
    const lmdbRoot = open({ path: dir, maxDbs: 8, compression: false });
    t.teardown(async () => {
      await lmdbRoot.close();
      rmSync(dir, { recursive: true, force: true });
    });
    const counting = countingRoot(lmdbRoot);
    const transactor = {
      transaction: <T>(fn: () => T): T => lmdbRoot.transactionSync(fn),
      reserve: () => {},
    };
    const sessions = new SessionStore(counting.root, transactor, () => true);
    const limits = { maxPerUser: 5, idleMs: 0 };

    // 20,000 live sessions of 20,000 users, then 300 that expire soon after (each login removes
    // expired ones, so they are opened last and left to expire).
    for (let start = 0; start < 20_000; start += 5_000) {
      lmdbRoot.transactionSync(() => {
        for (let i = start; i < start + 5_000; i++) sessions.open(`user${i}`, 'token', 3600_000, limits);
      });
    }
    lmdbRoot.transactionSync(() => {
      for (let i = 0; i < 300; i++) sessions.open(`gone${i}`, 'token', 1000, limits);
    });
    await new Promise((r) => setTimeout(r, 1100));

    counting.reset();
    const mallory = sessions.open('mallory', 'token', 3600_000, limits);
    t.ok(
      counting.touched() <= 5 * SWEEP_BATCH + 20,
      `one login touched ${counting.touched()} records of 20,000 sessions`,
    );
    t.ok(counting.touched() > SWEEP_BATCH, 'it removed a batch of the expired ones');
    t.equal(sessions.find(mallory.secret)?.userName, 'mallory');

    counting.reset();
    const again = sessions.open('mallory', 'token', 3600_000, limits);
    t.ok(counting.touched() <= 5 * SWEEP_BATCH + 20, `the next login too (${counting.touched()})`);
    t.equal(sessions.find(again.secret)?.userName, 'mallory');

    // The expired ones are refused, and gone after enough logins (a batch each).
    sessions.open('mallory', 'token', 3600_000, limits);
    t.equal(sessions.sweep(Date.now(), 10_000), 0, 'three logins removed all 300 expired sessions');

    // The per-user cap: the oldest goes.
    const opened = Array.from({ length: 7 }, () => sessions.open('carol', 'token', 3600_000, limits).secret);
    t.same(
      opened.map((s) => sessions.find(s) !== undefined),
      [false, false, true, true, true, true, true],
      'carol keeps her 5 newest sessions',
    );
    counting.reset();
    sessions.open('carol', 'token', 3600_000, limits);
    t.ok(counting.touched() <= 30, `a login at the cap touched ${counting.touched()} records`);
    t.equal(sessions.find(opened[2]!), undefined, 'the oldest went');
  },
);

t.test(
  'sessions: expired ones are refused and removed; idle ones refused; a login replaces the browser’s last session',
  async (t) => {
    const catalog = openCatalog(t);
    catalog.users.add('alice', false);
    const token = catalog.users.issueToken('alice');
    // A clock the test moves: timers on a loaded machine overshoot, and this is about the limits.
    const clock = Date.now;
    let now = clock();
    Date.now = () => now;
    t.teardown(() => void (Date.now = clock));
    const short = catalog.sessions.open('alice', token.secret, 30);
    now += 30;
    t.equal(catalog.sessions.find(short.secret), undefined, 'expired: refused');
    catalog.sessions.open('alice', token.secret, 60_000);
    t.equal(catalog.sessions.sweep(now, 100), 0, 'and removed by the next login');

    const idle = catalog.sessions.open('alice', token.secret, 60_000, { maxPerUser: 20, idleMs: 200 });
    now += 199;
    t.ok(catalog.sessions.find(idle.secret), 'used within its idle limit (the use is written)');
    now += 199;
    t.ok(catalog.sessions.find(idle.secret), '398 ms after login, 199 ms after its last use: live');
    now += 200;
    t.equal(catalog.sessions.find(idle.secret), undefined, 'unused for as long as its idle limit: refused');

    const first = catalog.sessions.open('alice', token.secret, 60_000);
    const second = catalog.sessions.open('alice', token.secret, 60_000, {
      maxPerUser: 20,
      idleMs: 0,
      replaces: first.secret,
    });
    t.equal(
      catalog.sessions.find(first.secret),
      undefined,
      'logging in again ends the browser’s previous session',
    );
    t.equal(catalog.sessions.find(second.secret)?.userName, 'alice');
  },
);

t.test('logins within one millisecond: the per-user cap still ends the oldest', async (t) => {
  const catalog = openCatalog(t);
  catalog.users.add('carol', false);
  const token = catalog.users.issueToken('carol');
  const now = Date.now();
  const clock = Date.now;
  Date.now = () => now; // seven logins on one clock reading
  t.teardown(() => void (Date.now = clock));
  const limits = { maxPerUser: 5, idleMs: 0 };
  const opened = Array.from({ length: 7 }, () =>
    catalog.sessions.open('carol', token.secret, 60_000, limits),
  );
  Date.now = clock;
  t.same(
    opened.map((o) => catalog.sessions.find(o.secret) !== undefined),
    [false, false, true, true, true, true, true],
    'the five newest are kept',
  );
  t.same(
    opened.map((o) => o.session.createdAt - now),
    [0, 1, 2, 3, 4, 5, 6],
    'each a millisecond later than the one before',
  );
});

t.test('sessions from before the indexes are indexed when the catalog opens', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'preservd-sessions-old-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const first = Catalog.open(new DataLayout(dir));
  first.users.add('alice', false);
  const token = first.users.issueToken('alice');
  const kept = first.sessions.open('alice', token.secret, 60_000);
  const expired = first.sessions.open('alice', token.secret, -1);
  await first.close();
  // Take the indexes away, as a catalog written before them has none.
  const raw = open({ path: join(dir, 'catalog'), maxDbs: 64, compression: false });
  for (const name of ['sessionsByExpiry', 'sessionsByUser']) await raw.openDB({ name }).clearAsync();
  await raw.close();

  const catalog = Catalog.open(new DataLayout(dir));
  t.teardown(() => catalog.close());
  t.equal(catalog.sessions.find(kept.secret)?.userName, 'alice', 'an older session still works');
  t.equal(catalog.sessions.sweep(Date.now(), 100), 1, 'and the expired one is found by the index');
  t.equal(catalog.sessions.find(expired.secret), undefined);
});
