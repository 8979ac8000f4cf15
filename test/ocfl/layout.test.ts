/**
 * Object folders by storage-layout extension 0003 with our configuration (sha256, three tuples of
 * three), held to the mappings the extension's own text gives for that configuration (its
 * examples and the test cases of its Python code), and to our object ids.
 */
import { createHash } from 'node:crypto';
import t from 'tap';
import { objectIdOf, objectPathOf, packageObjectPath } from '../../src/ocfl/layout.js';

t.test("the extension's own mappings", async (t) => {
  const long = 'abcdefghij'.repeat(26);
  const long101 = `${'abcdefghij'.repeat(10)}a`;
  const cases: Array<[string, string]> = [
    ['object-01', '3c0/ff4/240/object-01'],
    ['..hor/rib:le-$id', '487/326/d8c/%2e%2ehor%2frib%3ale-%24id'],
    ['..Hor/rib:lè-$id', '373/529/21a/%2e%2eHor%2frib%3al%c3%a8-%24id'],
    [
      long,
      `55b/432/806/${'abcdefghij'.repeat(10)}-55b432806f4e270da0cf23815ed338742179002153cd8d896f23b3e2d8a14359`,
    ],
    [
      long101,
      `5cc/73e/648/${'abcdefghij'.repeat(10)}-5cc73e648fbcff136510e330871180922ddacf193b68fdeff855683a01464220`,
    ],
  ];
  for (const [id, path] of cases) t.equal(objectPathOf(id), path, id);
  // Asked again, after another id, the same answer.
  for (const [id, path] of cases.reverse()) t.equal(objectPathOf(id), path, `${id}, again`);
});

t.test('characters beyond one byte, and outside the Basic Multilingual Plane', async (t) => {
  t.match(objectPathOf('ç'), /\/%c3%a7$/);
  t.match(objectPathOf('a😀b'), /\/a%f0%9f%98%80b$/);
  t.match(objectPathOf('A-Z_a-z0-9'), /\/A-Z_a-z0-9$/, 'the characters kept as they are');
});

t.test("a package's object", async (t) => {
  const bagId = '1B75F428-6C9A-45BE-B7B6-44BAF5B80687';
  const id = objectIdOf(bagId);
  t.equal(id, 'urn:uuid:1b75f428-6c9a-45be-b7b6-44baf5b80687', 'lower-case');
  const digest = createHash('sha256').update(id).digest('hex');
  t.equal(
    packageObjectPath(bagId),
    `${digest.slice(0, 3)}/${digest.slice(3, 6)}/${digest.slice(6, 9)}/urn%3auuid%3a1b75f428-6c9a-45be-b7b6-44baf5b80687`,
  );
});
