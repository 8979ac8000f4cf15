/**
 * The daemon's Node options (docs/operators.md, "Memory") are the same wherever it is started:
 * the `preservd` command's first line, `npm start`, the systemd unit's example, and the tests'
 * and benches' daemons (test/helpers/daemon.ts); and the fixity workers, which refuse V8's heap
 * options, start under them.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { createHasher } from '../../src/fixity/index.js';
import { DAEMON_NODE_OPTIONS, repoRoot } from '../helpers/daemon.js';
import { node } from '../helpers/node.js';

const read = (path: string): string => readFileSync(join(repoRoot, path), 'utf8');

t.test('every way of starting the daemon passes its Node options', (t) => {
  const options = DAEMON_NODE_OPTIONS.join(' ');
  t.equal(read('cli.ts').split('\n')[0], `#!/usr/bin/env -S node ${options}`, 'the preservd command');
  const start = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts.start!;
  t.match(start, `node ${options} dist/cli.js serve`, 'npm start');
  t.match(read('systemd/preservd.service'), `ExecStart=/usr/bin/node ${options} `, "the unit's example");
  t.match(read('docs/operators.md'), `node ${options} dist/cli.js serve`, "the operator's guide");
  t.end();
});

t.test('fixity workers start in a process run with those options', async (t) => {
  const script = `import { createHasher } from ${JSON.stringify(new URL('../../src/fixity/index.js', import.meta.url).href)};
const pool = createHasher({ workers: 2 });
const digests = await pool.hashFile(${JSON.stringify(join(repoRoot, 'package.json'))}, ['sha256']);
await pool.close();
process.stdout.write(digests.digests.sha256);`;
  const { stdout } = await promisify(execFile)(
    ...node([...DAEMON_NODE_OPTIONS, '--input-type=module', '-e', script]),
  );
  const pool = createHasher({ workers: 1 });
  t.teardown(() => pool.close());
  const here = await pool.hashFile(join(repoRoot, 'package.json'), ['sha256']);
  t.equal(stdout, here.digests.sha256, 'the same digest as in this process');
});
