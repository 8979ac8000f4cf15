/**
 * The checks chipmunk makes after BagIt (research/chipmunk.md §7): chipmunk-info.txt must match
 * the request, its Metadata-* tags come all or none and name a tag file in the bag, bag-info.txt
 * must satisfy the content type's profile, and the content type's external validator must accept
 * the bag. Unlike chipmunk, every check runs and every problem is reported, and the validator runs
 * without a shell, with a time limit. Nothing here writes to the bag.
 */
import { readFile } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import { decodeTagBytes, isPayloadPath, makeProblem, parseTagText, tagValue, unsafePathReason, type BagProblemInit, type BagReport } from '../bagit/index.js';
import type { StoredProblem } from '../catalog/types.js';
import { spawnIsolated } from '../process/spawn.js';

export interface ContentTypeRules {
  /** Path to a chipmunk bag-info profile JSON (relative paths resolve against the working directory). */
  profile?: string;
  /** Argument vector; placeholders `{external_id}` and `{bag}` (absolute bag directory). */
  validator?: string[];
  timeoutMs?: number;
}

export interface ExpectedRequest {
  bagId: string;
  externalId: string;
  contentType: string;
}

const CHIPMUNK_INFO = 'chipmunk-info.txt';
const DEFAULT_VALIDATOR_TIMEOUT_MS = 10 * 60 * 1000;
/** Stderr kept in a problem: enough to see what went wrong, not a log file in the catalog. */
export const VALIDATOR_OUTPUT_LIMIT = 2000;

const IDENTITY_TAGS = ['External-Identifier', 'Bag-ID', 'Chipmunk-Content-Type'] as const;
const METADATA_TAGS = ['Metadata-URL', 'Metadata-Type', 'Metadata-Tagfile'] as const;
type IdentityTag = (typeof IDENTITY_TAGS)[number];

type ChipmunkProblemInit =
  | { code: 'chipmunk-info-mismatch'; path: typeof CHIPMUNK_INFO; tag: IdentityTag; expected: string; actual?: string; fileMissing: boolean }
  | { code: 'chipmunk-metadata-incomplete'; path: typeof CHIPMUNK_INFO; present: string[]; missing: string[] }
  | { code: 'chipmunk-metadata-tagfile-missing'; path: string; inPayload: boolean }
  | { code: 'profile-unreadable'; contentType: string; detail: string }
  | { code: 'profile-invalid'; contentType: string; detail: string }
  | { code: 'profile-tag-missing'; path: 'bag-info.txt'; tag: string }
  | { code: 'profile-value-not-allowed'; path: 'bag-info.txt'; tag: string; value: string; allowed: string[] }
  | { code: 'validator-failed'; contentType: string; exitCode: number | null; signal: string | null; output: string }
  | { code: 'validator-timeout'; contentType: string; timeoutMs: number }
  | { code: 'validator-unavailable'; contentType: string; command: string; detail: string };

type ChipmunkProblem = ChipmunkProblemInit & { severity: 'error'; message: string } & StoredProblem;

/** The one place a chipmunk problem becomes a sentence. */
function describeChipmunkProblem(p: ChipmunkProblemInit): string {
  switch (p.code) {
    case 'chipmunk-info-mismatch':
      if (p.fileMissing) return `${CHIPMUNK_INFO} is missing, so ${p.tag} cannot match the request's "${p.expected}".`;
      if (p.actual === undefined) return `${CHIPMUNK_INFO} has no ${p.tag}; the request says "${p.expected}".`;
      return `${CHIPMUNK_INFO} gives ${p.tag} "${p.actual}", but the request says "${p.expected}".`;
    case 'chipmunk-metadata-incomplete':
      return `${CHIPMUNK_INFO} has ${p.present.join(', ')} but not ${p.missing.join(', ')}; the Metadata-URL, Metadata-Type and Metadata-Tagfile tags come all together or not at all.`;
    case 'chipmunk-metadata-tagfile-missing':
      return p.inPayload
        ? `Metadata-Tagfile names ${p.path}, a payload file; it must name a tag file outside data/.`
        : `Metadata-Tagfile names ${p.path}, which is not a tag file in the bag.`;
    case 'profile-unreadable':
      return `The bag-info profile of content type "${p.contentType}" could not be read (${p.detail}); the repository's configuration needs fixing.`;
    case 'profile-invalid':
      return `The bag-info profile of content type "${p.contentType}" is not valid (${p.detail}); the repository's configuration needs fixing.`;
    case 'profile-tag-missing':
      return `bag-info.txt has no ${p.tag}, which this content type requires.`;
    case 'profile-value-not-allowed':
      return `bag-info.txt gives ${p.tag} "${p.value}", which is not one of the allowed values (${p.allowed.map((v) => `"${v}"`).join(', ')}).`;
    case 'validator-failed': {
      const how = p.exitCode !== null ? `exited with status ${p.exitCode}` : `was killed by ${p.signal ?? 'a signal'}`;
      return `The content validator for "${p.contentType}" rejected the bag (it ${how})${p.output === '' ? '.' : `:\n${p.output}`}`;
    }
    case 'validator-timeout':
      return `The content validator for "${p.contentType}" did not finish within ${Math.round(p.timeoutMs / 1000)} s and was stopped.`;
    case 'validator-unavailable':
      return `The content validator for "${p.contentType}" (${p.command}) could not be started (${p.detail}); the repository's configuration needs fixing.`;
  }
}

