/**
 * A revision reaches a folder replica through the real daemon: the replica's object gains v2
 * (only the new content written there), its root inventory replaced by v2's, and it stays a valid
 * OCFL object; an audit then checks the copy of every version.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { packageObjectPath } from '../../src/ocfl/layout.js';
import { fsReader, validateObject } from '../../src/ocfl/validate/index.js';
import { rsyncUpload, TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';
import { assertInvariants } from '../helpers/invariants.js';
import { writeManifests } from '../helpers/make-bag.js';
import { filesUnder } from '../helpers/walk.js';
import { waitForCopies } from '../replicas/fixtures/replica-world.js';

t.test('a revision is copied to a dir replica: only the new content, the new inventories', async (t) => {
  const mirror = mkdtempSync(join(tmpdir(), 'preservd-revision-mirror-'));
  t.teardown(() => {
    rmSync(mirror, { recursive: true, force: true });
    rmSync(`${mirror}.preservd-tmp`, { recursive: true, force: true }); // the replica's scratch folder
  });
  const d = await TestDaemon.start(t, {
    config: { replicas: [{ name: 'mirror', kind: 'dir', path: mirror }] },
  });
  const { request, bagDir } = await ingestBag(d, d.adminToken, { 'a.txt': 'alpha\n', 'b.txt': 'bravo\n' });
  const bagId: string = request.bag_id;
  await waitForCopies(d, bagId, 'verified');
  const opened = (await d.request('POST', `/v1/packages/${bagId}/revisions`, { json: { note: 'b' } })).json;
  writeFileSync(join(bagDir, 'data', 'b.txt'), 'BRAVO\n');
  await writeManifests(bagDir);
  t.equal(rsyncUpload(bagDir, opened.upload_link).code, 0);
  const done = await d.request('POST', `/v1/packages/${bagId}/revisions/2/complete`);
  t.equal((await d.waitForQueueItem(done.json.id)).status, 'DONE');
  // Owed again, then verified with v2.
  const object = join(mirror, packageObjectPath(bagId));
  const deadline = Date.now() + 120_000;
  while (JSON.parse(readFileSync(join(object, 'inventory.json'), 'utf8')).head !== 'v2') {
    if (Date.now() > deadline) throw new Error(`the replica never got v2\n${d.output}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  await waitForCopies(d, bagId, 'verified');
  t.same(
    filesUnder(join(object, 'v2', 'content')).filter((p) => p.startsWith('data/')),
    ['data/b.txt'],
    'only the new content in the replica',
  );
  t.equal(readFileSync(join(object, 'v1', 'content', 'data', 'b.txt'), 'utf8'), 'bravo\n', 'v1 kept');
  const report = await validateObject(fsReader(object), '', { digests: true });
  t.equal(report.valid, true, JSON.stringify(report.problems));
  const audit = await d.waitForAudit((await d.request('POST', '/v1/audits')).json.id);
  t.same(audit.failures, [], "the audit finds every version's copy good");
  t.equal(await d.stop(), 0);
  await assertInvariants(t, d.dataDir, 'the invariants hold over v1 and v2');
});
