/**
 * Children get an allow-listed environment (security probe, finding 7): S3 keys given to
 * preservd in `AWS_*` reach neither an external validator (which parses untrusted bags) nor the
 * rsync daemon and its hooks; PATH and the locale do.
 */
import { readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';
import { rsyncsOf } from '../helpers/proc.js';

const SECRET = 'probe-secret-do-not-leak';

function environOf(pid: number): Map<string, string> {
  const entries = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter(Boolean);
  return new Map(entries.map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]));
}

t.test('neither a validator nor rsync sees AWS_* or PRESERVD_* variables', async (t) => {
  const envFile = join(tmpdir(), `preservd-validator-env-${process.pid}.txt`);
  t.teardown(() => rmSync(envFile, { force: true }));
  const d = await TestDaemon.start(t, {
    env: { AWS_ACCESS_KEY_ID: 'AKIAPROBEPROBEPROBE', AWS_SECRET_ACCESS_KEY: SECRET, LANG: 'C.UTF-8' },
    config: { contentTypes: { video: { validator: ['sh', '-c', `env > ${envFile}`] } } },
  });
  t.match(
    readFileSync(`/proc/${d.proc.pid}/environ`, 'utf8'),
    SECRET,
    'preservd itself has the key (the check can see it)',
  );

  await ingestBag(d, d.adminToken, { 'a.txt': 'a\n' }, { contentType: 'video' });
  const validatorEnv = readFileSync(envFile, 'utf8');
  t.notMatch(validatorEnv, /^AWS_/m, 'the validator sees no AWS_* variable');
  t.notMatch(validatorEnv, SECRET);
  t.notMatch(validatorEnv, /^PRESERVD_/m, 'nor preservd settings');
  t.match(validatorEnv, /^PATH=/m, 'it has PATH');
  t.match(validatorEnv, /^LANG=C\.UTF-8$/m, 'and the locale');

  // The rsync preservd starts for a connection on the rsync port (the hooks inherit its environment).
  const idle = connect(d.rsyncPort, '127.0.0.1');
  idle.on('error', () => undefined);
  t.teardown(() => idle.destroy());
  let rsyncPid: number | undefined;
  for (
    const deadline = Date.now() + 20_000;
    rsyncPid === undefined && Date.now() < deadline;
    await new Promise((r) => setTimeout(r, 50))
  ) {
    rsyncPid = rsyncsOf(d.proc.pid!)[0];
  }
  if (rsyncPid === undefined) throw new Error('no rsync was started for the connection');
  const rsyncEnv = environOf(rsyncPid);
  t.same(
    [...rsyncEnv.keys()].filter((k) => k.startsWith('AWS_') || k.startsWith('PRESERVD_')),
    [],
    'rsync sees no AWS_* or PRESERVD_* variable',
  );
  t.ok(rsyncEnv.has('PATH'), 'rsync has PATH (its hooks run sh, mv, date)');
});
