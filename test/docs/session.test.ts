/**
 * The shell in docs/depositors.md (and the README's example session) works as written: the
 * `sh session` block runs with `bash -euo pipefail` against the real daemon, as a regular user,
 * on a bag made by test/helpers/make-bag.ts, and ends with the bag stored and served back; the
 * `sh bag` block makes a bag by hand that `preservd validate` accepts.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import t from 'tap';
import { runValidate } from '../../src/commands/validate.js';
import { repoRoot, TestDaemon } from '../helpers/daemon.js';
import { makeBag } from '../helpers/make-bag.js';

/** The code blocks of a Markdown page whose fence info string is exactly `info`. */
function blocks(markdown: string, info: string): string[] {
  const out: string[] = [];
  const fence = new RegExp(`^\`\`\`${info}\\n([\\s\\S]*?)^\`\`\`$`, 'gm');
  for (const m of markdown.matchAll(fence)) out.push(m[1]!);
  return out;
}

/** The part of a Markdown page from `## title` to the next `## ` heading. */
function sectionOf(markdown: string, title: string): string {
  const start = markdown.indexOf(`\n## ${title}\n`);
  if (start < 0) throw new Error(`no section "## ${title}"`);
  const end = markdown.indexOf('\n## ', start + 1);
  return markdown.slice(start, end < 0 ? undefined : end);
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command without blocking the event loop (the daemon's start-up polls meanwhile). */
function run(
  command: string,
  args: string[],
  options: { cwd?: string; env?: Record<string, string> } = {},
): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      command,
      args,
      {
        cwd: options.cwd,
        env: { ...process.env, ...options.env },
        encoding: 'utf8',
        timeout: 60_000,
        maxBuffer: 16 * 1024 * 1024,
      },
      (err, stdout, stderr) => {
        const code = err === null ? 0 : typeof err.code === 'number' ? err.code : null;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

const bash = (script: string, cwd: string, env: Record<string, string>) =>
  run('bash', ['-euo', 'pipefail', '-c', script], { cwd, env });

const depositors = readFileSync(join(repoRoot, 'docs/depositors.md'), 'utf8');
const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
const files = { 'a.txt': 'hello\n', 'sub/b c.txt': 'second file\n' };

/**
 * The `sh bag` recipe on a folder of payload files, then `preservd validate` over the result.
 * Started at once, so that it runs while the daemon of the other test starts.
 */
async function byHandRecipe(scratch: string) {
  const recipe = blocks(depositors, 'sh bag');
  const bag = join(scratch, 'mybag');
  mkdirSync(join(bag, 'data/sub'), { recursive: true });
  for (const [name, content] of Object.entries(files)) writeFileSync(join(bag, 'data', name), content);
  const bagId = randomUUID();
  const env = { BAG: bag, BAG_ID: bagId, EXTERNAL_ID: '39015012345678', CONTENT_TYPE: 'digital' };
  const made = recipe.length === 1 ? await bash(recipe[0]!, scratch, env) : undefined;
  // `preservd validate`, in this process (one node start-up less).
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const out: string[] = [];
  stdout.on('data', (c: Buffer) => out.push(c.toString()));
  stderr.on('data', (c: Buffer) => out.push(c.toString()));
  const code = await runValidate(
    [bag, '--content-type', 'digital', '--external-id', env.EXTERNAL_ID, '--bag-id', bagId],
    { stdout, stderr },
  );
  return { blocks: recipe.length, made, check: { code, stdout: out.join(''), stderr: '' } };
}
const recipeScratch = mkdtempSync(join(tmpdir(), 'preservd-docs-bag-'));
const recipe = byHandRecipe(recipeScratch);
recipe.catch(() => undefined); // a failure is reported when the test awaits it, not as an unhandled rejection

t.test('the depositor session in docs/depositors.md works as written', async (t) => {
  const session = blocks(depositors, 'sh session');
  t.equal(session.length, 1, 'one sh session block');
  const scratch = mkdtempSync(join(tmpdir(), 'preservd-docs-'));
  t.teardown(() => rmSync(scratch, { recursive: true, force: true }));
  const d = await TestDaemon.start(t);
  const token = d.addUser('alice');
  const bagId = randomUUID();
  const bag = await makeBag(join(scratch, 'bag'), {
    files,
    chipmunkInfo: { bagId, externalId: `ext-${bagId.slice(0, 8)}`, contentType: 'digital' },
  });
  const cwd = join(scratch, 'run');
  mkdirSync(cwd);
  const r = await bash(session[0]!, cwd, { PRESERVD: d.url, TOKEN: token, BAG: bag });
  t.equal(r.code, 0, `exit 0\n${r.stderr}`);
  t.match(r.stdout, /^queue item \d+: DONE$/m, 'the queue item is DONE');
  t.match(r.stdout, /^\["a.txt", "sub\/b c.txt"\]$/m, 'the files are listed');
  const digests = [...r.stdout.matchAll(/(sha-256=:[A-Za-z0-9+/=]+:)/g)].map((m) => m[1]);
  t.equal(digests.length, 2, 'Repr-Digest and the local digest are printed');
  t.equal(digests[0], digests[1], 'the downloaded file matches its Repr-Digest');
  t.equal(
    readFileSync(join(cwd, 'a.txt'), 'utf8'),
    files['a.txt'],
    'the downloaded file has the bytes of the bag',
  );
  t.match(r.stdout, `${bagId}/data/sub/b c.txt`, 'the zip holds the payload under <bag_id>/');
  t.match(r.stdout, `${bagId}/chipmunk-info.txt`, 'and the tag files');
  t.match(r.stdout, /transfer success rsync upload finished/);
  t.match(r.stdout, /validation success valid BagIt 1\.0 bag: 2 payload files/);
  t.match(r.stdout, /ingestion success stored at /);

  await t.test('running it again is harmless (303s lead to what exists)', async (t) => {
    // The stored bag's link refuses uploads, so stop before rsync: only the declare step.
    const declare = session[0]!.split('\n# Upload')[0]!;
    const again = await bash(`${declare}\njson stored < request.json`, cwd, {
      PRESERVD: d.url,
      TOKEN: token,
      BAG: bag,
    });
    t.equal(again.code, 0, again.stderr);
    t.equal(again.stdout.trim(), 'true', 'declaring again answers the stored package');
  });

  await t.test("the README's example session is the same commands", async (t) => {
    const example = blocks(sectionOf(readme, 'Example session'), 'sh');
    t.ok(example.length > 0, 'the README has an sh block in "Example session"');
    // Every line but comments and the settings the session takes from its environment.
    const lines = example
      .join('\n')
      .split('\n')
      .map((l) => l.trim());
    const commands = lines.filter((l) => l !== '' && !l.startsWith('#') && !/^(TOKEN|PRESERVD|BAG)=/.test(l));
    t.ok(
      commands.some((l) => l.startsWith('rsync ')) && commands.some((l) => l.includes('/complete')),
      'it shows the steps',
    );
    const sessionLines = new Set(session[0]!.split('\n').map((l) => l.trim()));
    for (const c of commands) t.ok(sessionLines.has(c), `README line is in the tested session: ${c}`);
  });
});

t.test('the by-hand recipe in docs/depositors.md makes a valid bag', async (t) => {
  t.teardown(() => rmSync(recipeScratch, { recursive: true, force: true }));
  const { blocks: count, made, check } = await recipe;
  t.equal(count, 1, 'one sh bag block');
  t.equal(made?.code, 0, made?.stderr ?? 'no recipe ran');
  t.equal(check.code, 0, `preservd validate accepts it:\n${check.stdout}${check.stderr}`);
  t.match(check.stdout, /0 errors, 0 warnings/);
});
