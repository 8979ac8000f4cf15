/**
 * `preservd serve`'s log: readable on a terminal (run here under a pseudo-terminal with
 * util-linux `script`), JSON lines when stdout is a pipe or a file (journald), and the first line
 * says where the API and the rsync daemon listen and where the admin token is.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { cliPath, DAEMON_NODE_OPTIONS, freePort } from '../helpers/daemon.js';
import { childrenOf } from '../helpers/proc.js';
import { node } from '../helpers/node.js';

/** Starts `preservd serve` (through `script` for a terminal) and collects its output until it serves. */
async function serveUntilServing(
  t: Test,
  terminal: boolean,
): Promise<{ output: string; dataDir: string; httpPort: number; rsyncPort: number }> {
  const root = mkdtempSync(join(tmpdir(), 'preservd-serve-log-'));
  const dataDir = join(root, 'var');
  const config = join(root, 'config.json');
  writeFileSync(config, JSON.stringify({ upload: { quietMs: 200 } }));
  const httpPort = await freePort();
  const rsyncPort = await freePort();
  const env = {
    ...process.env,
    PRESERVD_CONFIG: config,
    PRESERVD_DATA_DIR: dataDir,
    PRESERVD_HTTP_PORT: String(httpPort),
    PRESERVD_RSYNC_PORT: String(rsyncPort),
    TERM: 'dumb',
  };
  const command = node([...DAEMON_NODE_OPTIONS, cliPath, 'serve'])
    .flat()
    .map((a) => JSON.stringify(a))
    .join(' ');
  const child: ChildProcess = terminal
    ? spawn('script', ['-q', '-e', '-c', command, '/dev/null'], { env, stdio: ['pipe', 'pipe', 'pipe'] })
    : spawn(...node([...DAEMON_NODE_OPTIONS, cliPath, 'serve']), {
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  t.teardown(async () => {
    // Under `script`, preservd is script's child: end it first, then script ends with it.
    if (terminal && child.pid !== undefined)
      for (const pid of childrenOf(child.pid)) process.kill(pid, 'SIGTERM');
    child.kill('SIGTERM');
    await exited;
    rmSync(root, { recursive: true, force: true });
  });
  // Generous: a start under the suite's load (2 cores, load ~20) took over 30 s once.
  const deadline = Date.now() + 120_000;
  while (!/preservd is serving/.test(output)) {
    if (Date.now() > deadline || child.exitCode !== null)
      throw new Error(`preservd did not start:\n${output}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return { output, dataDir, httpPort, rsyncPort };
}

t.test('on a terminal the log is readable, and its first line says where everything is', async (t) => {
  const { output, dataDir, httpPort, rsyncPort } = await serveUntilServing(t, true);
  const lines = output.split(/\r?\n/).filter((l) => l.trim() !== '');
  t.notOk(
    lines.some((l) => l.trimStart().startsWith('{')),
    'no JSON line',
  );
  t.match(lines[0], /INFO.*preservd starting/, 'the first line is the start');
  t.match(lines[0], `API http://127.0.0.1:${httpPort}`);
  t.match(lines[0], `rsync rsync://127.0.0.1:${rsyncPort}/preservd/`);
  t.match(lines[0], `admin token in ${join(dataDir, 'admin.token')}`);
  t.ok(
    lines.some((l) => /INFO.*preservd is serving: API http:\/\/127\.0\.0\.1:/.test(l)),
    'and it says when it serves',
  );
});

t.test('to a pipe (journald, a file) the log is JSON lines', async (t) => {
  const { output, dataDir, httpPort } = await serveUntilServing(t, false);
  const records = output
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  t.match(records[0], {
    level: 30,
    msg: /^preservd starting/,
    api: `http://127.0.0.1:${httpPort}`,
    adminToken: join(dataDir, 'admin.token'),
  });
  t.ok(records.some((r) => /^preservd is serving/.test(String(r.msg))));
});
