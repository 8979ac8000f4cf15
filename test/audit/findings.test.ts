/** Each audit finding's sentence: what is wrong, where, and expected against found. */
import t from 'tap';
import { describeFinding, type Finding } from '../../src/audit/findings.js';

t.test('every finding code has its sentence, on the primary copy and on a replica', async (t) => {
  const sentences: Array<[Finding, string]> = [
    [{ code: 'package-missing' }, 'the package folder is missing'],
    [
      { code: 'package-missing', kind: 'symlink' },
      'the package folder is missing: a symbolic link stands in its place',
    ],
    [{ code: 'package-unreadable', reason: 'EACCES' }, 'the package folder could not be read (EACCES)'],
    [{ code: 'package-not-in-catalog' }, 'the package is no longer recorded as stored in the catalog'],
    [{ code: 'file-missing', path: 'data/x' }, 'data/x: missing'],
    [
      { code: 'file-changed', path: 'data/x', algorithm: 'sha512', expected: 'aa', actual: 'bb' },
      'data/x: sha512 changed: expected aa, found bb',
    ],
    [
      { code: 'file-changed', path: 'data/x', algorithm: 'md5', expected: 'aa', actual: '' },
      'data/x: md5 changed: expected aa, found ?',
    ],
    [
      { code: 'size-changed', path: 'data/x', expected: '1', actual: '2' },
      'data/x: size changed: expected 1 bytes, found 2',
    ],
    [{ code: 'file-unreadable', path: 'data/x', reason: 'EIO' }, 'data/x: could not be read (EIO)'],
    [
      { code: 'file-not-regular', path: 'data/x', kind: 'socket' },
      'data/x: is now a socket, not a regular file',
    ],
    [{ code: 'file-extra', path: 'data/y/', kind: 'directory' }, 'data/y/: extra folder not in the catalog'],
    [
      { code: 'digest-not-recorded', path: 'data/x' },
      'data/x: no digest recorded in the catalog; only its size was checked',
    ],
    [
      { code: 'replica-unreachable', copy: 'mirror', reason: 'connection refused' },
      'replica mirror: could not be read (connection refused)',
    ],
    [{ code: 'file-missing', copy: 'ceph', path: 'data/x' }, 'replica ceph: data/x: missing'],
  ];
  for (const [finding, sentence] of sentences) t.equal(describeFinding(finding), sentence, finding.code);
});
