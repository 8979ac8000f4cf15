/**
 * `preservd validate DIR [--content-type T --external-id X --bag-id B] [--json]` (CLI.md):
 * validates a bag directory offline, prints every problem, one per line, then a summary.
 * With the three request flags it also runs the checks the ingest runs for such a request
 * (`checkUpload`): chipmunk-info.txt, and the content type's bag-info profile and external
 * validator from the configuration (PRESERVD_CONFIG and defaults, as the daemon loads them; the
 * configuration is read only then). An unknown content type cannot be checked: exit 2.
 * Exit 0 valid, 1 invalid, 2 could not run.
 */
import { stat } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { showPath, type BagReport, type FileHasher } from '../bagit/index.js';
import { errorsOf, type StoredProblem } from '../catalog/types.js';
import { createHasher, HelpingHasher } from '../fixity/index.js';
import { checkUpload } from '../ingest/check-upload.js';
import type { ContentTypeRules, ExpectedRequest } from '../ingest/chipmunk/index.js';

export interface ValidateIO {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
}

const USAGE = 'usage: preservd validate DIR [--content-type T --external-id X --bag-id B] [--json]\n';

interface ValidateArgs {
  dir: string;
  json: boolean;
  request?: ExpectedRequest;
}

const REQUEST_FLAGS = {
  '--content-type': 'contentType',
  '--external-id': 'externalId',
  '--bag-id': 'bagId',
} as const;
type RequestFlag = keyof typeof REQUEST_FLAGS;

/** Parse the arguments, or say what is wrong with them. Flags take `--flag value` or `--flag=value`. */
export function parseValidateArgs(argv: readonly string[]): ValidateArgs | { error: string } {
  let dir: string | undefined;
  let json = false;
  const request: Partial<ExpectedRequest> = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--json') {
      json = true;
      continue;
    }
    if (arg.startsWith('--')) {
      const eq = arg.indexOf('=');
      const flag = eq < 0 ? arg : arg.slice(0, eq);
      if (!(flag in REQUEST_FLAGS)) return { error: `unknown option ${flag}` };
      const value = eq < 0 ? argv[++i] : arg.slice(eq + 1);
      if (value === undefined || value === '') return { error: `${flag} needs a value` };
      request[REQUEST_FLAGS[flag as RequestFlag]] = value;
      continue;
    }
    if (dir !== undefined) return { error: `unexpected argument ${arg}` };
    dir = arg;
  }
  if (dir === undefined) return { error: 'no bag directory given' };
  const given = Object.keys(request).length;
  if (given === 0) return { dir, json };
  if (given < 3)
    return { error: '--content-type, --external-id and --bag-id go together: give all three or none' };
  return { dir, json, request: request as ExpectedRequest };
}

/**
 * The content type's rules from the daemon's configuration, or why there are none. The
 * configuration's module (ajv, typebox) is loaded only here: most runs never need it, and it
 * was a good part of the command's start-up.
 */
async function contentTypeRules(
  contentType: string,
  env: NodeJS.ProcessEnv,
): Promise<{ rules: ContentTypeRules } | { error: string }> {
  const { ConfigError, loadConfig } = await import('../config/config.js');
  let contentTypes;
  try {
    contentTypes = loadConfig(env).contentTypes;
  } catch (err) {
    return {
      error:
        err instanceof ConfigError
          ? err.message
          : `the configuration could not be read: ${(err as Error).message}`,
    };
  }
  const rules = Object.hasOwn(contentTypes, contentType) ? contentTypes[contentType] : undefined;
  if (rules === undefined) {
    const source = env.PRESERVD_CONFIG
      ? `the configuration ${env.PRESERVD_CONFIG}`
      : 'the default configuration (PRESERVD_CONFIG is not set)';
    return {
      error: `unknown content type "${contentType}": ${source} has ${Object.keys(contentTypes).join(', ')}`,
    };
  }
  return { rules };
}

/** `error  <code>  <path>  <sentence>`; continuation lines of a long sentence are indented. */
export function formatProblem(p: StoredProblem): string {
  const sentence = p.message.replace(/\n/g, '\n    ');
  return `${p.severity ?? 'error'}  ${p.code}  ${p.path === undefined ? '-' : showPath(p.path)}  ${sentence}`;
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/**
 * Run the command. `deps.hasher` lets a caller that validates many bags share one hashing pool
 * (tests do); by default the command starts its own fixity pool and closes it when done.
 */
export async function runValidate(
  argv: string[],
  io: ValidateIO,
  deps: { hasher?: FileHasher; env?: NodeJS.ProcessEnv } = {},
): Promise<number> {
  const args = parseValidateArgs(argv);
  if ('error' in args) {
    io.stderr.write(`preservd validate: ${args.error}\n${USAGE}`);
    return 2;
  }
  try {
    if (!(await stat(args.dir)).isDirectory()) {
      io.stderr.write(`preservd validate: ${args.dir} is not a directory\n`);
      return 2;
    }
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    io.stderr.write(
      `preservd validate: cannot open ${args.dir}${code === 'ENOENT' ? ': no such directory' : ` (${code ?? 'error'})`}\n`,
    );
    return 2;
  }

  let rules: ContentTypeRules | undefined;
  if (args.request !== undefined) {
    const found = await contentTypeRules(args.request.contentType, deps.env ?? process.env);
    if ('error' in found) {
      io.stderr.write(`preservd validate: ${found.error}\n`);
      return 2;
    }
    rules = found.rules;
  }

  // One worker fewer than cores: this thread, idle while the bag is hashed, hashes beside them.
  const ownPool =
    deps.hasher === undefined
      ? createHasher({ workers: Math.max(1, availableParallelism() - 1) })
      : undefined;
  const hasher = deps.hasher ?? new HelpingHasher(ownPool!);
  let problems: StoredProblem[];
  let report: BagReport;
  try {
    // Only the JSON report shows each file's CRC-32; computing it cost a tenth of the hashing.
    ({ report, problems } = await checkUpload(args.dir, {
      hasher,
      request: args.request,
      rules,
      crc32: args.json,
    }));
  } finally {
    await ownPool?.close();
  }
  const unreadable = problems.find((p) => p.code === 'bag-unreadable');
  if (unreadable !== undefined) {
    // Nothing could be checked: "could not run", not "invalid".
    io.stderr.write(`preservd validate: ${unreadable.message}\n`);
    return 2;
  }
  const errors = errorsOf(problems).length;
  const warnings = problems.length - errors;
  const valid = errors === 0;

  if (args.json) {
    io.stdout.write(`${JSON.stringify({ ...report, valid, problems }, null, 2)}\n`);
  } else {
    for (const p of problems) io.stdout.write(`${formatProblem(p)}\n`);
    const what = report.version === undefined ? 'bag' : `BagIt ${report.version} bag`;
    io.stdout.write(
      `${valid ? 'valid' : 'invalid'} ${what}: ${plural(report.payloadFiles, 'payload file')}, ${plural(report.payloadBytes, 'byte')}; ${plural(errors, 'error')}, ${plural(warnings, 'warning')}\n`,
    );
  }
  return valid ? 0 : 1;
}
