/**
 * docs/errors.md, docs/events.md and docs/configuration.md say what the code does: every problem
 * code, audit finding, event type, HTTP error status and configuration key the source can
 * produce is documented, and nothing documented has disappeared from the source.
 *
 * Problem codes and audit findings come from each module's table (`defineProblems`, imported
 * here): the table is keyed by the module's union of problem values, so a code the source can
 * construct is in its table by construction, and only the tables are compared with the docs.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { FINDING_CODES } from '../../src/audit/findings.js';
import { BAG_PROBLEM_CODES } from '../../src/bagit/problems.js';
import { CHIPMUNK_PROBLEM_CODES } from '../../src/ingest/chipmunk/index.js';
import { INGEST_PROBLEM_CODES } from '../../src/ingest/problems.js';
import { REPLICATION_PROBLEM_CODES } from '../../src/replicas/index.js';
import { ConfigSchema } from '../../src/config/schema.js';
import { eventSchema } from '../../src/http/schemas.js';
import { repoRoot } from '../helpers/daemon.js';

const srcDir = join(repoRoot, 'src');
const doc = (name: string) => readFileSync(join(repoRoot, 'docs', name), 'utf8');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

/** The `| \`code\` | severity | …` rows of each `## ` section of a Markdown page. */
function tableRows(markdown: string): Map<string, Map<string, string[]>> {
  const sections = new Map<string, Map<string, string[]>>();
  let current = new Map<string, string[]>();
  for (const line of markdown.split('\n')) {
    const heading = /^## (.+)$/.exec(line);
    if (heading) sections.set(heading[1]!.trim(), (current = new Map()));
    const row = /^\| `([^`]+)` \|(.*)\|\s*$/.exec(line);
    if (row)
      current.set(
        row[1]!,
        row[2]!.split(' | ').map((c) => c.trim()),
      );
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

t.test(
  "a queue item's problems (bag, chipmunk, ingest) never share a code, so a code names one thing",
  async (t) => {
    const tables = { bag: BAG_PROBLEM_CODES, chipmunk: CHIPMUNK_PROBLEM_CODES, ingest: INGEST_PROBLEM_CODES };
    const owners = new Map<string, string[]>();
    for (const [module, table] of Object.entries(tables))
      for (const code of Object.keys(table)) owners.set(code, [...(owners.get(code) ?? []), module]);
    t.ok(owners.size > 60, `${owners.size} codes read from the tables`);
    t.same(
      [...owners].filter(([, modules]) => modules.length > 1),
      [],
    );
  },
);

t.test('every bag problem code is in errors.md with its severity, and nothing else is', async (t) => {
  const rows = section('Bag problems (BagIt, RFC 8493)');
  t.same(sorted(rows.keys()), sorted(Object.keys(BAG_PROBLEM_CODES)));
  for (const [code, severity] of Object.entries(BAG_PROBLEM_CODES)) {
    t.equal(rows.get(code)?.[0]?.split(' ')[0], severity, `${code} is documented as ${severity}`);
  }
});

t.test(
  'every chipmunk and ingest problem code is in errors.md with its severity, and nothing else is',
  async (t) => {
    const chipmunkRows = section('chipmunk and content-type problems');
    const ingestRows = section('Ingest problems');
    t.same(sorted(chipmunkRows.keys()), sorted(Object.keys(CHIPMUNK_PROBLEM_CODES)));
    t.same(sorted(ingestRows.keys()), sorted(Object.keys(INGEST_PROBLEM_CODES)));
    for (const [code, severity] of [
      ...Object.entries(CHIPMUNK_PROBLEM_CODES),
      ...Object.entries(INGEST_PROBLEM_CODES),
    ]) {
      t.equal(
        (chipmunkRows.get(code) ?? ingestRows.get(code))?.[0],
        severity,
        `${code} is documented as ${severity}`,
      );
    }
  },
);

t.test('every audit finding is in errors.md with its severity, and nothing else is', async (t) => {
  const findings = Object.keys(FINDING_CODES);
  const rows = section('Audit findings');
  t.same(sorted(rows.keys()), sorted(findings));
  for (const [code, severity] of Object.entries(FINDING_CODES))
    t.equal(rows.get(code)?.[0], severity, `${code} is documented as ${severity}`);
  const audits = tableRows(doc('audits.md'));
  const inAuditsMd = [...audits.values()].flatMap((rows) => [...rows.keys()]);
  t.same(
    sorted(findings).filter((c) => !inAuditsMd.includes(c)),
    [],
    'docs/audits.md lists them too',
  );
});

t.test('every replication problem is in errors.md with its severity, and nothing else is', async (t) => {
  const rows = section('Replication problems');
  t.same(sorted(rows.keys()), sorted(Object.keys(REPLICATION_PROBLEM_CODES)));
  for (const [code, severity] of Object.entries(REPLICATION_PROBLEM_CODES))
    t.equal(rows.get(code)?.[0], severity, `${code} is documented as ${severity}`);
});

t.test('every HTTP error status the routes declare or send is in errors.md', async (t) => {
  const statuses = new Set<number>();
  for (const file of sourceFiles(join(srcDir, 'http'))) {
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/errors\(([\d,\s]+)\)/g))
      m[1]!.split(',').forEach((s) => statuses.add(Number(s.trim())));
    for (const m of text.matchAll(/(?:code|HttpError)\((\d{3})\b/g)) statuses.add(Number(m[1]));
  }
  for (const m of readFileSync(join(srcDir, 'http/errors.ts'), 'utf8').matchAll(/new HttpError\((\d{3})/g))
    statuses.add(Number(m[1]));
  const documented = new Set([...doc('errors.md').matchAll(/^\| (\d{3}) \|/gm)].map((m) => Number(m[1])));
  const missing = [...statuses].filter((s) => s >= 400 && !documented.has(s));
  t.ok(statuses.has(422) && statuses.has(507), 'the scan finds statuses at all');
  t.same(missing.sort(), [], 'documented in the HTTP errors table');
});

t.test('every event type is in events.md', async (t) => {
  const types = (eventSchema.properties.type as { enum: readonly string[] }).enum;
  const headings = [...doc('events.md').matchAll(/^### (.+)$/gm)].flatMap((m) =>
    [...m[1]!.matchAll(/`([^`]+)`/g)].map((c) => c[1]!),
  );
  t.same(sorted(headings), sorted(types));
});

