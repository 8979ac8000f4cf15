/**
 * `preservd migrate` on a repository written by preservd before OCFL: test/fixtures/old-repository
 * (made by scripts/old-repository.mjs with the old daemon at 8080314: catalog, storage in
 * `ab/cd/ef/<bag_id>` folders, the dir replica `mirror`, and the API's answers then). Migrated,
 * then served by the new daemon: every file downloads byte for byte, the API's package and events
 * answers are the ones the old daemon gave (the storage location aside), the audit passes, and our
 * validator finds the primary and the replica valid OCFL roots. Killed at each step and run again,
 * it finishes with nothing lost. A package whose bytes do not match stays as it was, named, exit 1.
 * With the daemon running it refuses and changes nothing.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import t, { type Test } from 'tap';
import { Catalog } from '../../src/catalog/catalog.js';
import { packageObjectPath } from '../../src/ocfl/layout.js';
import { fsReader, validateRoot } from '../../src/ocfl/validate/index.js';
import { DataLayout } from '../../src/storage/layout.js';
import { cliPath, repoRoot, TestDaemon } from '../helpers/daemon.js';
import { bytesUnder } from '../helpers/walk.js';
import { node } from '../helpers/node.js';

const fixture = join(repoRoot, 'test/fixtures/old-repository');
const answers = JSON.parse(readFileSync(join(fixture, 'answers.json'), 'utf8')) as {
  answers: Array<{ bagId: string; package: Record<string, unknown>; events: unknown[] }>;
};
const oldStorage = join(fixture, 'data', 'storage');
const bagDir = (bagId: string) =>
  join(oldStorage, bagId.slice(0, 2), bagId.slice(2, 4), bagId.slice(4, 6), bagId);

interface Repo {
  dataDir: string;
  mirror: string;
  config: Record<string, unknown>;
  env: NodeJS.ProcessEnv;
}

/** A copy of the fixture to migrate: its data directory and its replica folder. */
function copyFixture(t: Test): Repo {
  const work = mkdtempSync(join(tmpdir(), 'preservd-migrate-'));
  t.teardown(() => rmSync(work, { recursive: true, force: true }));
  const dataDir = join(work, 'data');
  const mirror = join(work, 'mirror');
  cpSync(join(fixture, 'data'), dataDir, { recursive: true });
  cpSync(join(fixture, 'mirror'), mirror, { recursive: true });
  const config = { replicas: [{ name: 'mirror', kind: 'dir', path: mirror }], logLevel: 'warn' };
  const configPath = join(work, 'config.json');
  writeFileSync(configPath, JSON.stringify(config));
  const env = { ...process.env, PRESERVD_CONFIG: configPath, PRESERVD_DATA_DIR: dataDir };
  return { dataDir, mirror, config, env };
}

function migrate(repo: Repo, failpoint?: string) {
  const env = { ...repo.env };
  if (failpoint !== undefined) env.PRESERVD_FAILPOINT = failpoint;
  else delete env.PRESERVD_FAILPOINT;
  const r = spawnSync(...node([cliPath, 'migrate']), { env, encoding: 'utf8', timeout: 120_000 });
  return { code: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr };
}

/** The state a finished migration must leave: both roots valid, every bag's bytes in its object, nothing of the old layout. */
async function checkMigrated(t: Test, repo: Repo): Promise<void> {
  const storage = join(repo.dataDir, 'storage');
  for (const [name, root] of [
    ['primary', storage],
    ['mirror', repo.mirror],
  ] as const) {
    const report = await validateRoot(fsReader(root));
    t.ok(report.valid, `${name} is a valid OCFL root`, { problems: report.problems.slice(0, 5) });
    t.equal(report.objects.length, answers.answers.length, `${name} holds one object per package`);
    t.same(
      readdirSync(root).filter((n) => /^[0-9a-f]{2}$/.test(n)),
      [],
      `${name}: no folder of the old layout left`,
    );
    for (const { bagId } of answers.answers) {
      const content = join(root, packageObjectPath(bagId), 'v1', 'content');
      t.same(
        bytesUnder(content),
        bytesUnder(bagDir(bagId)),
        `${name}: ${bagId}'s bag, byte for byte, in v1/content`,
      );
    }
  }
  const catalog = Catalog.open(new DataLayout(repo.dataDir), { readOnly: true });
  try {
    for (const { bagId } of answers.answers) {
      t.equal(
        catalog.packages.get(bagId)?.storagePath,
        packageObjectPath(bagId),
        `${bagId}: catalog names the object`,
      );
      t.same(
        [...catalog.replication.verifiedFiles('mirror', bagId)],
        [],
        `${bagId}: no progress left under old paths`,
      );
    }
  } finally {
    await catalog.close();
  }
}

