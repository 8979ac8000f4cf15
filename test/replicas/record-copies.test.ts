/**
 * Every root carries the preservd record (STORAGE.md): after an ingest and its copy to a dir
 * replica, the replica's object holds the same `logs/` as the primary's (the replication event
 * included) and its root the repository's record, byte for byte.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import t from 'tap';
import { packageObjectPath } from '../../src/ocfl/layout.js';
import { EVENTS_RECORD, PACKAGE_RECORD, REPOSITORY_RECORD } from '../../src/ocfl/record.js';
import { TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';
import { replicaFolder, waitForCopies } from './fixtures/replica-world.js';

t.test('a dir replica gets the logs of a verified copy and the repository record', async (t) => {
  const mirror = replicaFolder(t);
  const d = await TestDaemon.start(t, {
    config: { replicas: [{ name: 'mirror', kind: 'dir', path: mirror }], storage: { recordDelayMs: 100 } },
  });
  const { request } = await ingestBag(d, d.adminToken, { 'a.txt': 'hello\n' });
  const bagId = request.bag_id as string;
  await waitForCopies(d, bagId, 'verified');
  await d.stop(); // a graceful stop writes every record still behind, to every root
  const object = packageObjectPath(bagId);
  const primary = join(d.dataDir, 'storage');
  for (const path of [
    `${object}/logs/${PACKAGE_RECORD}`,
    `${object}/logs/${EVENTS_RECORD}`,
    REPOSITORY_RECORD,
  ])
    t.ok(
      (await readFile(join(mirror, path))).equals(await readFile(join(primary, path))),
      `${path} on the replica is the primary's`,
    );
  const events = JSON.parse(await readFile(join(mirror, object, 'logs', EVENTS_RECORD), 'utf8')) as {
    events: Array<{ type: string }>;
  };
  t.ok(
    events.events.some((e) => e.type === 'replication'),
    "the replica's events include its own replication",
  );
});
