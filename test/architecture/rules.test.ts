/**
 * The architecture's rules, checked by maintained tools rather than by reading source with
 * regular expressions: dependency-cruiser with `.dependency-cruiser.cjs` (no import cycles,
 * libraries that know no daemon, download without fastify, modules used through their index,
 * see docs/architecture.md), knip with `knip.json` (no unused files, exports or dependencies) and
 * typescript-eslint with `eslint.config.js` (every promise handled, every union case covered).
 * All read the TypeScript sources, so a violation fails here before it is compiled into dist/.
 * Also: Prettier (`.prettierrc.json`) finds every source formatted, and no file of src/ is over 400 lines.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import t from 'tap';
import { repoRoot } from '../helpers/daemon.js';
import { node } from '../helpers/node.js';

/** A tool of node_modules/.bin run with `args` (through helpers/node: tap's hooks stay out of it). */
const tool = (name: string, args: string[]) => node([join(repoRoot, 'node_modules', '.bin', name), ...args]);

t.test('dependency-cruiser finds no violation of the import rules', async (t) => {
  const run = spawnSync(
    ...tool('depcruise', ['src', '--config', '.dependency-cruiser.cjs', '--output-type', 'json']),
    {
      cwd: repoRoot,
      encoding: 'utf8',
      maxBuffer: 64 << 20,
    },
  );
  t.equal(run.status, 0, run.stderr);
  const result = JSON.parse(run.stdout) as {
    summary: {
      violations: Array<{ rule: { name: string }; from: string; to: string }>;
      totalCruised: number;
    };
  };
  t.ok(result.summary.totalCruised > 50, `it read the sources (${result.summary.totalCruised} modules)`);
  t.same(
    result.summary.violations.map((v) => `${v.rule.name}: ${v.from} → ${v.to}`),
    [],
  );
});

/** What `npm run format` formats (package.json), Prettier's ignore file aside. */
const FORMATTED = ['src', 'test', 'bench', 'scripts', 'cli.ts', 'eslint.config.js'];

t.test('knip finds no unused file, export or dependency', async (t) => {
  const run = spawnSync(...tool('knip', ['--reporter', 'json']), {
    cwd: repoRoot,
    encoding: 'utf8',
    maxBuffer: 64 << 20,
  });
  const report = JSON.parse(run.stdout || '{"issues":null}') as { issues: unknown[] | null };
  t.same(report.issues, [], run.stderr);
  t.equal(run.status, 0);
});

t.test('eslint finds no problem', async (t) => {
  const run = spawnSync(...tool('eslint', ['--format', 'json', 'src', 'test', 'bench', 'cli.ts']), {
    cwd: repoRoot,
    encoding: 'utf8',
    maxBuffer: 64 << 20,
  });
  const results = JSON.parse(run.stdout || '[]') as Array<{
    filePath: string;
    messages: Array<{ ruleId: string | null; line: number; message: string }>;
  }>;
  t.ok(results.length > 200, `it read the sources (${results.length} files)`);
  t.same(
    results.flatMap((r) =>
      r.messages.map((m) => `${relative(repoRoot, r.filePath)}:${m.line} ${m.ruleId ?? ''}: ${m.message}`),
    ),
    [],
    run.stderr,
  );
  t.equal(run.status, 0);
});

t.test('prettier finds every source formatted', async (t) => {
  const run = spawnSync(...tool('prettier', ['--list-different', ...FORMATTED]), {
    cwd: repoRoot,
    encoding: 'utf8',
  });
  t.same(run.stdout.split('\n').filter(Boolean), [], `not formatted (npm run format): ${run.stderr}`);
  t.equal(run.status, 0);
});

t.test('no source file is over 400 lines: one job per file', async (t) => {
  const files = readdirSync(join(repoRoot, 'src'), { recursive: true, encoding: 'utf8' }).filter((f) =>
    f.endsWith('.ts'),
  );
  t.ok(files.length > 50, `${files.length} files`);
  const long = files
    .map((f) => [f, readFileSync(join(repoRoot, 'src', f), 'utf8').split('\n').length - 1] as const)
    .filter(([, lines]) => lines > 400)
    .map(([f, lines]) => `${f}: ${lines} lines`);
  t.same(long, []);
});
