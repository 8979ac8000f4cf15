/**
 * `preservd validate` called as the CLI calls it: exit codes over the whole conformance suite,
 * the output format, the chipmunk flags, and the "could not run" cases.
 */
import t from 'tap';
import { PassThrough } from 'node:stream';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import type { FileHasher } from '../../src/bagit/index.js';
import { formatProblem, parseValidateArgs, runValidate } from '../../src/commands/validate.js';
import { createHasher } from '../../src/fixity/index.js';
import { suiteCases } from '../helpers/conformance-suite.js';
import { cliPath } from '../helpers/daemon.js';
import { makeBag } from '../helpers/make-bag.js';
import { node } from '../helpers/node.js';

// One real fixity pool for the many runs below: starting worker threads under tap's
// instrumentation costs about a second each. One test runs the command's own pool.
const pool = createHasher({ workers: 2 });
t.teardown(() => pool.close());

/** Run the command, collecting what it writes. */
async function run(
  argv: string[],
  ownPool = false,
  env?: NodeJS.ProcessEnv,
): Promise<{ code: number; stdout: string; stderr: string }> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  stdout.on('data', (c: Buffer) => out.push(c));
  stderr.on('data', (c: Buffer) => err.push(c));
  const code = await runValidate(
    argv,
    { stdout, stderr },
    { ...(ownPool ? {} : { hasher: pool }), ...(env === undefined ? {} : { env }) },
  );
  return { code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') };
}

/** Warning cases that stay valid on Linux; the other two are incomplete as checked out (peers.md §7). */
const VALID_WARNINGS = new Set([
  'made-with-md5sum-tools',
  'relative-path',
  'same-filename-listed-twice-with-different-normalization',
  'same-filename-listed-twice-with-the-same-hash',
]);

t.test('exit codes over the whole conformance suite', async (t) => {
  const cases = suiteCases();
  t.equal(cases.length, 60);
  for (const c of cases) {
    const name = c.id.split('/').pop()!;
    const expected =
      c.category === 'valid' ? 0 : c.category === 'warning' ? (VALID_WARNINGS.has(name) ? 0 : 1) : 1;
    const { code, stdout } = await run([c.dir]);
    t.equal(code, expected, `${c.id} exits ${expected}`);
    const lines = stdout.trimEnd().split('\n');
    t.match(lines.at(-1), expected === 0 ? /^valid / : /^invalid /, `${c.id} ends with a summary`);
    if (c.category === 'warning') t.match(stdout, /^warning {2}\S+ {2}/m, `${c.id} prints its warning`);
  }
});

t.test('every problem is printed on its own line, then a summary', async (t) => {
  const dir = await makeBag(t.testdir(), {
    files: { 'a.txt': 'hello\n', '.DS_Store': 'x' },
    corrupt: ['data/a.txt'],
  });
  const { code, stdout, stderr } = await run([dir], true);
  t.equal(code, 1);
  t.equal(stderr, '');
  t.same(
    stdout.split('\n').map((l) => l.split('  ').slice(0, 3).join('|')),
    [
      'error|manifest-mismatch|data/a.txt',
      'error|manifest-mismatch|data/a.txt',
      'warning|system-file|data/.DS_Store',
      'invalid BagIt 1.0 bag: 2 payload files, 7 bytes; 2 errors, 1 warning',
      '',
    ],
  );
});

t.test('--json prints the report as JSON', async (t) => {
  const dir = await makeBag(t.testdir(), { files: { 'a.txt': 'hello\n' } });
  const { code, stdout } = await run([dir, '--json']);
  t.equal(code, 0);
  const report = JSON.parse(stdout) as {
    valid: boolean;
    version: string;
    problems: unknown[];
    files: Array<{ path: string; digests: Record<string, string> }>;
  };
  t.match(report, { valid: true, version: '1.0', problems: [] });
  t.ok(report.files.find((f) => f.path === 'data/a.txt')?.digests.sha256, 'sha256 of every file');
});

