/**
 * `preservd audit [--wait]` and `preservd status` against the real HTTP routes (buildServer)
 * over a real catalog and audit runner: the audit id, following to the end, exit codes 0/1/2,
 * the failed packages listed, the progress bar on a terminal, clear messages when the daemon is
 * down or the token is wrong.
 */
import { rm, writeFile } from 'node:fs/promises';
import { PassThrough } from 'node:stream';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { progressBar, runAudit } from '../../src/commands/audit.js';
import { runStatus } from '../../src/commands/status.js';
import { buildServer } from '../../src/http/server.js';
import { freePort } from '../helpers/daemon.js';
import { makeWorld, type AuditWorld } from './fixtures/world.js';

class Capture extends PassThrough {
  text = '';
  isTTY?: boolean;
  columns?: number;
  constructor(tty = false) {
    super();
    if (tty) {
      this.isTTY = true;
      this.columns = 100;
    }
    this.on('data', (chunk: Buffer) => (this.text += chunk.toString('utf8')));
  }
}

async function serve(t: { teardown(fn: () => unknown): void }, w: AuditWorld) {
  const runner = w.runner();
  runner.start();
  const app = await buildServer({
    config: w.config,
    catalog: w.catalog,
    storage: w.storage,
    uploadLink: () => 'rsync://example.invalid/x/',
    openLanding: async () => undefined,
    uploadProgress: async () => undefined,
    wakeIngest: () => undefined,
    startAudit: (user) => runner.startAudit(user),
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(() => app.close());
  w.config.http.port = (app.server.address() as AddressInfo).port;
  w.catalog.users.add('admin', true);
  w.catalog.users.add('alice', false);
  return {
    runner,
    admin: w.catalog.users.issueToken('admin').secret,
    alice: w.catalog.users.issueToken('alice').secret,
  };
}

const run = async (argv: string[], w: AuditWorld, env: NodeJS.ProcessEnv, tty = false) => {
  const stdout = new Capture(tty);
  const stderr = new Capture();
  const code = await runAudit(argv, { stdout, stderr, env }, w.config, {
    pollMs: 20,
    plainEveryMs: 0,
    unreachableGraceMs: 200,
  });
  return { code, out: stdout.text, err: stderr.text };
};

t.test('preservd audit and status', async (t) => {
  const w = await makeWorld(t, { packages: 3 });
  const { runner, admin, alice } = await serve(t, w);
  const env = { PRESERVD_TOKEN: admin };

  await t.test('without --wait: prints the id and exits 0', async (t) => {
    const r = await run([], w, env);
    t.equal(r.code, 0, r.err);
    t.match(r.out, /^audit (\d+) started: 3 packages, [\d.]+ kB\n$/);
    await runner.idle();
  });

  await t.test('--wait on a clean repository: plain progress lines, exit 0', async (t) => {
    const r = await run(['--wait'], w, env);
    t.equal(r.code, 0, r.err);
    t.match(r.out, /audit \d+ started: 3 packages/);
    t.match(r.out, /audit \d+ finished: 3 packages, 3 passed, 0 failed, [\d.]+ kB in [\d.]+ s\n$/);
    t.notMatch(r.out, /\r/, 'no carriage returns when stdout is not a terminal');
  });

  await t.test('--wait with a damaged package: lists it with its detail, exit 1', async (t) => {
    const bad = w.packages[0]!;
    await writeFile(join(bad.dir, 'data/hello.txt'), 'tampered\n');
    const r = await run(['--wait'], w, env, true);
    t.equal(r.code, 1, r.err);
    t.match(r.out, /\r\[[=> ]+\]  \d\/3 packages/, 'a progress bar redrawn in place');
    t.match(r.out, /3 packages, 2 passed, 1 failed/);
    t.match(
      r.out,
      new RegExp(
        `failed packages:\\n  ${bad.bagId} \\(${bad.pkg.externalId}\\)\\n    data/hello\\.txt: size changed`,
      ),
    );
  });

  await t.test('an audit in progress is joined, not duplicated', async (t) => {
    w.config.audit.rateLimitMBps = 0.002;
    await runner.stop();
    runner.start();
    const first = await run([], w, env);
    const second = await run([], w, env);
    t.match(
      second.out,
      /^audit \d+ is already in progress \(started .* by admin\): \d of 3 packages checked\n$/,
    );
    t.equal(/audit (\d+)/.exec(first.out)![1], /audit (\d+)/.exec(second.out)![1]);
    const stdout = new Capture();
    t.equal(await runStatus([], { stdout, stderr: new Capture(), env }, w.config), 0);
    t.match(
      stdout.text,
      /^preservd at http:\/\/127\.0\.0\.1:\d+\nqueue: 0 pending, 0 done, 0 failed\naudit \d+: in progress since .* \(by admin\): \d of 3 packages checked \(\d passed, \d failed\), .* of .*\n$/,
    );
    w.config.audit.rateLimitMBps = 0;
    await runner.stop();
    runner.start();
    await runner.idle();
    const after = new Capture();
    await runStatus([], { stdout: after, stderr: new Capture(), env }, w.config);
    t.match(after.text, /last audit \d+: finished .*: 3 packages, 2 passed, 1 failed/);
  });

  await t.test('could not run: exit 2 with a clear message', async (t) => {
    let r = await run(['--wait'], w, { PRESERVD_TOKEN: 'not-a-token' });
    t.equal(r.code, 2);
    t.match(r.err, /refused the token from PRESERVD_TOKEN/);
    r = await run([], w, { PRESERVD_TOKEN: alice });
    t.equal(r.code, 2);
    t.match(r.err, /not an admin's/);
    await rm(join(w.dataDir, 'admin.token'), { force: true });
    r = await run([], w, {});
    t.equal(r.code, 2);
    t.match(r.err, /no admin token: PRESERVD_TOKEN is not set and .*admin\.token does not exist/);
    await writeFile(join(w.dataDir, 'admin.token'), `${admin}\n`);
    r = await run([], w, {});
    t.equal(r.code, 0, 'the token file is read when PRESERVD_TOKEN is unset');
    await runner.idle();
    r = await run(['--frobnicate'], w, env);
    t.equal(r.code, 2);
    const port = w.config.http.port;
    w.config.http.port = await freePort(); // nothing listens there
    r = await run(['--wait'], w, env);
    t.equal(r.code, 2);
    t.match(
      r.err,
      /could not reach preservd at http:\/\/127\.0\.0\.1:\d+ \(connection refused\); is the daemon running\?/,
    );
    const stderr = new Capture();
    t.equal(await runStatus([], { stdout: new Capture(), stderr, env }, w.config), 2);
    t.match(stderr.text, /could not reach preservd/);
    w.config.http.port = port;
  });
});

t.test('the progress bar fits the terminal', async (t) => {
  const audit = {
    id: 1,
    user: 'a',
    packages: 200,
    successes: 119,
    failures: 1,
    bytes: 640e6,
    total_bytes: 1.07e9,
    created_at: '',
    updated_at: '',
  };
  const line = progressBar(audit, 85.3e6, 100);
  t.ok(line.length <= 100, line);
  t.match(line, /^\[=+>? *\]  120\/200 packages \(1 failed\)  640\.0 MB\/1\.07 GB  85\.3 MB\/s  ETA 0:05$/);
  t.ok(progressBar(audit, 0, 30).length < 30, 'narrow terminals get the text alone');
  t.match(progressBar(audit, 0, 100), /ETA --:--$/);
});
