/**
 * `npm install` on the Node version we promise prints no EBADENGINE: every package in the lock
 * file accepts the oldest Node of package.json's `engines` (cookie 2 wants Node 22; the
 * `overrides` entry holds cookie 1.1.1, whose parse and serialise @fastify/cookie and
 * light-my-request call the same way).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { repoRoot } from '../helpers/daemon.js';

type Version = [number, number, number];

const parse = (v: string): Version => {
  const [major = 0, minor = 0, patch = 0] = v
    .replace(/^v/, '')
    .split('.')
    .map((p) => (/^\d+$/.test(p) ? Number(p) : 0));
  return [major, minor, patch];
};
const compare = (a: Version, b: Version) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2];

/**
 * Whether `version` satisfies an npm engines range, in the forms the lock file holds: `>=X`,
 * `>X`, `^X`, `X`, `X.*`, `X.x`, a space-separated AND of these, and `||` between alternatives.
 */
function satisfies(version: Version, range: string): boolean {
  return range.split('||').some((alternative) =>
    alternative
      .trim()
      .replace(/(>=|<=|>|<|\^|~)\s+/g, '$1')
      .split(/\s+/)
      .filter((c) => c !== '' && c !== '*')
      .every((comparator) => {
        const m = /^(>=|<=|>|<|\^|~|=)?v?([\dx*.]+)$/.exec(comparator);
        if (m === null) throw new Error(`an engines range this test does not read: "${range}"`);
        const op = m[1] ?? '';
        const parts = m[2]!.split('.').filter((p) => p !== 'x' && p !== '*' && p !== '');
        const bound = parse(parts.join('.'));
        const c = compare(version, bound);
        if (op === '>=') return c >= 0;
        if (op === '>') return c > 0;
        if (op === '<=') return c <= 0;
        if (op === '<') return c < 0;
        if (op === '^' || op === '~' || op === '' || op === '=') {
          if (c < 0) return false;
          // ^X.Y.Z (X > 0) and a bare X or X.* fix the major; ~X.Y and a bare X.Y fix the minor.
          if (op === '~' || (op !== '^' && parts.length >= 2))
            return (
              version[0] === bound[0] &&
              (parts.length < 2 || version[1] === bound[1]) &&
              (parts.length < 3 || op === '~' || c === 0)
            );
          return version[0] === bound[0];
        }
        return false;
      }),
  );
}

t.test('the range reader', async (t) => {
  t.ok(satisfies([20, 19, 0], '>=20.19'));
  t.notOk(satisfies([20, 19, 0], '>=22'));
  t.ok(satisfies([20, 19, 0], '^20.17.0 || >=22.9.0'));
  t.notOk(satisfies([20, 19, 0], '^20.20.0 || >=22'));
  t.ok(satisfies([20, 19, 0], '20 || >=22'));
  t.ok(satisfies([20, 19, 0], '>= 10.x'));
  t.ok(satisfies([20, 19, 0], '6.* || 8.* || >= 10.*'));
  t.notOk(satisfies([20, 19, 0], '18 || 22'));
  t.ok(satisfies([20, 19, 0], '>=16 || 14 >=14.17'));
});

t.test('every locked package accepts the oldest Node we promise', async (t) => {
  const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as {
    engines: { node: string };
    overrides: Record<string, string>;
  };
  const oldest = parse(/^>=\s*([\d.]+)$/.exec(pkg.engines.node)?.[1] ?? '');
  t.same(oldest, [20, 19, 0], 'package.json promises Node 20.19');
  const lock = JSON.parse(readFileSync(join(repoRoot, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { version?: string; engines?: { node?: string } | string[] }>;
  };
  const refused = Object.entries(lock.packages)
    .filter(
      ([path, p]) =>
        path !== '' &&
        !Array.isArray(p.engines) &&
        typeof p.engines?.node === 'string' &&
        !satisfies(oldest, p.engines.node),
    )
    .map(([path, p]) => `${path}@${p.version}: node ${(p.engines as { node: string }).node}`);
  t.same(refused, [], 'no EBADENGINE');
  t.equal(pkg.overrides.cookie, '1.1.1', 'cookie held at the last version for Node 20');
  const cookies = Object.entries(lock.packages).filter(([path]) => /(^|\/)node_modules\/cookie$/.test(path));
  t.ok(cookies.length > 0);
  t.same([...new Set(cookies.map(([, p]) => p.version))], ['1.1.1'], 'every locked cookie is 1.1.1');
});
