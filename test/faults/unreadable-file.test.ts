/**
 * A stored file becomes unreadable (its permissions taken away) while the daemon runs: the audit
 * records a `file-unreadable` failure naming the file and goes on with the rest, the download of
 * that file fails cleanly, the daemon keeps serving; once the permission is back, the next audit
 * passes. Root reads through any permission, so the daemon runs bound by permissions
 * (test/helpers/unprivileged.ts), which works wherever the checkout lives.
 */
import { chmodSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';
import { assertInvariants } from '../helpers/invariants.js';

async function finishedAudit(d: TestDaemon): Promise<any> {
  const started = await d.request('POST', '/v1/audits');
  if (started.status !== 201) throw new Error(`POST /v1/audits: ${started.status} ${started.text}`);
  const deadline = Date.now() + 20_000;
  for (;;) {
    const res = await d.request('GET', `/v1/audits/${started.json.id}`);
    if (res.json.finished_at !== null) return res.json;
    if (Date.now() > deadline)
      throw new Error(`audit ${started.json.id} did not finish: ${res.text}\n${d.output}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

t.test('an audit records a file made unreadable during its life as file-unreadable, naming it', async (t) => {
  const d = await TestDaemon.start(t, { boundByPermissions: true, keepDataDir: true });
  t.teardown(() => rmSync(d.dataDir, { recursive: true, force: true }));
  const token = d.addUser('alice');
  const good = await ingestBag(d, token, { 'a.txt': 'still readable\n' });
  const target = await ingestBag(d, token, {
    'visible.txt': 'fine\n',
    'sub/secret.bin': Buffer.alloc(50_000, 7),
  });
  const pkg = (await d.request('GET', `/v1/packages/${target.request.bag_id}`)).json;
  const file = join(pkg.storage_location, 'v1/content/data/sub/secret.bin');

  chmodSync(file, 0o000);
  const audit = await finishedAudit(d);
  t.equal(audit.successes.length, 1, 'the other package passes');
  t.equal(audit.successes[0].bag_id, good.request.bag_id);
  t.equal(audit.failures.length, 1, 'the package with the unreadable file fails');
  t.equal(audit.failures[0].bag_id, target.request.bag_id);
  t.equal(
    audit.failures[0].detail,
    'data/sub/secret.bin: could not be read (EACCES)',
    'file-unreadable, naming the file and the reason',
  );

  const download = await d.request('GET', `/v1/packages/${target.request.bag_id}/sub/secret.bin`);
  t.ok(
    download.status >= 500 && download.status < 600,
    `the download fails with a server error (${download.status}), not a hang`,
  );
  t.notMatch(download.text, /storage|\/tmp\//, 'and does not show a server path');
  t.equal(
    (await d.request('GET', `/v1/packages/${target.request.bag_id}/visible.txt`)).text,
    'fine\n',
    'the daemon keeps serving',
  );

  chmodSync(file, 0o600);
  const after = await finishedAudit(d);
  t.equal(after.failures.length, 0, 'readable again: the next audit passes');
  t.equal(after.successes.length, 2);

  await d.stop();
  await assertInvariants(t, d.dataDir);
});
