import t from 'tap';
import { decodeBagPath, nonPortableNameReason, unsafePathReason } from '../../src/bagit/paths.js';

t.test('paths that stay inside the bag are safe', async (t) => {
  for (const p of [
    'data/a.txt',
    'data/dir1/~test3.txt',
    'data/%7Etest1.txt',
    'data/50%off%.txt',
    'data/test 1.txt',
    'bag-info.txt',
    'data/a..b',
    'data/.hidden',
  ]) {
    t.equal(unsafePathReason(p), undefined, p);
  }
});

t.test('paths that could leave the bag, or mean something else on another system, are refused', async (t) => {
  const cases: Array<[string, string]> = [
    ['', 'empty'],
    ['/tmp/foo', 'absolute'],
    ['../../../README.md', 'parent-segment'],
    ['data/../../etc/passwd', 'parent-segment'],
    ['data/a/..', 'parent-segment'],
    ['data/./a', 'dot-segment'],
    ['data//a', 'empty-segment'],
    ['data/a/', 'empty-segment'],
    ['~/foo', 'home-directory'],
    ['~root/foo', 'home-directory'],
    ['C:\\Windows\\System32\\setx.exe', 'drive-letter'],
    ['c:foo', 'drive-letter'],
    ['%HomeDrive%\\Windows\\System32\\setx.exe', 'environment-variable'],
    ['\\\\?\\UNC\\server\\share', 'unc'],
    ['\\\\server\\share\\x', 'unc'],
    ['//server/share/x', 'unc'],
    ['data\\a.txt', 'backslash'],
    ['\\.\\./\\.\\./README.md', 'backslash'],
    ['data/a\0b', 'nul'],
  ];
  for (const [path, reason] of cases) t.equal(unsafePathReason(path), reason, JSON.stringify(path));
});

t.test('only %0A and %0D are decoded before 1.0; %25 too from 1.0, in one pass', async (t) => {
  t.equal(decodeBagPath('data/a%0Ab%0dc', false), 'data/a\nb\rc');
  t.equal(decodeBagPath('data/%7Etest1.txt', false), 'data/%7Etest1.txt');
  t.equal(decodeBagPath('data/100%25.txt', false), 'data/100%25.txt');
  t.equal(decodeBagPath('data/100%25.txt', true), 'data/100%.txt');
  t.equal(decodeBagPath('data/%250A', true), 'data/%0A', 'a decoded % does not start a new escape');
  t.equal(decodeBagPath('data/%7E', true), 'data/%7E', 'other escapes are left alone even in 1.0');
});

t.test('names that do not survive a copy to Windows or macOS', async (t) => {
  t.equal(nonPortableNameReason('README'), undefined);
  t.equal(nonPortableNameReason('Núñez'), undefined);
  t.equal(nonPortableNameReason('a:b'), 'reserved-character');
  t.equal(nonPortableNameReason('what?'), 'reserved-character');
  t.equal(nonPortableNameReason('a\\b'), 'reserved-character');
  t.equal(nonPortableNameReason('line\nbreak'), 'control-character');
  t.equal(nonPortableNameReason('trailing.'), 'trailing-dot-or-space');
  t.equal(nonPortableNameReason('trailing '), 'trailing-dot-or-space');
  t.equal(nonPortableNameReason('CON'), 'reserved-name');
  t.equal(nonPortableNameReason('lpt1.txt'), 'reserved-name');
  t.equal(nonPortableNameReason('CONSOLE'), undefined);
});
