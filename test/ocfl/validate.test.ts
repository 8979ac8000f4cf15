/**
 * The OCFL project's own test objects (test/fixtures/ocfl/1.1, CC-BY-4.0) through our validator:
 * every good object valid (W004 the only warning allowed), every warn object valid with the
 * warnings its name lists, every bad object invalid with the error codes its name lists among those
 * reported. No exceptions: for each bad object, every code of its name is reported.
 */
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import {
  fsReader,
  validateObject,
  type ObjectReport,
  type OcflProblem,
  type OcflReader,
} from '../../src/ocfl/validate/index.js';
import { repoRoot } from '../helpers/conformance-suite.js';

const FIXTURES = join(repoRoot(), 'test/fixtures/ocfl/1.1');
const fixtures = (kind: string) => readdirSync(join(FIXTURES, kind)).sort();
const validate = (dir: string, digests = true) => validateObject(fsReader(dir), '', { digests });
const codesOf = (r: ObjectReport): string[] => [...new Set(r.problems.map((p) => p.code))].sort();
const codesInName = (name: string) => name.match(/[EW]\d{3}/g) ?? [];
const errorsOf = (r: ObjectReport): OcflProblem[] => r.problems.filter((p) => p.severity === 'error');

t.test('every good object is valid, with no warning but W004 (sha256 content addressing)', async (t) => {
  const names = fixtures('good-objects');
  t.ok(names.length >= 12, `${names.length} good objects`);
  for (const name of names) {
    const report = await validate(join(FIXTURES, 'good-objects', name));
    t.equal(report.valid, true, `${name} is valid`);
    t.same(
      codesOf(report).filter((c) => c !== 'W004'),
      [],
      `${name}: nothing reported but W004`,
    );
    t.match(report.id, /./, `${name}: its id is given`);
  }
});

t.test('every warn object is valid, with the warnings its name lists', async (t) => {
  const names = fixtures('warn-objects');
  t.ok(names.length >= 13, `${names.length} warn objects`);
  for (const name of names) {
    const report = await validate(join(FIXTURES, 'warn-objects', name));
    t.same(errorsOf(report), [], `${name} has no error`);
    t.equal(report.valid, true, `${name} is valid`);
    const codes = codesOf(report);
    for (const code of codesInName(name))
      t.ok(codes.includes(code), `${name} reports ${code} (got ${codes.join(', ')})`);
  }
});

t.test('every bad object is invalid, and reports every error code its name lists', async (t) => {
  const names = fixtures('bad-objects');
  t.ok(names.length >= 55, `${names.length} bad objects`);
  for (const name of names) {
    const report = await validate(join(FIXTURES, 'bad-objects', name));
    t.equal(report.valid, false, `${name} is invalid`);
    const codes = codesOf(report);
    for (const code of codesInName(name))
      t.ok(codes.includes(code), `${name} reports ${code} (got ${codes.join(', ')})`);
  }
});

t.test('a problem carries its code, its severity, a message and the file it concerns', async (t) => {
  const report = await validate(join(FIXTURES, 'bad-objects', 'E092_content_file_digest_mismatch'));
  const [problem] = report.problems;
  t.match(problem, {
    code: 'E092',
    severity: 'error',
    path: 'v1/content/test.txt',
    message: /^v1\/content\/test\.txt has sha512 [0-9a-f]{128}; inventory\.json gives [0-9a-f]{128} \[E092: /,
  });
  const warned = await validate(join(FIXTURES, 'warn-objects', 'W010_no_version_inventory'));
  t.match(
    warned.problems.find((p) => p.code === 'W010'),
    { severity: 'warning', path: /^v\d+\/inventory\.json$/ },
  );
});

t.test('without digests, only the objects whose fault is a wrong digest pass', async (t) => {
  const passing: string[] = [];
  for (const kind of ['good-objects', 'warn-objects', 'bad-objects'])
    for (const name of fixtures(kind)) {
      const full = await validate(join(FIXTURES, kind, name));
      const quick = await validate(join(FIXTURES, kind, name), false);
      if (quick.valid !== full.valid) passing.push(name);
    }
  t.same(passing, [
    'E092_algorithm_change_incorrect_digest',
    'E092_content_file_digest_mismatch',
    'E093_fixity_digest_mismatch',
  ]);
});

t.test('objects built here: an empty object folder, an empty content folder, a link', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'preservd-ocfl-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  // Git keeps no empty folder, so the truly empty object is made here (the fixture holds a .keep).
  mkdirSync(join(dir, 'empty'));
  t.same(codesOf(await validate(join(dir, 'empty'))), ['E003', 'E063']);
  t.same(codesOf(await validateObject(fsReader(dir), 'nothing-here')), ['E003'], 'no folder at all');

  const good = join(FIXTURES, 'good-objects', 'spec-ex-full');
  cpSync(good, join(dir, 'hollow'), { recursive: true });
  mkdirSync(join(dir, 'hollow', 'v1', 'content', 'nothing'));
  const hollow = await validate(join(dir, 'hollow'));
  t.same(codesOf(hollow), ['E024']);
  t.equal(hollow.problems[0]?.path, 'v1/content/nothing');

  cpSync(good, join(dir, 'linked'), { recursive: true });
  symlinkSync('/etc/hostname', join(dir, 'linked', 'v1', 'content', 'link'));
  t.ok(codesOf(await validate(join(dir, 'linked'))).includes('E090'), 'a symbolic link in content is E090');
});

t.test('content is read once per file for all its digests, and not at all without digests', async (t) => {
  const streamed: string[] = [];
  const inner = fsReader(join(FIXTURES, 'good-objects', 'ocfl_object_all_fixity_digests'));
  const counting: OcflReader = {
    ...inner,
    stream: (path) => (streamed.push(path), inner.stream(path)),
  };
  t.equal((await validateObject(counting, '', { digests: false })).valid, true);
  t.same(streamed, [], 'structure only: no content read');
  t.equal((await validateObject(counting, '', { digests: true })).valid, true);
  t.same(streamed, ['v1/content/file.txt'], 'one read for sha512, md5, sha1, sha256 and blake2b-512');
});
