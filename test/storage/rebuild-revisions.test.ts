/**
 * A rebuild of a repository whose package was revised twice (issue 26 on issue 25's `preservd
 * rebuild --from`), through the real daemon, its rsync and HTTP: v2 changes a file, adds one and
 * removes one; v3 changes another, brings the removed one back as it was in v1 (its bytes then
 * v1's content) and has an empty note. The catalog is lost (rebuilt from the primary), or the
 * whole data dir (rebuilt from a dir replica, the primary then restored from it); every versioned
 * answer comes back as it was: the package's `version`, the versions list and each version's
 * show, each revision, each version's file downloads and zip byte for byte, the events naming the
 * versions, and the audit passes over every version.
 */
import { createHash } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { packageObjectPath } from '../../src/ocfl/layout.js';
import { fsReader, validateObject } from '../../src/ocfl/validate/index.js';
import { TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';
import { revise } from '../helpers/revise.js';
import { replicaFolder, waitForCopies } from '../replicas/fixtures/replica-world.js';

const sha256 = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

async function bytesOf(d: TestDaemon, path: string): Promise<Buffer> {
  const res = await fetch(`${d.url}${path}`, { headers: { authorization: `Bearer ${d.adminToken}` } });
  if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${await res.text()}`);
  return Buffer.from(await res.arrayBuffer());
}

/** Every answer about the packages' versions, each download hashed. */
async function snapshot(d: TestDaemon, bagIds: string[]): Promise<Record<string, unknown>> {
  const snap: Record<string, unknown> = {};
  const json = async (path: string): Promise<any> => {
    const res = await d.request('GET', path);
    if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${res.text}`);
    return res.json;
  };
  for (const bagId of bagIds) {
    const base = `/v1/packages/${bagId}`;
    const pkg = await json(base);
    // A copy counts as verified again only once it was read back after the rebuild.
    snap[base] = { ...pkg, replicas: pkg.replicas.map((r: any) => ({ ...r, verified_at: undefined })) };
    snap[`${base}/download`] = sha256(await bytesOf(d, `${base}/download`));
    snap[`${base}/versions`] = await json(`${base}/versions`);
    for (let n = 1; n <= pkg.version; n++) {
      const at = `${base}/versions/${n}`;
      const shown = await json(at);
      snap[at] = { ...shown, replicas: undefined };
      if (n > 1) snap[`${base}/revisions/${n}`] = await json(`${base}/revisions/${n}`);
      snap[`${at}/download`] = sha256(await bytesOf(d, `${at}/download`));
      for (const file of shown.files as string[]) {
        const name = file.split('/').map(encodeURIComponent).join('/');
        snap[`${at}/${file}`] = sha256(await bytesOf(d, `${at}/${name}`));
      }
    }
    // The events a rebuild brings back: not those a restore adds, and of the fixity checks the latest.
    snap[`${base}/events`] = ((await json(`${base}/events`)) as any[]).filter(
      (e) => !['recovery', 'replication', 'fixity check'].includes(e.type),
    );
  }
  return snap;
}

