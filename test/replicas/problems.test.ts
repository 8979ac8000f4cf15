/** Each replication problem's sentence: the replica, the file and what was found. */
import t from 'tap';
import { describeReplicationProblem } from '../../src/replicas/problems.js';

t.test('every replication problem names the file, the replica and what was found', async (t) => {
  const on = { replica: 'mirror', path: 'data/a.txt' };
  const sentences = [
    [
      { ...on, code: 'primary-unreadable', detail: 'EACCES' },
      'data/a.txt: the primary copy could not be read, so it was not copied to replica mirror (EACCES)',
    ],
    [
      { ...on, code: 'primary-changed', detail: 'read 3 bytes, sha256 ab' },
      'data/a.txt: the primary copy no longer matches the catalog, so it was not copied to replica mirror (read 3 bytes, sha256 ab)',
    ],
    [
      { ...on, code: 'copy-differs', detail: '3 bytes, sha256 ab' },
      'data/a.txt on replica mirror: read back, it does not match the catalog (3 bytes, sha256 ab)',
    ],
    [
      { ...on, code: 'copy-unreadable', detail: 'EIO' },
      'data/a.txt on replica mirror: written, but could not be read back (EIO)',
    ],
    [
      { ...on, code: 'object-in-the-way', detail: '3 bytes, sha256 ab' },
      'data/a.txt on replica mirror: an object that differs from the catalog is already there; replication does not overwrite it (repair does) (3 bytes, sha256 ab)',
    ],
    [
      { ...on, code: 'write-refused', detail: 'AccessDenied' },
      'data/a.txt on replica mirror: the replica refused the write (AccessDenied)',
    ],
  ] as const;
  for (const [problem, sentence] of sentences)
    t.equal(describeReplicationProblem(problem), sentence, problem.code);
});
