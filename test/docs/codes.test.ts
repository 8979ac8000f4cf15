/**
 * docs/errors.md, docs/events.md and docs/configuration.md say what the code does: every problem
 * code, audit finding, event type, HTTP error status and configuration key the source can
 * produce is documented, and nothing documented has disappeared from the source.
 *
 * Problem codes come from each finder's typed table (`BAG_PROBLEM_CODES`, `CHIPMUNK_PROBLEM_CODES`,
 * `INGEST_PROBLEM_CODES`, `REPLICATION_PROBLEM_CODES`, `FINDING_CODES`); the `code: '...'` literals
 * read from src/ only check that no code is used outside those tables.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import t from 'tap';
import { FINDING_CODES } from '../../src/audit/verify.js';
import { BAG_PROBLEM_CODES } from '../../src/bagit/problems.js';
import { CHIPMUNK_PROBLEM_CODES } from '../../src/ingest/chipmunk/index.js';
import { INGEST_PROBLEM_CODES } from '../../src/ingest/problems.js';
import { REPLICATION_PROBLEM_CODES } from '../../src/replicas/index.js';
import { defaults } from '../../src/config/config.js';
import { eventSchema } from '../../src/http/schemas.js';
import { repoRoot } from '../helpers/daemon.js';

const srcDir = join(repoRoot, 'src');
const doc = (name: string) => readFileSync(join(repoRoot, 'docs', name), 'utf8');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

/** `code: 'kebab-case'` literals per source file (relative to src/). */
const literalCodes = new Map<string, Set<string>>();
for (const file of sourceFiles(srcDir)) {
  const codes = new Set([...readFileSync(file, 'utf8').matchAll(/\bcode:\s*'([a-z][a-z0-9-]*)'/g)].map((m) => m[1]!));
  if (codes.size > 0) literalCodes.set(relative(srcDir, file), codes);
}

/** Codes in files under one of `prefixes`. */
function codesIn(...prefixes: string[]): Set<string> {
  const out = new Set<string>();
  for (const [file, codes] of literalCodes) if (prefixes.some((p) => file.startsWith(p))) codes.forEach((c) => out.add(c));
  return out;
}

