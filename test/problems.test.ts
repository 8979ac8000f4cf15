/**
 * defineProblems: a module's table of codes gives `make` (severity and sentence attached),
 * `CODES` (every code with its severity) and `describe`.
 */
import t from 'tap';
import { defineProblems } from '../src/problems.js';

type Init =
  { code: 'too-big'; path: string; bytes: number } | { code: 'odd-name'; path: string } | { code: 'gone' };

const problems = defineProblems<Init>({
  'too-big': { describe: (p) => `${p.path} is ${p.bytes} bytes` },
  'odd-name': { severity: 'warning', describe: (p) => `${p.path} has an odd name` },
  gone: { describe: () => 'it is gone' },
});

t.test('CODES lists every code of the table, an error unless the table says otherwise', async (t) => {
  t.same(problems.CODES, { 'too-big': 'error', 'odd-name': 'warning', gone: 'error' });
});

t.test(
  'make keeps the typed value and attaches the table severity and the sentence of its code',
  async (t) => {
    t.same(problems.make({ code: 'too-big', path: 'data/a', bytes: 3 }), {
      code: 'too-big',
      path: 'data/a',
      bytes: 3,
      severity: 'error',
      message: 'data/a is 3 bytes',
    });
    t.same(problems.make({ code: 'odd-name', path: 'data/b' }), {
      code: 'odd-name',
      path: 'data/b',
      severity: 'warning',
      message: 'data/b has an odd name',
    });
    t.same(problems.make({ code: 'gone' }), { code: 'gone', severity: 'error', message: 'it is gone' });
  },
);

t.test('a severity the caller passes overrides the table', async (t) => {
  t.equal(problems.make({ code: 'odd-name', path: 'x' }, 'error').severity, 'error');
  t.equal(problems.make({ code: 'too-big', path: 'x', bytes: 1 }, 'warning').severity, 'warning');
});

t.test('describe is the same sentence make attaches', async (t) => {
  t.equal(problems.describe({ code: 'too-big', path: 'data/c', bytes: 9 }), 'data/c is 9 bytes');
});
