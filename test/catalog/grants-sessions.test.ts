/**
 * The grants and sessions stores on a real LMDB catalog: refused grants change nothing and name
 * every problem, grants join outer transactions, sessions keep only digests, expire, end at
 * logout and with the token that opened them.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { Catalog } from '../../src/catalog/catalog.js';
import { tokenDigest } from '../../src/catalog/users.js';

const TYPES = ['audio', 'video'];

function openCatalog(t: { teardown(fn: () => unknown): void }): Catalog {
  const dir = mkdtempSync(join(tmpdir(), 'preservd-grants-'));
  const catalog = Catalog.open(dir);
  t.teardown(async () => {
    await catalog.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return catalog;
}

t.test('grants: refused together, idempotent, revocable, all or nothing', async (t) => {
  const catalog = openCatalog(t);
  catalog.users.add('alice', false);
  t.throws(
    () => catalog.grants.grant('bob', 'boss', 'films', TYPES),
    { message: 'grant refused, nothing changed: no user "bob" (preservd user add bob creates one); no role "boss": the roles are viewer, content_manager, admin; no content type "films": the scope is one of audio, video, all' },
  );
  t.throws(() => catalog.grants.grant('alice', 'viewer', 'films', TYPES), /no content type "films"/);
  t.same(catalog.grants.list(), [], 'nothing written');

  t.equal(catalog.grants.grant('alice', 'viewer', 'video', TYPES), true);
  t.equal(catalog.grants.grant('alice', 'viewer', 'video', TYPES), false, 'already held');
  t.equal(catalog.grants.grant('alice', 'admin', 'all', TYPES), true);
  t.same(catalog.grants.of('alice').map((g) => [g.user, g.role, g.scope]), [['alice', 'admin', 'all'], ['alice', 'viewer', 'video']]);
  t.same(catalog.grants.of('bob'), []);

  t.throws(() => catalog.grants.revoke('alice', 'content_manager', 'video'), { message: 'alice holds no grant content_manager on video' });
  catalog.grants.revoke('alice', 'admin', 'all');
  t.same(catalog.grants.of('alice').map((g) => g.role), ['viewer']);

  // Inside a transaction that fails later, a grant is rolled back with it.
  t.throws(() =>
    catalog.transaction(() => {
      catalog.grants.grant('alice', 'content_manager', 'audio', TYPES);
      throw new Error('later step failed');
    }),
  );
  t.same(catalog.grants.of('alice').map((g) => g.role), ['viewer'], 'rolled back');
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