/** The `| \`code\` | severity | …` rows of each `## ` section of a Markdown page. */
function tableRows(markdown: string): Map<string, Map<string, string[]>> {
  const sections = new Map<string, Map<string, string[]>>();
  let current = new Map<string, string[]>();
  for (const line of markdown.split('\n')) {
    const heading = /^## (.+)$/.exec(line);
    if (heading) sections.set(heading[1]!.trim(), (current = new Map()));
    const row = /^\| `([^`]+)` \|(.*)\|\s*$/.exec(line);
    if (row) current.set(row[1]!, row[2]!.split(' | ').map((c) => c.trim()));
  }
  return sections;
}

const sorted = (s: Iterable<string>) => [...s].sort();
const errorsDoc = tableRows(doc('errors.md'));
const section = (title: string) => {
  const rows = errorsDoc.get(title);
  if (rows === undefined) throw new Error(`docs/errors.md has no section "## ${title}"`);
  return rows;
};

t.test('problem codes come from bagit/, ingest/, audit/ and replicas/ only (download/ literals are internal stream errors)', async (t) => {
  // If this fails, a new folder started reporting codes: decide which section of errors.md they belong to.
  const placed = ['bagit/', 'ingest/', 'audit/', 'replicas/', 'download/'];
  t.same([...literalCodes.keys()].filter((f) => !placed.some((p) => f.startsWith(p))), [], 'codes only in bagit/, ingest/, audit/, replicas/ (and download/ internals)');
});

t.test('every bag problem code is in errors.md with its severity, and nothing else is', async (t) => {
  const rows = section('Bag problems (BagIt, RFC 8493)');
  t.same(sorted(rows.keys()), sorted(Object.keys(BAG_PROBLEM_CODES)));
  t.same(sorted(codesIn('bagit/')).filter((c) => !(c in BAG_PROBLEM_CODES)), [], 'every literal in src/bagit is in BAG_PROBLEM_CODES');
  for (const [code, severity] of Object.entries(BAG_PROBLEM_CODES)) {
    t.equal(rows.get(code)?.[0]?.split(' ')[0], severity, `${code} is documented as ${severity}`);
  }
});

t.test('every chipmunk and ingest problem code is in errors.md with its severity, and nothing else is', async (t) => {
  const chipmunkRows = section('chipmunk and content-type problems');
  const ingestRows = section('Ingest problems');
  t.same(sorted(chipmunkRows.keys()), sorted(Object.keys(CHIPMUNK_PROBLEM_CODES)));
  t.same(sorted(ingestRows.keys()), sorted(Object.keys(INGEST_PROBLEM_CODES)));
  const literals = [...codesIn('ingest/')].filter((c) => !(c in CHIPMUNK_PROBLEM_CODES) && !(c in INGEST_PROBLEM_CODES) && !(c in BAG_PROBLEM_CODES));
  t.same(literals, [], 'every code constructed in src/ingest is in one of the tables');
  for (const [code, severity] of [...Object.entries(CHIPMUNK_PROBLEM_CODES), ...Object.entries(INGEST_PROBLEM_CODES)]) {
    t.equal((chipmunkRows.get(code) ?? ingestRows.get(code))?.[0], severity, `${code} is documented as ${severity}`);
  }
});

t.test('every audit finding is in errors.md with its severity, and nothing else is', async (t) => {
  const findings = Object.keys(FINDING_CODES);
  const rows = section('Audit findings');
  t.same(sorted(rows.keys()), sorted(findings));
  t.same([...codesIn('audit/')].filter((c) => !(c in FINDING_CODES)), [], 'every literal in src/audit is in FINDING_CODES');
  for (const [code, severity] of Object.entries(FINDING_CODES)) t.equal(rows.get(code)?.[0], severity, `${code} is documented as ${severity}`);
  const audits = tableRows(doc('audits.md'));
  const inAuditsMd = [...audits.values()].flatMap((rows) => [...rows.keys()]);
  t.same(sorted(findings).filter((c) => !inAuditsMd.includes(c)), [], 'docs/audits.md lists them too');
});

t.test('every replication problem is in errors.md with its severity, and nothing else is', async (t) => {
  const rows = section('Replication problems');
  t.same(sorted(rows.keys()), sorted(Object.keys(REPLICATION_PROBLEM_CODES)));
  t.same([...codesIn('replicas/')].filter((c) => !(c in REPLICATION_PROBLEM_CODES)), [], 'every literal in src/replicas is in REPLICATION_PROBLEM_CODES');
  for (const [code, severity] of Object.entries(REPLICATION_PROBLEM_CODES)) t.equal(rows.get(code)?.[0], severity, `${code} is documented as ${severity}`);
});

t.test('every HTTP error status the routes declare or send is in errors.md', async (t) => {
  const statuses = new Set<number>();
  for (const file of sourceFiles(join(srcDir, 'http'))) {
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/errors\(([\d,\s]+)\)/g)) m[1]!.split(',').forEach((s) => statuses.add(Number(s.trim())));
    for (const m of text.matchAll(/(?:code|HttpError)\((\d{3})\b/g)) statuses.add(Number(m[1]));
  }
  for (const m of readFileSync(join(srcDir, 'http/errors.ts'), 'utf8').matchAll(/new HttpError\((\d{3})/g)) statuses.add(Number(m[1]));
  const documented = new Set([...doc('errors.md').matchAll(/^\| (\d{3}) \|/gm)].map((m) => Number(m[1])));
  const missing = [...statuses].filter((s) => s >= 400 && !documented.has(s));
  t.ok(statuses.has(422) && statuses.has(507), 'the scan finds statuses at all');
  t.same(missing.sort(), [], 'documented in the HTTP errors table');
});

t.test('every event type is in events.md', async (t) => {
  const types = (eventSchema.properties.type as { enum: readonly string[] }).enum;
  const headings = [...doc('events.md').matchAll(/^### (.+)$/gm)].flatMap((m) => [...m[1]!.matchAll(/`([^`]+)`/g)].map((c) => c[1]!));
  t.same(sorted(headings), sorted(types));
});

t.test('every configuration key is in configuration.md', async (t) => {
  const keys: string[] = [];
  const walk = (value: unknown, path: string) => {
    if (typeof value === 'object' && value !== null && !Array.isArray(value) && path !== 'contentTypes') {
      // An empty object (`download: {}`) has only optional keys, listed below.
      for (const [k, v] of Object.entries(value)) walk(v, path === '' ? k : `${path}.${k}`);
    } else keys.push(path);
  };
  walk(defaults(), '');
  // Keys without a default (optional in `Config`).
  keys.push('upload.rsync.advertisedHost', 'upload.linkTemplate', 'audit.webhookUrl', 'audit.everyDays', 'download.offload');
  const documented = new Set([...doc('configuration.md').matchAll(/^\| `([^`]+)`/gm)].map((m) => m[1]!));
  t.same(keys.filter((k) => !documented.has(k)).sort(), [], 'each key has a row');
  t.same([...documented].filter((k) => !keys.includes(k)).sort(), [], 'each row is a key');
});