function chipmunkProblem(init: ChipmunkProblemInit): ChipmunkProblem {
  return { ...init, severity: 'error', message: describeChipmunkProblem(init) } as ChipmunkProblem;
}

function errorCode(err: unknown): string {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' ? code : err instanceof Error ? err.message : String(err);
}

// ---------------------------------------------------------------------------------------------
// chipmunk-info.txt

/** Read chipmunk-info.txt in the bag's tag-file encoding; undefined when the bag has none. */
async function readChipmunkInfo(bagDir: string, report: BagReport, problems: StoredProblem[]): Promise<Map<string, string> | undefined> {
  if (!report.files.some((f) => f.path === CHIPMUNK_INFO)) return undefined;
  let bytes: Buffer;
  try {
    bytes = await readFile(join(bagDir, CHIPMUNK_INFO));
  } catch (err) {
    problems.push(makeProblem({ code: 'file-unreadable', path: CHIPMUNK_INFO, detail: errorCode(err) }));
    return new Map();
  }
  const encoding = report.encoding !== undefined && decodeTagBytes(new Uint8Array(0), report.encoding).ok ? report.encoding : 'UTF-8';
  const decoded = decodeTagBytes(bytes, encoding);
  if (!decoded.ok) {
    problems.push(makeProblem({ code: 'tag-file-undecodable', path: CHIPMUNK_INFO, encoding }));
    return new Map();
  }
  const parsed = parseTagText(decoded.text.replace(/^\ufeff/, ''));
  parsed.malformedLines.forEach((line) => problems.push(makeProblem({ code: 'tag-file-malformed', path: CHIPMUNK_INFO, line })));
  const tags = new Map<string, string>();
  for (const tag of [...IDENTITY_TAGS, ...METADATA_TAGS]) {
    const value = tagValue(parsed.entries, tag);
    if (value !== undefined) tags.set(tag, value);
  }
  return tags;
}

function checkChipmunkInfo(tags: Map<string, string> | undefined, expected: ExpectedRequest, report: BagReport): StoredProblem[] {
  const problems: StoredProblem[] = [];
  const wanted: Record<IdentityTag, string> = {
    'External-Identifier': expected.externalId,
    'Bag-ID': expected.bagId,
    'Chipmunk-Content-Type': expected.contentType,
  };
  for (const tag of IDENTITY_TAGS) {
    const actual = tags?.get(tag);
    // A bag_id is a UUID, compared case-insensitively (API.md); the others are exact.
    const same = actual !== undefined && (tag === 'Bag-ID' ? actual.toLowerCase() === wanted[tag].toLowerCase() : actual === wanted[tag]);
    if (same) continue;
    const init: ChipmunkProblemInit = { code: 'chipmunk-info-mismatch', path: CHIPMUNK_INFO, tag, expected: wanted[tag], fileMissing: tags === undefined };
    if (actual !== undefined) init.actual = actual;
    problems.push(chipmunkProblem(init));
  }
  if (tags === undefined) return problems;

  const present = METADATA_TAGS.filter((t) => tags.has(t));
  if (present.length > 0 && present.length < METADATA_TAGS.length) {
    const missing = METADATA_TAGS.filter((t) => !tags.has(t));
    problems.push(chipmunkProblem({ code: 'chipmunk-metadata-incomplete', path: CHIPMUNK_INFO, present, missing }));
  }
  const tagfile = tags.get('Metadata-Tagfile');
  if (tagfile !== undefined) {
    const unsafe = unsafePathReason(tagfile);
    if (unsafe !== undefined) {
      problems.push(makeProblem({ code: 'unsafe-path', path: tagfile, listedIn: CHIPMUNK_INFO, reason: unsafe } satisfies BagProblemInit));
    } else if (isPayloadPath(tagfile) || !report.files.some((f) => f.path === tagfile)) {
      problems.push(chipmunkProblem({ code: 'chipmunk-metadata-tagfile-missing', path: tagfile, inPayload: isPayloadPath(tagfile) }));
    }
  }
  return problems;
}

// ---------------------------------------------------------------------------------------------
// bag-info profile