t.test('with the request flags, chipmunk-info.txt is checked too', async (t) => {
  const bagId = '14d25bcd-deaf-4c94-add7-c189fdca4692';
  const dir = await makeBag(t.testdir(), {
    files: { samplefile: 'Hello Bag!\n' },
    chipmunkInfo: { externalId: 'ex_1', bagId, contentType: 'audio' },
  });
  t.equal(
    (await run([dir, '--content-type', 'audio', '--external-id', 'ex_1', '--bag-id', bagId.toUpperCase()]))
      .code,
    0,
  );
  const wrong = await run([dir, '--content-type=audio', '--external-id=ex_2', `--bag-id=${bagId}`]);
  t.equal(wrong.code, 1);
  t.match(
    wrong.stdout,
    /^error {2}chipmunk-info-mismatch {2}chipmunk-info\.txt {2}chipmunk-info\.txt gives External-Identifier "ex_1", but the request says "ex_2"\.$/m,
  );
});

t.test('exit 2 when the command cannot run', async (t) => {
  const dir = t.testdir({ file: 'x' });
  for (const argv of [
    [],
    [join(dir, 'missing')],
    [join(dir, 'file')],
    [dir, '--bogus'],
    [dir, '--content-type', 'audio'],
    [dir, dir],
    [dir, '--bag-id'],
  ]) {
    const { code, stderr, stdout } = await run(argv);
    t.equal(code, 2, JSON.stringify(argv.map((a) => a.replace(dir, 'DIR'))));
    t.match(stderr, /^preservd validate: /);
    t.equal(stdout, '');
  }
});

t.test('argument parsing', async (t) => {
  t.same(parseValidateArgs(['bag']), { dir: 'bag', json: false });
  t.same(parseValidateArgs(['--json', 'bag', '--bag-id', 'B', '--external-id=X', '--content-type', 'T']), {
    dir: 'bag',
    json: true,
    request: { bagId: 'B', externalId: 'X', contentType: 'T' },
  });
  t.match(parseValidateArgs(['bag', '--external-id', 'X']), { error: /all three or none/ });
});

t.test('problem lines escape control characters in paths', async (t) => {
  t.equal(
    formatProblem({ code: 'x', severity: 'warning', path: 'data/a\nb', message: 'one\ntwo' }),
    'warning  x  data/a\\nb  one\n    two',
  );
  t.equal(
    formatProblem({ code: 'manifest-missing', severity: 'error', message: 'm' }),
    'error  manifest-missing  -  m',
  );
});

t.test(
  "with the request flags, the content type's profile and validator come from PRESERVD_CONFIG",
  async (t) => {
    const root = t.testdir({
      'maps-profile.json': JSON.stringify({
        ordered: [
          { 'Source-Organization': { fieldRequired: true } },
          { 'Map-Scale': { fieldRequired: false, valueList: ['1:24000', '1:62500'] } },
        ],
      }),
    });
    // Relative to the configuration file, as the daemon resolves it; the validator sees the bag.
    const config = join(root, 'preservd.json');
    writeFileSync(
      config,
      JSON.stringify({
        contentTypes: {
          maps: {
            profile: 'maps-profile.json',
            validator: [
              'sh',
              '-c',
              'test -f "$1/data/legend.txt" || { echo "no legend" >&2; exit 4; }',
              'maps-check',
              '{bag}',
            ],
          },
        },
      }),
    );
    const env = { PATH: process.env.PATH, PRESERVD_CONFIG: config };
    const bagId = '4ad7ad17-4fc2-4b02-9ba0-d8e8d0b2b7a5';
    const flags = ['--content-type', 'maps', '--external-id', 'map-1', '--bag-id', bagId];
    const chipmunkInfo = { externalId: 'map-1', bagId, contentType: 'maps' };

    const good = await makeBag(join(root, 'good'), {
      files: { 'legend.txt': 'x\n' },
      bagInfo: { 'Source-Organization': 'UM', 'Map-Scale': '1:24000' },
      chipmunkInfo,
    });
    const ok = await run([good, ...flags], false, env);
    t.equal(ok.code, 0, ok.stdout + ok.stderr);

    const bad = await makeBag(join(root, 'bad'), {
      files: { 'sheet.tif': 'x\n' },
      bagInfo: { 'Map-Scale': '1:50' },
      chipmunkInfo,
    });
    const failed = await run([bad, ...flags], false, env);
    t.equal(failed.code, 1);
    t.same(
      failed.stdout
        .split('\n')
        .filter((l) => l.startsWith('error'))
        .map((l) => l.split('  ').slice(1, 3)),
      [
        ['profile-tag-missing', 'bag-info.txt'],
        ['profile-value-not-allowed', 'bag-info.txt'],
        ['validator-failed', '-'],
      ],
    );
    t.match(failed.stdout, /no legend/, "the validator's own words");

    // Without the flags the content type does not matter: BagIt alone.
    t.equal((await run([bad], false, env)).code, 0);

    const unknown = await run(
      [good, '--content-type', 'globes', '--external-id', 'map-1', '--bag-id', bagId],
      false,
      env,
    );
    t.equal(unknown.code, 2, 'an unknown content type cannot be checked');
    t.equal(unknown.stdout, '');
    t.equal(
      unknown.stderr,
      `preservd validate: unknown content type "globes": the configuration ${config} has maps\n`,
    );

    writeFileSync(config, '{"contentTypes": ');
    const broken = await run([good, ...flags], false, env);
    t.equal(broken.code, 2);
    t.match(broken.stderr, /^preservd validate: invalid configuration:\s+\S*preservd\.json: /);
  },
);

