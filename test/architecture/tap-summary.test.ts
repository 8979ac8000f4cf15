/**
 * `npm test`'s reporter (scripts/tap-summary.mjs): the TAP stream passes through unchanged, each
 * failed assertion is repeated at the end with the subtests it sits in and its diagnostics (not
 * the failed subtests that only sum them up), and the last line is the per-file count CI reads.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import t from 'tap';
import { repoRoot } from '../helpers/daemon.js';

const report = (tap: string) =>
  spawnSync(process.execPath, [join(repoRoot, 'scripts/tap-summary.mjs')], { input: tap, encoding: 'utf8' });

/** tap 21's shape: a file is a subtest at depth 0, each level four spaces deeper. */
const FAILING = `TAP version 14
# Subtest: dist/test/a.test.js
    # Subtest: outer
        # Subtest: inner
            not ok 1 - one is two
              ---
              compare: ===
              at:
                fileName: test/a.test.ts
                lineNumber: 3
              source: |
                t.equal(1, 2, 'one is two');
              diff: |
                -2
                +1
              ...
            ok 2 - should be ok
            1..2
        not ok 1 - inner # time=3ms
        # Subtest: passing
            ok 1 - fine
            1..1
        ok 2 - passing # time=1ms
        not ok 3 - plain failure after the subtests
          ---
          at:
            lineNumber: 9
          ...
        1..3
    not ok 1 - outer # time=5ms
    1..1
not ok 1 - dist/test/a.test.js # time=40ms
  ---
  exitCode: 1
  ...
# Subtest: dist/test/b.test.js
    ok 1 - all good
    1..1
ok 2 - dist/test/b.test.js # time=20ms
# Subtest: dist/test/c.test.js
    1..0 # SKIP no Ceph
ok 3 - dist/test/c.test.js # SKIP no Ceph
1..3
`;

t.test('failures are repeated at the end, innermost only, with their diagnostics', async (t) => {
  const out = report(FAILING);
  t.equal(out.status, 0);
  t.ok(out.stdout.startsWith(FAILING), 'the stream passes through unchanged');
  const tail = out.stdout.slice(FAILING.length).split('\n');
  t.same(tail, [
    '',
    '# 2 failed assertion(s):',
    '# dist/test/a.test.js > outer > inner > not ok 1 - one is two',
    '#     compare: ===',
    '#     at:',
    '#       fileName: test/a.test.ts',
    '#       lineNumber: 3',
    '#     diff: |',
    '#       -2',
    '#       +1',
    '# dist/test/a.test.js > outer > not ok 3 - plain failure after the subtests',
    '#     at:',
    '#       lineNumber: 9',
    '1 passed, 1 failed, 1 skipped',
    '',
  ]);
});

t.test('a green run ends with the count alone', async (t) => {
  const green = 'TAP version 14\n# Subtest: x\n    ok 1 - y\n    1..1\nok 1 - x\n1..1\n';
  const out = report(green);
  t.equal(out.stdout, `${green}1 passed, 0 failed\n`);
});
