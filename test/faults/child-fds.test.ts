/**
 * No child process preservd starts holds one of its descriptors: the rsync it starts for each
 * connection on the rsync port, the process that rsync forks for a transfer (and so the hooks
 * it runs), and an external validator. Each of
 * them must have nothing open under the data folder's catalog.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { childrenOf, openFiles, rsyncsOf } from '../helpers/proc.js';
import { TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';

async function waitFor<T>(what: string, probe: () => T | undefined, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

t.test('rsync, its connection processes and validators hold no descriptor of the catalog', async (t) => {
  const fdsFile = join(tmpdir(), `preservd-validator-fds-${process.pid}.txt`);
  t.teardown(() => rmSync(fdsFile, { force: true }));
  const d = await TestDaemon.start(t, {
    config: {
      contentTypes: {
        video: { validator: ['sh', '-c', `exec > ${fdsFile}; ls -l /proc/$$/fd`] },
      },
    },
  });
  const catalog = join(d.dataDir, 'catalog');
  const daemonFiles = [...openFiles(d.proc.pid!).values()];
  t.ok(
    daemonFiles.some((f) => f.startsWith(catalog)),
    'the daemon itself has the catalog open (the check can see it)',
  );

  // A connection that says nothing: preservd hands it at once to an rsync of its own.
  const idle = connect(d.rsyncPort, '127.0.0.1');
  idle.on('error', () => undefined);
  t.teardown(() => idle.destroy());
  const rsyncPid = await waitFor('an rsync for the connection', () => rsyncsOf(d.proc.pid!)[0]);
  const rsyncFiles = openFiles(rsyncPid);
  t.match(rsyncFiles.get(0), /^socket:/, 'its stdin is the connection itself');
  t.same(
    [...rsyncFiles.values()].filter((f) => f.startsWith(d.dataDir) && !f.endsWith('rsyncd.log')),
    [],
    'rsync has nothing of the data folder open but its log',
  );
  t.same(
    [...rsyncFiles.values()].filter((f) => f.startsWith(catalog)),
    [],
    'rsync has no catalog file open',
  );

  // A slow upload into an open link: its rsync forks a process to serve the transfer.
  const bagId = randomUUID();
  const request = await d.createRequest(d.adminToken, {
    bag_id: bagId,
    external_id: `fds-${bagId.slice(0, 8)}`,
    content_type: 'video',
  });
  const slow = mkdtempSync(join(tmpdir(), 'preservd-slow-'));
  t.teardown(() => rmSync(slow, { recursive: true, force: true }));
  writeFileSync(join(slow, 'slow.bin'), Buffer.alloc(2_000_000, 1));
  const upload = spawn('rsync', ['-rt', '--bwlimit=100', `${slow}/`, request.upload_link], {
    stdio: 'ignore',
  });
  t.teardown(() => upload.kill('SIGKILL'));
  const served = await waitFor('rsync to fork for the transfer', () =>
    rsyncsOf(d.proc.pid!)
      .map((p) => childrenOf(p)[0])
      .find((p) => p !== undefined),
  );
  t.same(
    [...openFiles(served).values()].filter((f) => f.startsWith(catalog)),
    [],
    'the per-connection process has no catalog file open',
  );

  await ingestBag(d, d.adminToken, { 'a.txt': 'a\n' }, { contentType: 'video' });
  const validatorFiles = readFileSync(fdsFile, 'utf8')
    .split('\n')
    .flatMap((line) => {
      const m = / (\d+) -> (.*)$/.exec(line);
      return m === null ? [] : [[m[1]!, m[2]!] as const];
    });
  t.equal(validatorFiles.length, 3, `stdin, stdout and stderr: ${JSON.stringify(validatorFiles)}`);
  t.same(
    validatorFiles.map(([fd]) => Number(fd)).filter((fd) => fd > 2),
    [],
    'the validator has nothing open above stderr',
  );
});
