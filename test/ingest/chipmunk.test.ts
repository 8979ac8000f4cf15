/**
 * chipmunk's checks after BagIt (chipmunk.md §7, scenarios 51-59): chipmunk-info.txt against the
 * request, Metadata-* tags, the bag-info profile and the external validator.
 */
import t from 'tap';
import { chmodSync, existsSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { validateBag } from '../../src/bagit/index.js';
import type { StoredProblem } from '../../src/catalog/types.js';
import {
  checkChipmunk,
  checkProfile,
  parseProfile,
  runValidator,
  VALIDATOR_OUTPUT_LIMIT,
  type ContentTypeRules,
  type ExpectedRequest,
} from '../../src/ingest/chipmunk/index.js';
import { SimpleHasher } from '../bagit/simple-hasher.js';
import { repoRoot } from '../helpers/conformance-suite.js';
import { makeBag, type MakeBagOptions } from '../helpers/make-bag.js';

const BAG_ID = '14d25bcd-deaf-4c94-add7-c189fdca4692';
const REQUEST: ExpectedRequest = { bagId: BAG_ID, externalId: 'test_ex_id_22', contentType: 'audio' };
const TEST_PROFILE = join(repoRoot(), 'config/profiles/test-profile.json');

async function check(
  dir: string,
  bag: Partial<MakeBagOptions> = {},
  rules?: ContentTypeRules,
  expected: ExpectedRequest = REQUEST,
): Promise<StoredProblem[]> {
  await makeBag(dir, {
    files: { samplefile: 'Hello Bag!\n' },
    chipmunkInfo: { externalId: REQUEST.externalId, bagId: REQUEST.bagId, contentType: REQUEST.contentType },
    ...bag,
  });
  const report = await validateBag(dir, { hasher: new SimpleHasher() });
  return checkChipmunk(dir, report, expected, rules);
}

const codes = (ps: StoredProblem[]): string[] => ps.map((p) => p.code);

t.test('a bag whose chipmunk-info.txt matches the request, without metadata tags, passes', async (t) => {
  t.same(await check(t.testdir()), []);
});

t.test('each identity tag that differs from the request is one problem naming the tag', async (t) => {
  const problems = await check(t.testdir(), {
    chipmunkInfo: { externalId: 'other_id', bagId: BAG_ID.toUpperCase(), contentType: 'video' },
  });
  t.match(problems, [
    {
      code: 'chipmunk-info-mismatch',
      tag: 'External-Identifier',
      expected: 'test_ex_id_22',
      actual: 'other_id',
      severity: 'error',
      path: 'chipmunk-info.txt',
    },
    { code: 'chipmunk-info-mismatch', tag: 'Chipmunk-Content-Type', expected: 'audio', actual: 'video' },
  ]);
  t.equal(problems.length, 2, 'Bag-ID is compared case-insensitively');
  t.equal(
    problems[0]!.message,
    'chipmunk-info.txt gives External-Identifier "other_id", but the request says "test_ex_id_22".',
  );
});

t.test('a different Bag-ID is a mismatch', async (t) => {
  const problems = await check(t.testdir(), {
    chipmunkInfo: { ...REQUEST, bagId: '00000000-0000-4000-8000-000000000000' },
  });
  t.match(problems, [
    { code: 'chipmunk-info-mismatch', tag: 'Bag-ID', actual: '00000000-0000-4000-8000-000000000000' },
  ]);
});

t.test('without chipmunk-info.txt every identity tag is a mismatch', async (t) => {
  const dir = t.testdir();
  await makeBag(dir, { files: { samplefile: 'Hello Bag!\n' } });
  const report = await validateBag(dir, { hasher: new SimpleHasher() });
  const problems = await checkChipmunk(dir, report, REQUEST, undefined);
  t.same(
    problems.map((p) => [
      p.code,
      (p as StoredProblem & { tag: string }).tag,
      (p as StoredProblem & { fileMissing: boolean }).fileMissing,
    ]),
    [
      ['chipmunk-info-mismatch', 'External-Identifier', true],
      ['chipmunk-info-mismatch', 'Bag-ID', true],
      ['chipmunk-info-mismatch', 'Chipmunk-Content-Type', true],
    ],
  );
  t.match(problems[0]!.message, /chipmunk-info\.txt is missing/);
});

t.test('a missing tag in chipmunk-info.txt is a mismatch naming it', async (t) => {
  const dir = t.testdir();
  await check(dir);
  writeFileSync(join(dir, 'chipmunk-info.txt'), `Bag-ID: ${BAG_ID}\nChipmunk-Content-Type: audio\n`);
  const report = await validateBag(dir, { hasher: new SimpleHasher() });
  const problems = await checkChipmunk(dir, report, REQUEST, undefined);
  t.match(problems, [
    { code: 'chipmunk-info-mismatch', tag: 'External-Identifier', fileMissing: false, actual: undefined },
  ]);
  t.equal(problems.length, 1);
});

t.test('Metadata-* tags: all three with the tag file present pass', async (t) => {
  const problems = await check(t.testdir(), {
    chipmunkInfo: {
      ...REQUEST,
      metadata: { url: 'http://what.ever', type: 'MARC', tagfile: 'marc.xml', content: '<record/>' },
    },
  });
  t.same(problems, []);
});

t.test('Metadata-* tags: some but not all is a problem naming the missing one', async (t) => {
  const dir = t.testdir();
  await check(dir);
  writeFileSync(
    join(dir, 'chipmunk-info.txt'),
    `External-Identifier: test_ex_id_22\nChipmunk-Content-Type: audio\nBag-ID: ${BAG_ID}\nMetadata-URL: http://x\nMetadata-Tagfile: chipmunk-info.txt\n`,
  );
  const report = await validateBag(dir, { hasher: new SimpleHasher() });
  const problems = await checkChipmunk(dir, report, REQUEST, undefined);
  t.match(problems, [
    {
      code: 'chipmunk-metadata-incomplete',
      missing: ['Metadata-Type'],
      present: ['Metadata-URL', 'Metadata-Tagfile'],
    },
  ]);
  t.match(problems[0]!.message, /not Metadata-Type/);
});

t.test('Metadata-Tagfile must name a tag file present in the bag, by a safe path', async (t) => {
  const cases: Array<[string, string | null, Record<string, unknown>]> = [
    ['marc.xml', null, { code: 'chipmunk-metadata-tagfile-missing', path: 'marc.xml', inPayload: false }],
    [
      'data/samplefile',
      null,
      { code: 'chipmunk-metadata-tagfile-missing', path: 'data/samplefile', inPayload: true },
    ],
    [
      '../../etc/passwd',
      null,
      { code: 'unsafe-path', reason: 'parent-segment', listedIn: 'chipmunk-info.txt' },
    ],
    ['/etc/passwd', null, { code: 'unsafe-path', reason: 'absolute' }],
  ];
  for (const [tagfile, content, expected] of cases) {
    const problems = await check(t.testdir(), {
      chipmunkInfo: { ...REQUEST, metadata: { url: 'http://x', type: 'EAD', tagfile, content } },
    });
    t.match(problems, [expected], tagfile);
    t.equal(problems.length, 1, tagfile);
  }
});

t.test('the test profile: Foo required, Baz limited to quux or something', async (t) => {
  const rules: ContentTypeRules = { profile: TEST_PROFILE };
  t.same(await check(t.testdir(), { bagInfo: { Foo: 'bar', Baz: 'quux' } }, rules), [], 'conforming');
  t.same(
    await check(t.testdir(), { bagInfo: { Foo: '' } }, rules),
    [],
    'an empty value counts as present; Baz is optional',
  );
  const both = await check(t.testdir(), { bagInfo: { Baz: 'nope' } }, rules);
  t.match(both, [
    {
      code: 'profile-tag-missing',
      tag: 'Foo',
      path: 'bag-info.txt',
      message: 'bag-info.txt has no Foo, which this content type requires.',
    },
    { code: 'profile-value-not-allowed', tag: 'Baz', value: 'nope', allowed: ['quux', 'something'] },
  ]);
  t.equal(both.length, 2, 'every profile entry is checked');
});

t.test('profile rules: parsing and checking', async (t) => {
  t.same(
    parseProfile({
      ordered: [
        { A: { fieldRequired: true, defaultValue: 'x' } },
        { B: { fieldRequired: false, valueList: ['Not Yet Known ', ''] } },
      ],
    }),
    [
      { tag: 'A', required: true },
      { tag: 'B', required: false, allowed: ['Not Yet Known ', ''] },
    ],
  );
  t.match(parseProfile({ ordered: [{ A: {} }] }), { error: /fieldRequired/ });
  t.match(parseProfile({}), { error: /ordered/ });
  t.match(parseProfile({ ordered: [{ A: { fieldRequired: true }, B: { fieldRequired: true } }] }), {
    error: /exactly one tag/,
  });
  const rules = [{ tag: 'B', required: false, allowed: ['Not Yet Known '] }];
  t.same(checkProfile(rules, [['B', 'Not Yet Known ']]), [], 'values match exactly, trailing space included');
  t.same(
    codes(
      checkProfile(rules, [
        ['b', 'ok'],
        ['B', 'Not Yet Known '],
      ]),
    ),
    ['profile-value-not-allowed'],
    'every occurrence of a repeated tag is checked',
  );
});

t.test('an unreadable or invalid profile is a clear configuration problem', async (t) => {
  const dir = t.testdir({ 'bad.json': '{"ordered": [{"Foo": {}}]}', 'notjson.json': '{' });
  let problems = await check(join(dir, 'b1'), {}, { profile: join(dir, 'absent.json') });
  t.match(problems, [{ code: 'profile-unreadable', detail: 'ENOENT', contentType: 'audio' }]);
  t.notOk(problems[0]!.message.includes(dir), 'no server path in the sentence');
  problems = await check(join(dir, 'b2'), {}, { profile: join(dir, 'notjson.json') });
  t.match(problems, [{ code: 'profile-unreadable', detail: 'not JSON' }]);
  problems = await check(join(dir, 'b3'), {}, { profile: join(dir, 'bad.json') });
  t.match(problems, [{ code: 'profile-invalid' }]);
});

t.test('an external validator that exits 0 passes', async (t) => {
  t.same(await check(t.testdir(), {}, { validator: ['true'] }), []);
});

t.test('a failing external validator is a problem carrying its stderr (scenario 59)', async (t) => {
  const problems = await check(t.testdir(), {}, { validator: ['sh', '-c', 'echo bad >&2; exit 3'] });
  t.match(problems, [
    { code: 'validator-failed', exitCode: 3, output: 'bad', severity: 'error', contentType: 'audio' },
  ]);
  t.match(problems[0]!.message, /rejected the bag \(it exited with status 3\):\nbad$/);
});

t.test('a validator script gets its placeholders replaced, without a shell', async (t) => {
  const dir = t.testdir({ 'validate.sh': '#!/bin/sh\nprintf "%s\\n" "$@" > "$(dirname "$0")/args.txt"\n' });
  const script = join(dir, 'validate.sh');
  chmodSync(script, 0o755);
  const sneaky = { ...REQUEST, externalId: '$(touch pwned); echo' };
  const bag = join(dir, 'bag');
  const problems = await check(
    bag,
    { chipmunkInfo: { ...sneaky } },
    { validator: [script, '{external_id}', '--bag={bag}'] },
    sneaky,
  );
  t.same(problems, []);
  t.same(readFileSync(join(dir, 'args.txt'), 'utf8').split('\n'), [
    '$(touch pwned); echo',
    `--bag=${bag}`,
    '',
  ]);
  t.notOk(
    existsSync(join(dir, 'pwned')) || existsSync('pwned'),
    'the external id was never interpreted by a shell',
  );
});

t.test('a validator that runs too long is stopped and reported', async (t) => {
  const started = Date.now();
  const problems = await check(
    t.testdir(),
    {},
    { validator: ['sh', '-c', 'sleep 30 & sleep 30'], timeoutMs: 300 },
  );
  t.match(problems, [{ code: 'validator-timeout', timeoutMs: 300 }]);
  t.ok(Date.now() - started < 8000, 'stopped promptly, child processes included');
});

t.test('a validator that cannot be found is a clear problem', async (t) => {
  const problems = await check(t.testdir(), {}, { validator: ['/nonexistent/validate-audio', '{bag}'] });
  t.match(problems, [{ code: 'validator-unavailable', detail: 'ENOENT', command: 'validate-audio' }]);
  t.notOk(problems[0]!.message.includes('/nonexistent'), 'only the program name is shown');
  t.match(await check(t.testdir(), {}, { validator: [] }), [{ code: 'validator-unavailable' }]);
});

t.test('validator output is truncated and the bag path hidden', async (t) => {
  const dir = t.testdir();
  const problems = await check(
    dir,
    {},
    {
      validator: [
        'sh',
        '-c',
        'echo "bad file in $1/data" >&2; head -c 100000 /dev/zero | tr "\\0" x >&2; exit 1',
        'sh',
        '{bag}',
      ],
    },
  );
  const output = (problems[0] as StoredProblem & { output: string }).output;
  t.ok(output.startsWith('bad file in <bag>/data'), output.slice(0, 40));
  t.notOk(output.includes(dir));
  t.ok(output.length <= VALIDATOR_OUTPUT_LIMIT + 20, `bounded (${output.length})`);
});

t.test('the validator is not run over a bag holding a symlink', async (t) => {
  const dir = t.testdir();
  await makeBag(dir, { files: { samplefile: 'x' }, chipmunkInfo: REQUEST });
  symlinkSync('/etc/passwd', join(dir, 'data', 'link'));
  const report = await validateBag(dir, { hasher: new SimpleHasher() });
  // Outside the test directory, which a second t.testdir() call would wipe; never created if all is well.
  const marker = `${dir}-validator-ran`;
  const problems = await checkChipmunk(dir, report, REQUEST, { validator: ['touch', marker] });
  t.same(problems, []);
  t.notOk(existsSync(marker));
});

t.test('an abort stops a running validator', async (t) => {
  const controller = new AbortController();
  const started = Date.now();
  setTimeout(() => controller.abort(new Error('shutdown')), 200);
  await t.rejects(runValidator(['sleep', '30'], t.testdir(), 'x', 'audio', 60_000, controller.signal), {
    message: 'shutdown',
  });
  t.ok(Date.now() - started < 5000);
});