/** A repository with a package revised twice, another never revised, copied to a dir replica. */
async function revisedRepository(t: Test, keep: string) {
  const config = { replicas: [{ name: 'keep', kind: 'dir', path: keep }], storage: { recordDelayMs: 100 } };
  const d = await TestDaemon.start(t, { keepDataDir: true, config });
  const { request, bagDir } = await ingestBag(d, d.adminToken, {
    'a.txt': 'alpha\n',
    'b.txt': 'bravo\n',
    'c.txt': 'charlie\n',
    'deep/d.bin': Buffer.alloc(70_000, 3),
  });
  const bagId: string = request.bag_id;
  await revise(d, bagId, bagDir, 2, 'b was wrong, c not ours, e forgotten', (data) => {
    writeFileSync(join(data, 'b.txt'), 'BRAVO\n');
    writeFileSync(join(data, 'e.txt'), 'echo\n');
    rmSync(join(data, 'c.txt'));
  });
  await revise(d, bagId, bagDir, 3, '', (data) => {
    writeFileSync(join(data, 'a.txt'), 'ALPHA, at last\n');
    writeFileSync(join(data, 'c.txt'), 'charlie\n');
  });
  const other = (await ingestBag(d, d.adminToken, { 'o.txt': 'only once\n' })).request.bag_id as string;
  const bagIds = [bagId, other];
  for (const id of bagIds) await waitForCopies(d, id, 'verified', 180_000);
  const audit = d.cli(['audit', '--wait'], { PRESERVD_TOKEN: d.adminToken });
  t.equal(audit.code, 0, `the audit before passes ${audit.stdout}${audit.stderr}`);
  const before = await snapshot(d, bagIds);
  t.match(before[`/v1/packages/${bagId}`], {
    version: 3,
    files: ['a.txt', 'b.txt', 'c.txt', 'deep/d.bin', 'e.txt'],
  });
  t.match(before[`/v1/packages/${bagId}/versions/2`], { files: ['a.txt', 'b.txt', 'deep/d.bin', 'e.txt'] });
  t.equal(await d.stop(), 0, 'stopped');
  return { d, config, bagId, bagIds, before };
}

/** The daemon on the rebuilt catalog: every answer as before, the audit passing over every version. */
async function afterRebuild(t: Test, world: Awaited<ReturnType<typeof revisedRepository>>): Promise<void> {
  const { d, config, bagId, bagIds, before } = world;
  const after = await TestDaemon.start(t, { dataDir: d.dataDir, config });
  const issued = after.cli(['token', 'issue', 'admin']);
  t.equal(issued.code, 0, 'a new admin token');
  writeFileSync(join(after.dataDir, 'admin.token'), `${issued.stdout.trim().split('\n').at(-1)!}\n`, {
    mode: 0o600,
  });
  for (const id of bagIds) await waitForCopies(after, id, 'verified', 180_000);
  const now = await snapshot(after, bagIds);
  for (const key of Object.keys(before)) t.same(now[key], before[key], key);
  t.same(Object.keys(now), Object.keys(before), 'nothing more answered');
  const events = now[`/v1/packages/${bagId}/events`] as any[];
  for (const n of [2, 3])
    t.ok(
      events.some((e) => e.type === 'ingestion' && String(e.detail).startsWith(`version ${n}:`)),
      `the event of version ${n} came back`,
    );
  const object = join(after.dataDir, 'storage', packageObjectPath(bagId));
  const report = await validateObject(fsReader(object), '', { digests: true });
  t.equal(report.valid, true, `the primary object is valid OCFL ${JSON.stringify(report.problems)}`);
  const audited = after.cli(['audit', '--wait'], { PRESERVD_TOKEN: after.adminToken });
  t.equal(audited.code, 0, `the audit after passes over every version ${audited.stdout}${audited.stderr}`);
}

t.test('the catalog lost: rebuilt from the primary, every version as it was', async (t) => {
  const world = await revisedRepository(t, replicaFolder(t));
  rmSync(join(world.d.dataDir, 'catalog'), { recursive: true, force: true });
  const rebuilt = world.d.cli(['rebuild', '--from', 'primary']);
  t.equal(rebuilt.code, 0, `rebuild --from primary: ${rebuilt.stdout}${rebuilt.stderr}`);
  t.match(rebuilt.stdout, /^rebuilt 2 packages from primary .* 0 skipped/);
  await afterRebuild(t, world);
});

t.test(
  'the data dir lost: rebuilt from a dir replica, the primary restored with every version',
  async (t) => {
    const world = await revisedRepository(t, replicaFolder(t));
    rmSync(world.d.dataDir, { recursive: true, force: true });
    const rebuilt = world.d.cli(['rebuild', '--from', 'keep']);
    t.equal(rebuilt.code, 0, `rebuild --from keep: ${rebuilt.stdout}${rebuilt.stderr}`);
    t.match(rebuilt.stdout, /^rebuilt 2 packages from keep .* 0 skipped/);
    await afterRebuild(t, world);
  },
);
