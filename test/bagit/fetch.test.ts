import t from 'tap';
import { parseFetch } from '../../src/bagit/fetch.js';

t.test('fetch lines: url, length or "-", and a path that may hold spaces', async (t) => {
  const f = parseFetch('http://h/a 5 data/test 1.txt\r\nhttps://h/b - data/b\n', { decodePercent: true });
  t.same(f.problems, []);
  t.same(f.entries, [
    { url: 'http://h/a', length: 5, path: 'data/test 1.txt', line: 1 },
    { url: 'https://h/b', path: 'data/b', line: 2 },
  ]);
});

t.test('fetch paths are checked like manifest paths', async (t) => {
  const f = parseFetch(
    'https://h - ../../../README.md\nhttps://h - /tmp/x\nhttps://h - ~root/foo\nhttps://h - \\\\?\\UNC\\s\\x\nhttps://h - bagit.txt\n',
    { decodePercent: true },
  );
  t.same(f.entries, []);
  t.match(f.problems, [
    { code: 'unsafe-path', listedIn: 'fetch.txt', reason: 'parent-segment', line: 1 },
    { code: 'unsafe-path', reason: 'absolute', line: 2 },
    { code: 'unsafe-path', reason: 'home-directory', line: 3 },
    { code: 'unsafe-path', reason: 'unc', line: 4 },
    { code: 'payload-entry-outside-data', path: 'bagit.txt', listedIn: 'fetch.txt', line: 5 },
  ]);
});

t.test('malformed fetch lines', async (t) => {
  const f = parseFetch('only-two fields\nnot-a-url 5 data/a\nhttp://h/x five data/b\n', {
    decodePercent: true,
  });
  t.same(f.entries, []);
  t.match(f.problems, [
    { code: 'fetch-line-malformed', line: 1, fault: 'fields' },
    { code: 'fetch-line-malformed', line: 2, fault: 'url' },
    { code: 'fetch-line-malformed', line: 3, fault: 'length' },
  ]);
});
