/**
 * src/fs/paths.ts builds the paths `path.join` and `path.relative` would, for the walks' names:
 * the same strings for every shape a walk produces, and `relativeUnder` falls back to
 * `path.relative` for a path that is not under the folder.
 */
import { join, relative } from 'node:path';
import t from 'tap';
import { relativeUnder, under } from '../../src/fs/paths.js';

const folders = ['/', '/srv/preservd/data/staging/b1', '/srv/x/', '/a'];
const rels = ['bagit.txt', 'data/pages/00/page-0001.txt', '.hidden', 'data/a b/ü é.txt', 'x\\y', '...'];

t.test('under is join for a normalised folder and names read beneath it', async (t) => {
  for (const dir of folders)
    for (const rel of rels) t.equal(under(dir, rel), join(dir, rel), `${dir} + ${rel}`);
});

t.test('relativeUnder undoes under, and is path.relative elsewhere', async (t) => {
  for (const dir of folders)
    for (const rel of rels) {
      const abs = under(dir, rel);
      t.equal(relativeUnder(dir, abs), rel, abs);
      t.equal(relativeUnder(dir, abs), relative(dir, abs));
    }
  t.equal(relativeUnder('/srv/a', '/srv/b/c'), '../b/c', 'outside the folder');
  t.equal(relativeUnder('/srv/a', '/srv/ab/c'), '../ab/c', 'a sibling sharing the prefix is not under it');
});
