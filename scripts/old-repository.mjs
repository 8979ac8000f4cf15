#!/usr/bin/env node
/**
 * Regenerates test/fixtures/old-repository/: a repository written by preservd before OCFL (main at
 * 8080314), for the migration test (test/migrate/migrate.test.ts). It drives the OLD daemon, built
 * in a checkout of its own, through its real API and rsync: users, a grant, deposits (one failed),
 * the dir replica `mirror` verified, an audit; then records the API's answers and copies the data
 * directory (catalog, storage, admin token) and the replica's folder.
 *
 *   git worktree add /tmp/preservd-old 8080314 && cd /tmp/preservd-old &&
 *     ln -s /work/main/node_modules && npm run build && cd - &&
 *     node scripts/old-repository.mjs /tmp/preservd-old
 */
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const old = resolve(process.argv[2] ?? '/tmp/preservd-old');
const out = resolve(process.argv[3] ?? 'test/fixtures/old-repository');
const { TestDaemon } = await import(join(old, 'dist/test/helpers/daemon.js'));
const { ingestBag } = await import(join(old, 'dist/test/helpers/ingest.js'));

const teardowns = [];
const t = { teardown: (fn) => teardowns.push(fn) };
const work = mkdtempSync(join(tmpdir(), 'preservd-old-repo-'));
const dataDir = join(work, 'data');
const mirror = join(work, 'mirror');
mkdirSync(dataDir);
mkdirSync(mirror);
const d = await TestDaemon.start(t, {
  dataDir,
  keepDataDir: true,
  config: { replicas: [{ name: 'mirror', kind: 'dir', path: mirror }] },
});
try {
  const admin = d.adminToken;
  const alice = d.addUser('alice');
  const grant = d.cli(['grant', 'alice', 'content_manager', 'audio']);
  if (grant.code !== 0) throw new Error(grant.stderr);
  const bags = [
    await ingestBag(
      d,
      alice,
      { 'a.txt': 'alpha\n', 'sub/dir/b.bin': Buffer.alloc(70_000, 7) },
      { contentType: 'audio' },
    ),
    await ingestBag(d, alice, { 'é café.txt': 'unicode name\n', 'empty.txt': '' }, { contentType: 'audio' }),
    await ingestBag(d, admin, { 'x/y/z.dat': Buffer.from([0, 1, 2, 3, 255]) }, { algorithms: ['sha512'] }),
  ];
  await ingestBag(
    d,
    alice,
    { 'bad.txt': 'x' },
    { contentType: 'audio', corrupt: ['data/bad.txt'], expect: 'FAILED' },
  );
  for (let i = 0; ; i++) {
    if (d.cli(['replicas']).code === 0) break;
    if (i > 600) throw new Error('the mirror did not verify every package');
    await new Promise((r) => setTimeout(r, 100));
  }
  const audit = await d.request('POST', '/v1/audits', { token: admin });
  if (audit.status !== 201) throw new Error(`audit: ${audit.status} ${audit.text}`);
  const done = await d.waitForAudit(audit.json.id, undefined, 120_000);
  if (done.failures.length > 0) throw new Error(`audit failed: ${JSON.stringify(done.failures)}`);
  const answers = [];
  for (const { request } of bags) {
    const id = request.bag_id;
    const get = async (path) => (await d.request('GET', path, { token: admin })).json;
    answers.push({
      bagId: id,
      package: await get(`/v1/packages/${id}`),
      events: await get(`/v1/packages/${id}/events`),
    });
  }
  await d.stop();
  rmSync(out, { recursive: true, force: true });
  mkdirSync(join(out, 'data', 'catalog'), { recursive: true });
  cpSync(join(dataDir, 'catalog', 'data.mdb'), join(out, 'data', 'catalog', 'data.mdb'));
  cpSync(join(dataDir, 'storage'), join(out, 'data', 'storage'), { recursive: true });
  cpSync(join(dataDir, 'admin.token'), join(out, 'data', 'admin.token'));
  cpSync(mirror, join(out, 'mirror'), { recursive: true });
  writeFileSync(join(out, 'answers.json'), `${JSON.stringify({ alice, answers }, null, 2)}\n`);
  process.stdout.write(`wrote ${out}\n`);
} finally {
  for (const fn of teardowns.reverse()) await fn();
  rmSync(work, { recursive: true, force: true });
}