export interface ProfileRule {
  tag: string;
  required: boolean;
  allowed?: string[];
}

/**
 * Read a chipmunk "bagger profile": `{"ordered": [{"<Tag>": {"fieldRequired": bool,
 * "valueList"?: [string...]}}...]}`. `defaultValue` and other keys are ignored, as chipmunk does;
 * an entry without a boolean `fieldRequired` is a configuration error.
 */
export function parseProfile(json: unknown): ProfileRule[] | { error: string } {
  const ordered = (json as { ordered?: unknown } | null)?.ordered;
  if (!Array.isArray(ordered)) return { error: 'no "ordered" array' };
  const rules: ProfileRule[] = [];
  for (const [i, item] of ordered.entries()) {
    const keys = item !== null && typeof item === 'object' ? Object.keys(item as object) : [];
    if (keys.length !== 1) return { error: `entry ${i + 1} is not an object with exactly one tag` };
    const tag = keys[0]!;
    const spec = (item as Record<string, unknown>)[tag] as { fieldRequired?: unknown; valueList?: unknown } | null;
    if (spec === null || typeof spec !== 'object' || typeof spec.fieldRequired !== 'boolean') {
      return { error: `entry "${tag}" has no boolean fieldRequired` };
    }
    const rule: ProfileRule = { tag, required: spec.fieldRequired };
    if (spec.valueList !== undefined) {
      if (!Array.isArray(spec.valueList) || !spec.valueList.every((v) => typeof v === 'string')) {
        return { error: `entry "${tag}" has a valueList that is not a list of strings` };
      }
      rule.allowed = spec.valueList as string[];
    }
    rules.push(rule);
  }
  return rules;
}

/**
 * Check bag-info entries against profile rules; every rule is checked and every problem kept.
 * Labels match case-insensitively (as elsewhere in bag-info); values match exactly, so a value
 * list entry with a trailing space (chipmunk's "Not Yet Known ") means what it says. An empty
 * value counts as present. Every occurrence of a repeated tag must be allowed.
 */
export function checkProfile(rules: readonly ProfileRule[], bagInfo: ReadonlyArray<[string, string]>): StoredProblem[] {
  const problems: StoredProblem[] = [];
  for (const rule of rules) {
    const values = bagInfo.filter(([label]) => label.toLowerCase() === rule.tag.toLowerCase()).map(([, v]) => v);
    if (values.length === 0) {
      if (rule.required) problems.push(chipmunkProblem({ code: 'profile-tag-missing', path: 'bag-info.txt', tag: rule.tag }));
      continue;
    }
    if (rule.allowed === undefined) continue;
    for (const value of values) {
      if (!rule.allowed.includes(value)) {
        problems.push(chipmunkProblem({ code: 'profile-value-not-allowed', path: 'bag-info.txt', tag: rule.tag, value, allowed: rule.allowed }));
      }
    }
  }
  return problems;
}

async function checkAgainstProfile(profilePath: string, contentType: string, report: BagReport): Promise<StoredProblem[]> {
  let json: unknown;
  try {
    json = JSON.parse(await readFile(resolve(profilePath), 'utf8'));
  } catch (err) {
    const detail = err instanceof SyntaxError ? 'not JSON' : errorCode(err);
    return [chipmunkProblem({ code: 'profile-unreadable', contentType, detail })];
  }
  const rules = parseProfile(json);
  if ('error' in rules) return [chipmunkProblem({ code: 'profile-invalid', contentType, detail: rules.error })];
  return checkProfile(rules, report.bagInfo);
}

// ---------------------------------------------------------------------------------------------
// external validator

/** The first `limit` bytes of a stream, however much the validator writes. */
class BoundedOutput {
  private chunks: Buffer[] = [];
  private bytes = 0;
  constructor(private readonly limit: number) {}
  push(chunk: Buffer): void {
    if (this.bytes >= this.limit) return;
    this.chunks.push(chunk.subarray(0, this.limit - this.bytes));
    this.bytes += Math.min(chunk.length, this.limit - this.bytes);
  }
  text(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }
}

/** Trim a validator's output for a problem: no server path, at most VALIDATOR_OUTPUT_LIMIT characters. */
function presentOutput(raw: string, bagDir: string): string {
  const withoutPath = raw.split(bagDir).join('<bag>').trim();
  return withoutPath.length <= VALIDATOR_OUTPUT_LIMIT ? withoutPath : `${withoutPath.slice(0, VALIDATOR_OUTPUT_LIMIT)}… (truncated)`;
}

/** The environment a validator sees: ours, minus preservd's own settings and secrets. */
function validatorEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('PRESERVD_')));
}

const KILL_GRACE_MS = 2000;