t.test('every configuration key is in configuration.md, with its default', async (t) => {
  // The keys are read from the schema: a section with a default (all of its keys have one or are
  // optional) is walked into; anything else (`replicas`, `contentTypes`, `download.offload`) is one row.
  interface Schema {
    properties?: Record<string, Schema>;
    default?: unknown;
  }
  const keys = new Map<string, Schema>();
  const walk = (schema: Schema, path: string) => {
    for (const [k, v] of Object.entries(schema.properties ?? {})) {
      const key = path === '' ? k : `${path}.${k}`;
      if (v.properties !== undefined && v.default !== undefined) walk(v, key);
      else keys.set(key, v);
    }
  };
  walk(ConfigSchema, '');
  t.ok(
    keys.size > 40 && keys.has('upload.rsync.port') && keys.has('audit.everyDays'),
    `${keys.size} keys read from the schema`,
  );
  const rows = new Map(
    [...doc('configuration.md').matchAll(/^\| `([^`]+)`[^|]*\| ([^|]*) \|/gm)].map((m) => [m[1]!, m[2]!]),
  );
  const documented = new Set(rows.keys());
  t.same([...keys.keys()].filter((k) => !documented.has(k)).sort(), [], 'each key has a row');
  t.same([...documented].filter((k) => !keys.has(k)).sort(), [], 'each row is a key');
  for (const [key, schema] of keys) {
    const value = schema.default;
    // fixity.workers defaults to the number of cores, documented as "cores".
    if (
      value === undefined ||
      key === 'fixity.workers' ||
      (typeof value === 'object' && !Array.isArray(value))
    )
      continue;
    const shown = '`' + (typeof value === 'string' ? value : JSON.stringify(value)) + '`';
    t.ok(rows.get(key)?.startsWith(shown), `${key}: documented default ${rows.get(key)} is ${shown}`);
  }
});