t.test(
  'a repository of an earlier release, migrated, serves the same packages from valid OCFL roots',
  async (t) => {
    const repo = copyFixture(t);
    const r = migrate(repo);
    t.equal(r.code, 0, `exit 0: ${r.stderr}`);
    t.match(
      r.stdout,
      /^migrated 3 packages to OCFL \(0 by an earlier run, \d+ bytes checked\), 0 skipped; replica mirror: 3 objects written, \d+ old keys deleted\n$/,
    );
    await checkMigrated(t, repo);

    const again = migrate(repo);
    t.equal(again.code, 0, 'run again, it has nothing to do');
    t.match(
      again.stdout,
      /^migrated 3 packages to OCFL \(3 by an earlier run, 0 bytes checked\), 0 skipped; replica mirror: 0 objects written, 0 old keys deleted/,
    );

    const d = await TestDaemon.start(t, { dataDir: repo.dataDir, keepDataDir: true, config: repo.config });
    const token = d.adminToken;
    for (const before of answers.answers) {
      const pkg = await d.request('GET', `/v1/packages/${before.bagId}`, { token });
      t.equal(pkg.status, 200);
      // The old daemon's answer, plus the `version` every stored package has since revisions.
      t.same(
        { ...pkg.json, storage_location: undefined },
        { ...before.package, storage_location: undefined, version: 1 },
        `${before.bagId}: the package answer is the old daemon's, at version 1`,
      );
      t.equal(pkg.json.storage_location, join(repo.dataDir, 'storage', packageObjectPath(before.bagId)));
      const events = await d.request('GET', `/v1/packages/${before.bagId}/events`, { token });
      t.same(events.json, before.events, `${before.bagId}: the events are the old daemon's`);
      for (const file of before.package.files as string[]) {
        const path = `/v1/packages/${before.bagId}/${file.split('/').map(encodeURIComponent).join('/')}`;
        const res = await fetch(`${d.url}${path}`, { headers: { authorization: `Bearer ${token}` } });
        t.equal(res.status, 200, `${file} downloads`);
        t.ok(
          Buffer.from(await res.arrayBuffer()).equals(readFileSync(join(bagDir(before.bagId), 'data', file))),
          `${before.bagId}/${file} byte for byte`,
        );
      }
    }
    const audit = await d.request('POST', '/v1/audits', { token });
    t.equal(audit.status, 201);
    const done = await d.waitForAudit(audit.json.id, undefined, 120_000);
    t.same(done.failures, [], 'the audit passes');
    t.equal(done.successes.length, answers.answers.length);

    const refused = migrate(repo);
    t.equal(refused.code, 2, 'refused while the daemon runs');
    t.match(
      refused.stderr,
      /migrate refused, nothing changed: the catalog is open in another process \(pid \d+/,
    );
    t.match(refused.stderr, /stop the daemon first/);
  },
);

t.test('killed at each step, run again, it finishes with nothing lost', async (t) => {
  for (const point of [
    'migrate:root-files',
    'migrate:moved',
    'migrate:assembled',
    'migrate:renamed@2',
    'migrate:replica-root',
    'migrate:replica-copied@2',
    'migrate:old-key-removed@7',
  ]) {
    const repo = copyFixture(t);
    const killed = migrate(repo, point);
    t.equal(killed.signal, 'SIGKILL', `killed at ${point}`);
    const r = migrate(repo);
    t.equal(r.code, 0, `after ${point}: exit 0 (${r.stderr})`);
    await checkMigrated(t, repo);
  }
});

t.test(
  'a package whose bytes do not match is left as it was and named; the others are migrated',
  async (t) => {
    const repo = copyFixture(t);
    const [bad, ...good] = answers.answers;
    const oldBag = join(repo.dataDir, 'storage', relative(oldStorage, bagDir(bad!.bagId)));
    const file = join(oldBag, 'data', 'a.txt');
    const bytes = readFileSync(file);
    bytes[0] = bytes[0]! ^ 1;
    writeFileSync(file, bytes);
    const before = bytesUnder(oldBag);
    const r = migrate(repo);
    t.equal(r.code, 1, 'exit 1');
    t.match(
      r.stderr,
      new RegExp(`skipped ${bad!.bagId}: its bytes do not match the catalog \\(.*data/a.txt`),
    );
    t.match(r.stdout, /migrated 2 packages to OCFL .*, 1 skipped; replica mirror: 2 objects written/);
    t.same(bytesUnder(oldBag), before, 'the damaged bag is where it was, untouched');
    const catalog = Catalog.open(new DataLayout(repo.dataDir), { readOnly: true });
    t.equal(catalog.packages.get(bad!.bagId)?.storagePath, relative(oldStorage, bagDir(bad!.bagId)));
    for (const { bagId } of good) t.equal(catalog.packages.get(bagId)?.storagePath, packageObjectPath(bagId));
    await catalog.close();
    t.ok(
      statSync(join(repo.mirror, relative(oldStorage, bagDir(bad!.bagId)))).isDirectory(),
      'its replica keys stay too',
    );
  },
);