/**
 * Run the content type's validator over the bag: an argument vector, never a shell, placeholders
 * replaced inside each argument. It runs in its own process group so that a timeout stops the
 * whole tree it started (SIGTERM, then SIGKILL after a grace period).
 */
export async function runValidator(
  argv: readonly string[],
  bagDir: string,
  externalId: string,
  contentType: string,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<StoredProblem | undefined> {
  signal?.throwIfAborted();
  if (argv.length === 0 || argv[0] === '') {
    return chipmunkProblem({ code: 'validator-unavailable', contentType, command: '(empty)', detail: 'no command configured' });
  }
  const absBag = resolve(bagDir);
  const args = argv.map((a) => a.replaceAll('{external_id}', externalId).replaceAll('{bag}', absBag));
  const command = args[0]!;
  const shownCommand = basename(command);

  return new Promise<StoredProblem | undefined>((resolvePromise, reject) => {
    const child = spawnIsolated(command, args.slice(1), { stdio: ['ignore', 'pipe', 'pipe'], detached: true, env: validatorEnv() });
    const stderr = new BoundedOutput(64 * 1024);
    const stdout = new BoundedOutput(64 * 1024);
    child.stderr?.on('data', (c: Buffer) => stderr.push(c));
    child.stdout?.on('data', (c: Buffer) => stdout.push(c));
    let settled = false;
    let timedOut = false;
    let killTimer: NodeJS.Timeout | undefined;
    let giveUpTimer: NodeJS.Timeout | undefined;

    const killGroup = (sig: NodeJS.Signals): void => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, sig);
      } catch {
        child.kill(sig);
      }
    };
    const finish = (outcome: () => void): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearTimeout(killTimer);
      clearTimeout(giveUpTimer);
      signal?.removeEventListener('abort', onAbort);
      outcome();
    };
    const stop = (): void => {
      killGroup('SIGTERM');
      killTimer = setTimeout(() => killGroup('SIGKILL'), KILL_GRACE_MS);
      // A grandchild holding our pipes open must not hang the ingest: stop waiting after the kill.
      giveUpTimer = setTimeout(() => {
        child.stdout?.destroy();
        child.stderr?.destroy();
        finish(() => resolvePromise(timedOut ? chipmunkProblem({ code: 'validator-timeout', contentType, timeoutMs }) : undefined));
      }, KILL_GRACE_MS * 2);
    };
    const timer = setTimeout(() => {
      timedOut = true;
      stop();
    }, timeoutMs);
    const onAbort = (): void => {
      killGroup('SIGKILL');
      finish(() => reject(signal?.reason));
    };
    signal?.addEventListener('abort', onAbort, { once: true });

    child.on('error', (err: NodeJS.ErrnoException) => {
      finish(() => resolvePromise(chipmunkProblem({ code: 'validator-unavailable', contentType, command: shownCommand, detail: errorCode(err) })));
    });
    child.on('close', (exitCode: number | null, exitSignal: NodeJS.Signals | null) => {
      finish(() => {
        if (timedOut) return resolvePromise(chipmunkProblem({ code: 'validator-timeout', contentType, timeoutMs }));
        if (exitCode === 0) return resolvePromise(undefined);
        // chipmunk's validators write to stderr; fall back to stdout for those that do not.
        const output = presentOutput(stderr.text().trim() !== '' ? stderr.text() : stdout.text(), absBag);
        resolvePromise(chipmunkProblem({ code: 'validator-failed', contentType, exitCode, signal: exitSignal, output }));
      });
    });
  });
}

// ---------------------------------------------------------------------------------------------

/**
 * Everything chipmunk checks after BagIt, all of it, every problem reported. The external
 * validator is not run over a bag holding symlinks or special files: third-party code must not
 * be led outside the bag, and the bag is refused for them anyway.
 */
export async function checkChipmunk(
  bagDir: string,
  report: BagReport,
  expected: ExpectedRequest,
  rules: ContentTypeRules | undefined,
  opts?: { signal?: AbortSignal | undefined },
): Promise<StoredProblem[]> {
  const problems: StoredProblem[] = [];
  const tags = await readChipmunkInfo(bagDir, report, problems);
  problems.push(...checkChipmunkInfo(tags, expected, report));
  if (rules?.profile !== undefined) problems.push(...(await checkAgainstProfile(rules.profile, expected.contentType, report)));
  if (rules?.validator !== undefined) {
    const unsafeBag = report.problems.some((p) => p.code === 'symlink' || p.code === 'special-file');
    if (!unsafeBag) {
      const failure = await runValidator(
        rules.validator,
        bagDir,
        expected.externalId,
        expected.contentType,
        rules.timeoutMs ?? DEFAULT_VALIDATOR_TIMEOUT_MS,
        opts?.signal,
      );
      if (failure !== undefined) problems.push(failure);
    }
  }
  return problems;
}
