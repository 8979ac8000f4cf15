/**
 * `preservd backup DEST` while the daemon runs: the copy is a whole catalog as of the moment it
 * was taken, the daemon goes on serving, and a data directory restored from the copy plus the
 * storage tree serves the same packages to the same tokens. Refuses a non-empty DEST.
 */
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { Catalog } from '../../src/catalog/catalog.js';
import { DataLayout } from '../../src/storage/layout.js';
import { TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';

t.test('a hot backup of the catalog restores a working repository', async (t) => {
  const scratch = mkdtempSync(join(tmpdir(), 'preservd-backup-'));
  t.teardown(() => rmSync(scratch, { recursive: true, force: true }));
  const d = await TestDaemon.start(t);
  const alice = d.addUser('alice');
  const stored = await ingestBag(d, alice, {
    'data/a.txt': 'first bag\n',
    'data/b/c.bin': Buffer.alloc(70_000, 7),
  });
  const bagId: string = stored.request.bag_id;

  const dest = join(scratch, 'copy');
  const backup = d.cli(['backup', dest]);
  t.equal(backup.code, 0, backup.stderr);
  t.match(
    backup.stdout,
    /catalog copied to .*catalog\/data\.mdb: schema \d+, 1 packages \(1 stored\), 2 users/,
  );

  // The daemon keeps working after (and while) the copy is taken; what comes later is not in it.
  const later = await d.createRequest(alice, {
    bag_id: '0d7e4c1a-5b1f-4a7e-9c3b-2f6a8e1d4c9b',
    external_id: 'later',
  });
  t.equal(later.bag_id, '0d7e4c1a-5b1f-4a7e-9c3b-2f6a8e1d4c9b');

  const copy = Catalog.open(new DataLayout(dest), { readOnly: true });
  t.ok(copy.packages.get(bagId)?.stored, 'the stored package is in the copy');
  t.same(
    JSON.parse(copy.files.payloadListJson(bagId).toString('utf8')).sort(),
    ['data/a.txt', 'data/b/c.bin'],
    'with its files',
  );
  t.equal(
    copy.packages.get('0d7e4c1a-5b1f-4a7e-9c3b-2f6a8e1d4c9b'),
    undefined,
    'a request made after the copy is not in it',
  );
  await copy.close();

  // Restore: the copied catalog and the storage tree make a new data directory.
  const restored = join(scratch, 'restored');
  mkdirSync(restored);
  cpSync(join(dest, 'catalog'), join(restored, 'catalog'), { recursive: true });
  cpSync(join(d.dataDir, 'storage'), join(restored, 'storage'), { recursive: true });
  await d.stop();
  const r = await TestDaemon.start(t, { dataDir: restored, keepDataDir: true });
  const pkg = await r.request('GET', `/v1/packages/${bagId}`, { token: alice });
  t.equal(pkg.status, 200, 'the same token sees its package');
  t.equal(pkg.json.stored, true);
  const file = await r.request('GET', `/v1/packages/${bagId}/data/a.txt`, { token: alice });
  t.equal(file.status, 200);
  t.equal(file.text, 'first bag\n', 'and gets its bytes back');
  const audit = await r.request('POST', '/v1/audits', {
    token: r.cli(['token', 'issue', 'admin']).stdout.trim().split('\n').at(-1)!,
  });
  t.equal(audit.status, 201, 'an audit can run on the restored repository');
});

t.test('backup refuses a folder that is not empty, and the data directory itself', async (t) => {
  const d = await TestDaemon.start(t);
  const busy = mkdtempSync(join(tmpdir(), 'preservd-backup-busy-'));
  t.teardown(() => rmSync(busy, { recursive: true, force: true }));
  writeFileSync(join(busy, 'something'), 'keep me');
  const refused = d.cli(['backup', busy]);
  t.equal(refused.code, 2);
  t.match(refused.stderr, /is not empty/);
  t.equal(readFileSync(join(busy, 'something'), 'utf8'), 'keep me', 'nothing in it was touched');
  const self = d.cli(['backup', d.dataDir]);
  t.equal(self.code, 2);
  t.match(self.stderr, /the data directory itself/);
  const usage = d.cli(['backup']);
  t.equal(usage.code, 2);
  t.match(usage.stderr, /usage: preservd backup DEST/);
});

t.test(
  'the copy is private whatever the umask: folders 0700, files 0600 (security-probe.md, finding 6)',
  async (t) => {
    const d = await TestDaemon.start(t);
    const alice = d.addUser('alice');
    await d.createRequest(alice, {
      bag_id: '5b9e2f3c-8a1d-4c6e-9f0b-7d2a4e6c8b1f',
      external_id: 'open-at-backup',
    }); // its link is in the copy
    const scratch = mkdtempSync(join(tmpdir(), 'preservd-backup-modes-'));
    t.teardown(() => rmSync(scratch, { recursive: true, force: true }));
    const made = join(scratch, 'made-beforehand');
    mkdirSync(made, { mode: 0o755 });
    const previous = process.umask(0o022);
    try {
      for (const dest of [join(scratch, 'new'), made]) {
        const backup = d.cli(['backup', dest]);
        t.equal(backup.code, 0, backup.stderr);
        const modes = walkModes(dest);
        t.ok(modes.length >= 3, `${JSON.stringify(modes)}`);
        for (const [path, mode, isDir] of modes)
          t.equal(mode, isDir ? 0o700 : 0o600, `${path}: ${mode.toString(8)}`);
      }
    } finally {
      process.umask(previous);
    }
  },
);

/** [path, permission bits, is a folder] of DEST and everything under it. */
function walkModes(dir: string): Array<[string, number, boolean]> {
  const found: Array<[string, number, boolean]> = [[dir, statSync(dir).mode & 0o777, true]];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) found.push(...walkModes(path));
    else found.push([path, statSync(path).mode & 0o777, false]);
  }
  return found;
}
