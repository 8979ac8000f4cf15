/**
 * Every folder the daemon makes under its data directory has the mode `DataLayout` names for it
 * (security-probe: landing folders are upload capabilities). A real daemon, started under umask 0
 * so that a folder made without the layout's mode shows as 0777, takes an upload, a complete and
 * a rotated link, and stops; then the whole data directory is walked.
 */
import { randomUUID } from 'node:crypto';
import { readdirSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import t from 'tap';
import { DataLayout } from '../../src/storage/layout.js';
import { rsyncUpload, TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';
import { makeBag } from '../helpers/make-bag.js';

const modeOf = (path: string) => statSync(path).mode & 0o777;

function foldersUnder(dir: string): string[] {
  const found: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (!entry.isDirectory()) continue;
    found.push(join(dir, entry.name), ...foldersUnder(join(dir, entry.name)));
  }
  return found;
}

/** The mode the layout names for a folder, with why; undefined for a folder it does not name. */
function expectedMode(layout: DataLayout, path: string): [mode: number, why: string] | undefined {
  const named = layout.folders.find(([folder]) => folder === path);
  if (named !== undefined) return [named[1], 'named by the layout'];
  const inLanding = relative(layout.landing, path).split(sep);
  // rsync makes an upload's own folders with the landing folder's mode (`incoming chmod`, rsync/config.ts).
  if (!inLanding[0]!.startsWith('..'))
    return [layout.uploadFolderMode, inLanding.length === 1 ? 'an upload folder' : 'inside an upload'];
  const inStorage = relative(layout.storage, path).split(sep);
  if (inStorage[0]!.startsWith('..')) return undefined;
  // The OCFL root: extensions/<name>, abc/def/012 shards, the object and its v1 folder, then the
  // upload folder as it was moved in, v1/content.
  if (inStorage[0] === 'extensions') return [layout.storedFolderMode, "the root's extensions"];
  if (inStorage.length <= 3) return [layout.storedFolderMode, 'a storage shard'];
  if (inStorage.length <= 5) return [layout.storedFolderMode, 'an object or its version'];
  return [layout.uploadFolderMode, 'a stored upload folder'];
}

t.test('after an upload, a complete, a rotation and a stop, every folder has its mode', async (t) => {
  const umask = process.umask(0); // inherited by the daemon
  let d: TestDaemon;
  try {
    d = await TestDaemon.start(t);
  } finally {
    process.umask(umask);
  }
  const alice = d.addUser('alice');
  d.addUser('bob');
  t.equal(d.cli(['grant', 'bob', 'content_manager', 'digital']).code, 0);
  const stored = await ingestBag(d, alice, { 'sub/deeper/a.txt': 'stored\n' }, { contentType: 'digital' });

  // An open request with part of an upload, whose link a revoke rotates.
  const open = await d.createRequest(alice, {
    bag_id: randomUUID(),
    external_id: 'modes-open',
    content_type: 'digital',
  });
  const bag = join(t.testdir(), 'bag');
  await makeBag(bag, {
    files: { 'part/b.txt': 'partial\n' },
    chipmunkInfo: { externalId: open.external_id, bagId: open.bag_id, contentType: 'digital' },
  });
  t.equal(rsyncUpload(bag, open.upload_link).code, 0);
  const revoked = d.cli(['revoke', 'bob', 'content_manager', 'digital']);
  t.equal(revoked.code, 0, revoked.stderr);
  t.match(revoked.stdout, /upload links replaced: 1/);
  // And one nothing was uploaded to yet: its folder keeps the mode the daemon gave it.
  const empty = await d.createRequest(alice, {
    bag_id: randomUUID(),
    external_id: 'modes-empty',
    content_type: 'video',
  });
  t.equal(await d.stop(), 0);

  const layout = new DataLayout(d.dataDir);
  const folders = [layout.dataDir, ...foldersUnder(layout.dataDir)];
  const seen = new Set<string>();
  for (const folder of folders) {
    const expected = expectedMode(layout, folder);
    const name = relative(layout.dataDir, folder) || '.';
    if (expected === undefined) {
      t.fail(`${name}: a folder the layout does not name`);
      continue;
    }
    t.equal(modeOf(folder).toString(8), expected[0].toString(8), `${name} (${expected[1]})`);
    seen.add(expected[1]);
  }
  t.same(
    [...seen].sort(),
    [
      'a storage shard',
      'a stored upload folder',
      'an object or its version',
      'an upload folder',
      'inside an upload',
      'named by the layout',
      "the root's extensions",
    ],
    'every kind of folder was there to check',
  );
  t.same(
    layout.folders.filter(([folder]) => !folders.includes(folder)),
    [],
    'every folder the layout names exists',
  );
  t.ok(
    folders.some(
      (f) => f.startsWith(layout.storage) && f.endsWith(`${sep}urn%3auuid%3a${stored.request.bag_id}`),
    ),
    'the stored package is among them',
  );
  t.ok(
    folders.includes(join(layout.landing, (empty.upload_link as string).split('/').filter(Boolean).at(-1)!)),
    'the empty upload folder too',
  );
  t.equal(modeOf(layout.adminToken), 0o600, 'admin.token is 0600');
});
