import t from 'tap';
import { parseManifest, parseManifestFileName } from '../../src/bagit/manifest.js';

const MD5 = 'b1946ac92492d2347c6235b4d2611184';
const MD5B = '751e32179ec8acd71081654527f2e771';
const payload = (text: string, decodePercent = true) =>
  parseManifest(text, { fileName: 'manifest-md5.txt', kind: 'payload', algorithm: 'md5', decodePercent });

t.test('manifest file names give kind and algorithm', async (t) => {
  t.same(parseManifestFileName('manifest-sha256.txt'), {
    kind: 'payload',
    algorithmName: 'sha256',
    algorithm: 'sha256',
  });
  t.same(parseManifestFileName('tagmanifest-md5.txt'), {
    kind: 'tag',
    algorithmName: 'md5',
    algorithm: 'md5',
  });
  t.same(parseManifestFileName('manifest-blake3.txt'), { kind: 'payload', algorithmName: 'blake3' });
  t.equal(parseManifestFileName('bag-info.txt'), undefined);
  t.equal(parseManifestFileName('manifest-md5.txt.bak'), undefined);
});

t.test('digest and path, with spaces in the path, CRLF endings and upper-case hex', async (t) => {
  const m = payload(`${MD5.toUpperCase()}  data/test 1.txt\r\n${MD5B} data/b\r\n\r\n`);
  t.same(m.problems, []);
  t.same([...m.entries.keys()], ['data/test 1.txt', 'data/b']);
  t.match(m.entries.get('data/test 1.txt'), { digest: MD5, line: 1, digestWellFormed: true });
});

t.test("md5sum's binary marker and a leading ./ are tolerated with one warning per manifest", async (t) => {
  const m = payload(`${MD5} *data/a\n${MD5B} *data/b\n${MD5} ./data/c\n`);
  t.same([...m.entries.keys()], ['data/a', 'data/b', 'data/c']);
  t.match(m.problems, [
    { code: 'manifest-binary-marker', path: 'manifest-md5.txt', line: 1, count: 2 },
    { code: 'manifest-dot-slash', path: 'manifest-md5.txt', line: 3, count: 1 },
  ]);
});

t.test('percent escapes: %0A/%0D always, %25 only when asked (1.0)', async (t) => {
  t.same([...payload(`${MD5} data/a%0Ab%25\n`, true).entries.keys()], ['data/a\nb%']);
  t.same([...payload(`${MD5} data/a%0Ab%25\n`, false).entries.keys()], ['data/a\nb%25']);
});

t.test('duplicates: same digest and different digests are told apart', async (t) => {
  const m = payload(`${MD5} data/a\n${MD5} data/a\n${MD5B} data/a\n`);
  t.match(m.problems, [
    { code: 'manifest-duplicate', path: 'data/a', listedIn: 'manifest-md5.txt', line: 2 },
    { code: 'manifest-duplicate-conflict', path: 'data/a', line: 3, expected: MD5, actual: MD5B },
  ]);
  t.same(
    m.entries.get('data/a')?.conflictingDigests,
    [MD5B],
    'the conflicting digest is kept to be checked too',
  );
});

t.test('unsafe and out-of-scope paths are reported and never become entries', async (t) => {
  const m = payload(`${MD5} ../../etc/passwd\n${MD5} /tmp/x\n${MD5} bagit.txt\n${MD5} C:\\x\n`);
  t.equal(m.entries.size, 0);
  t.match(m.problems, [
    { code: 'unsafe-path', path: '../../etc/passwd', reason: 'parent-segment', line: 1 },
    { code: 'unsafe-path', path: '/tmp/x', reason: 'absolute', line: 2 },
    { code: 'payload-entry-outside-data', path: 'bagit.txt', line: 3 },
    { code: 'unsafe-path', reason: 'drive-letter', line: 4 },
  ]);
  const tag = parseManifest(`${MD5} data/a\n${MD5} bagit.txt\n`, {
    fileName: 'tagmanifest-md5.txt',
    kind: 'tag',
    algorithm: 'md5',
    decodePercent: true,
  });
  t.same([...tag.entries.keys()], ['bagit.txt']);
  t.match(tag.problems, [{ code: 'tag-entry-inside-data', path: 'data/a', listedIn: 'tagmanifest-md5.txt' }]);
});

t.test('malformed lines', async (t) => {
  const m = payload(`${MD5}\nnothex!  data/a\n${MD5.slice(1)} data/b\n`);
  t.match(m.problems, [
    { code: 'manifest-line-malformed', line: 1, fault: 'no-path' },
    { code: 'manifest-line-malformed', line: 2, fault: 'digest' },
    { code: 'manifest-line-malformed', line: 3, fault: 'digest' },
  ]);
  t.equal(m.entries.get('data/a')?.digestWellFormed, false, 'kept for completeness, never compared');
});
