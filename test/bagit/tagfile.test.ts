import t from 'tap';
import {
  decodeTagBytes,
  parseBagDeclaration,
  parseTagText,
  splitLines,
  tagValue,
} from '../../src/bagit/tagfile.js';

const bytes = (s: string): Buffer => Buffer.from(s, 'utf8');

t.test('a well-formed bagit.txt gives version and encoding and no problem', async (t) => {
  for (const text of [
    'BagIt-Version: 1.0\nTag-File-Character-Encoding: UTF-8\n',
    'BagIt-Version: 0.97\r\nTag-File-Character-Encoding: UTF-8',
    'BagIt-Version: 1.0 \nTag-File-Character-Encoding: UTF-8\n\n',
  ]) {
    const d = parseBagDeclaration(bytes(text));
    t.same(d.problems, [], JSON.stringify(text));
    t.match(d, { version: /^(1\.0|0\.97)$/, encoding: 'UTF-8' });
  }
});

t.test('bagit.txt is read strictly, and every fault is reported', async (t) => {
  const faults = (text: string | Buffer): unknown[] =>
    parseBagDeclaration(typeof text === 'string' ? bytes(text) : text).problems;
  t.match(faults('BagIt-Version : 1.0\nTag-File-Character-Encoding : UTF-8\n'), [
    { code: 'bagit-txt-malformed', line: 1, fault: 'space-before-colon' },
    { code: 'bagit-txt-malformed', line: 2, fault: 'space-before-colon' },
  ]);
  t.match(faults('\ufeffBagIt-Version: 0.97\nTag-File-Character-Encoding: UTF-8\n'), [
    { code: 'bagit-txt-bom' },
  ]);
  t.match(faults('BagIt-Version: 0.97\n'), [{ code: 'bagit-txt-malformed', fault: 'missing-encoding' }]);
  t.match(faults('Tag-File-Character-Encoding: UTF-8\n'), [
    { code: 'bagit-txt-malformed', fault: 'missing-version' },
  ]);
  t.match(faults('Tag-File-Character-Encoding: UTF-8\nBagIt-Version: 1.0\n'), [
    { code: 'bagit-txt-malformed', fault: 'wrong-order' },
  ]);
  t.match(faults('BagIt-Version:1.0\nTag-File-Character-Encoding: UTF-8\n'), [
    { fault: 'no-space-after-colon', line: 1 },
  ]);
  t.match(faults('BagIt-Version:  1.0\nTag-File-Character-Encoding: UTF-8\n'), [
    { fault: 'no-space-after-colon', line: 1 },
  ]);
  t.match(faults('BagIt-Version: 1.0\nTag-File-Character-Encoding: UTF-8\nContact: me\n'), [
    { fault: 'unexpected-line', line: 3 },
  ]);
  t.match(faults('BagIt-Version 1.0\nTag-File-Character-Encoding: UTF-8\n'), [
    { fault: 'no-colon', line: 1 },
  ]);
  t.match(faults('BagIt-Version: .97\nTag-File-Character-Encoding: UTF-8\n'), [
    { code: 'bagit-version-invalid', version: '.97' },
  ]);
  t.match(faults('BagIt-Version: 2.0\nTag-File-Character-Encoding: UTF-8\n'), [
    { code: 'bagit-version-unsupported', version: '2.0' },
  ]);
  t.match(faults('BagIt-Version: 1.0\nTag-File-Character-Encoding: KLINGON-8\n'), [
    { code: 'tag-encoding-unsupported', encoding: 'KLINGON-8' },
  ]);
  t.match(faults(Buffer.from([0xff, 0xfe, 0x42, 0x00])), [{ code: 'bagit-txt-bom' }], 'a UTF-16 bagit.txt');
  t.match(faults(Buffer.from('BagIt-Version: 1.0\nX: \xff\n', 'latin1')), [{ code: 'tag-file-undecodable' }]);
});

t.test('two faults in one bagit.txt are both reported', async (t) => {
  const d = parseBagDeclaration(bytes('\ufeffBagIt-Version : 1.0\n'));
  t.same(
    d.problems.map((p) => p.code),
    ['bagit-txt-bom', 'bagit-txt-malformed', 'bagit-txt-malformed'],
  );
  t.equal(d.version, '1.0', 'the version is still read, so the rest of the bag gets its rules');
});

t.test('tag files decode in the declared encoding', async (t) => {
  t.same(decodeTagBytes(Buffer.from('Name: Nu\u00f1ez\n', 'latin1'), 'ISO-8859-1'), {
    ok: true,
    text: 'Name: Nu\u00f1ez\n',
  });
  // 0x80 is a control character in ISO-8859-1, the euro sign in windows-1252: read it byte for byte.
  t.same(decodeTagBytes(Buffer.from([0x80]), 'iso-8859-1'), { ok: true, text: '\u0080' });
  const le = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('A: b\n', 'utf16le')]);
  t.same(decodeTagBytes(le, 'UTF-16'), { ok: true, text: 'A: b\n' });
  const be = Buffer.from([0xfe, 0xff, 0x00, 0x41, 0x00, 0x0a]);
  t.same(decodeTagBytes(be, 'UTF-16'), { ok: true, text: 'A\n' });
  t.same(decodeTagBytes(Buffer.from([0xc3, 0x28]), 'UTF-8'), { ok: false, fault: 'undecodable' });
  t.same(decodeTagBytes(Buffer.from('x'), 'no-such-encoding'), { ok: false, fault: 'unsupported' });
  t.same(
    decodeTagBytes(Buffer.from('\ufeffA: b'), 'utf-8'),
    { ok: true, text: 'A: b' },
    'a UTF-8 BOM is dropped',
  );
});

t.test(
  'bag-info entries: order kept, labels as written, continuation lines, lenient separators',
  async (t) => {
    const text = [
      'Source-Organization: Spengler University',
      'External-Description: Uncompressed greyscale TIFF images from the',
      '         Yoshimuri papers collection.',
      'Test-Tag : 3',
      'Test-Tag    :   5',
      'contact-name: Chris',
      '',
      'Empty:',
      'no colon here',
      '\tindented continuation of Empty',
    ].join('\r\n');
    const { entries, malformedLines } = parseTagText(text);
    t.same(
      entries.map((e) => [e.label, e.value]),
      [
        ['Source-Organization', 'Spengler University'],
        ['External-Description', 'Uncompressed greyscale TIFF images from the Yoshimuri papers collection.'],
        ['Test-Tag', '3'],
        ['Test-Tag', '5'],
        ['contact-name', 'Chris'],
        ['Empty', 'indented continuation of Empty'],
      ],
    );
    t.same(malformedLines, [9]);
    t.equal(tagValue(entries, 'Contact-Name'), 'Chris', 'labels are looked up case-insensitively');
    t.same(
      parseTagText('  starts indented\n').malformedLines,
      [1],
      'a continuation with nothing to continue',
    );
  },
);

t.test('line breaks may be LF, CRLF or CR', async (t) => {
  t.same(splitLines('a\nb\r\nc\rd'), ['a', 'b', 'c', 'd']);
  t.same(splitLines('a\n'), ['a']);
  t.same(splitLines(''), []);
});