t.test('the installed command reads PRESERVD_CONFIG itself, with no daemon running', async (t) => {
  const root = t.testdir({
    'config.json': JSON.stringify({ contentTypes: { maps: { validator: ['false'] } } }),
  });
  const bagId = '9b4c1a43-5d0e-4f55-8f0e-2f55d7a4c7a1';
  const bag = await makeBag(join(root, 'bag'), {
    files: { 'a.txt': 'a\n' },
    chipmunkInfo: { externalId: 'm', bagId, contentType: 'maps' },
  });
  const r = spawnSync(
    ...node([cliPath, 'validate', bag, '--content-type', 'maps', '--external-id', 'm', '--bag-id', bagId]),
    {
      env: { PATH: process.env.PATH, PRESERVD_CONFIG: join(root, 'config.json') },
      encoding: 'utf8',
    },
  );
  t.equal(r.status, 1, r.stderr);
  t.match(r.stdout, /^error {2}validator-failed {2}- /m);
});

t.test('the plain output computes no CRC-32; --json reports each file’s', async (t) => {
  const dir = await makeBag(t.testdir(), { files: { 'a.txt': 'hello\n', 'b.txt': 'world\n' } });
  const asked: Array<boolean | undefined> = [];
  const spy: FileHasher = {
    hashFile: (path, algorithms, opts) => {
      asked.push(opts?.crc32);
      return pool.hashFile(path, algorithms, opts as Parameters<typeof pool.hashFile>[2]);
    },
    hashFiles: (files, opts) => {
      for (const _ of files) asked.push(opts?.crc32);
      return pool.hashFiles(files, opts);
    },
  };
  const run = async (argv: string[]) => {
    const stdout = new PassThrough();
    const out: Buffer[] = [];
    stdout.on('data', (c: Buffer) => out.push(c));
    const code = await runValidate(argv, { stdout, stderr: new PassThrough() }, { hasher: spy });
    return { code, stdout: Buffer.concat(out).toString('utf8') };
  };
  t.equal((await run([dir])).code, 0);
  t.ok(asked.length >= 2, 'every file hashed');
  t.ok(
    asked.every((c) => c === false),
    'no CRC-32 asked for: the plain output never shows one',
  );
  asked.length = 0;
  const json = await run([dir, '--json']);
  t.equal(json.code, 0);
  t.ok(asked.length >= 2 && asked.every((c) => c === true), 'with --json every file gets its CRC-32');
  const report = JSON.parse(json.stdout) as { files: Array<{ path: string; crc32: string }> };
  t.equal(
    report.files.find((f) => f.path === 'data/a.txt')?.crc32,
    crc32(Buffer.from('hello\n')).toString(16).padStart(8, '0'),
  );
});

t.test('validating a bag loads no configuration schema (ajv), a good part of the start-up', async (t) => {
  // CommonJS packages loaded through import land in require's cache too.
  const root = t.testdir({
    'loaded.cjs':
      "process.on('exit', () => process.stderr.write('loaded: ' + Object.keys(require('module')._cache).join(' ') + '\\n'));\n",
  });
  const preload = join(root, 'loaded.cjs');
  const dir = await makeBag(join(root, 'bag'), { files: { 'a.txt': 'a\n' } });
  const r = spawnSync(...node(['--require', preload, cliPath, 'validate', dir]), {
    env: { PATH: process.env.PATH },
    encoding: 'utf8',
  });
  t.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
  const loaded = /^loaded: (.*)$/m.exec(r.stderr)?.[1] ?? '';
  t.ok(loaded.includes('loaded.cjs'), 'the preload saw the module cache');
  t.notMatch(loaded, /node_modules\/ajv\//, 'ajv is not loaded');
});
