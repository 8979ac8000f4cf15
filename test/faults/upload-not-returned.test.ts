/**
 * An invalid bag whose upload cannot be given back (its landing folder cannot be made: landing/
 * taken write permission by the validator itself, while the bag is being checked): the queue item
 * still names the bag's own problems, not `internal-error`; the daemon logs that the upload
 * could not be returned; the upload stays in staging/, and the next start gives it back under
 * the request's link. Root writes through any permission, so the daemon runs bound by them.
 */
import { chmodSync, existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';

// {bag} is <data>/staging/<bag_id>: landing/ is two folders up.
const lockLanding = 'chmod 500 "$(dirname "$(dirname "$1")")/landing"; echo "not this one" >&2; exit 3';

t.test('a failed validation keeps its problems when the upload cannot be given back', async (t) => {
  const config = { contentTypes: { audio: { validator: ['sh', '-c', lockLanding, 'sh', '{bag}'] } } };
  const d = await TestDaemon.start(t, { boundByPermissions: true, keepDataDir: true, config });
  t.teardown(() => rmSync(d.dataDir, { recursive: true, force: true }));
  const token = d.addUser('alice');
  const { request, item } = await ingestBag(
    d,
    token,
    { 'a.txt': 'kept\n' },
    { contentType: 'audio', expect: 'FAILED' },
  );
  t.same(
    item.errors.map((e: any) => e.code),
    ['validator-failed'],
    "the bag's own problem, not internal-error",
  );
  t.match(item.error, /not this one/, "the validator's words");
  t.match(d.output, /could not return the upload to its landing folder/, 'the daemon says so');
  const staged = join(d.dataDir, 'staging', request.bag_id);
  t.equal(readFileSync(join(staged, 'data/a.txt'), 'utf8'), 'kept\n', 'the upload is kept in staging/');

  await d.stop();
  chmodSync(join(d.dataDir, 'landing'), 0o700);
  const again = await TestDaemon.start(t, {
    boundByPermissions: true,
    dataDir: d.dataDir,
    keepDataDir: true,
  });
  const pkg = (await again.request('GET', `/v1/packages/${request.bag_id}`, { token })).json;
  const capability = pkg.upload_link.split('/').at(-2);
  const upload = join(again.dataDir, 'landing', capability);
  t.equal(readFileSync(join(upload, 'data/a.txt'), 'utf8'), 'kept\n', 'given back at the next start');
  t.notOk(existsSync(staged), 'nothing left in staging/');
});
