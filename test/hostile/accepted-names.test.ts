/**
 * Every kind of name the validator accepts with no more than a warning, in one bag through the
 * real daemon: stored, then served as a zip that `unzip -t` and Python's zipfile read back whole,
 * passed by an audit, and copied to a dir replica that verifies. A name the validator lets
 * through must never break a later check (issue 23, finding 5); names it refuses are in
 * bags.test.ts.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import t from 'tap';
import { rsyncUpload, TestDaemon } from '../helpers/daemon.js';
import { makeBag } from '../helpers/make-bag.js';
import { filesUnder } from '../helpers/walk.js';
import { contentFolder, dirBytes, replicaFolder, replicaStates } from '../replicas/fixtures/replica-world.js';
import { newRequest, resealTagManifests } from './fixtures/attack.js';

const NFC = 'caf\u00e9';
const NFD = 'cafe\u0301';
/** Seven folders of 250 bytes: a path of ~1,770 bytes, near the catalog's 1,900. */
const DEEP = `${Array.from({ length: 7 }, (_, i) => String(i).padEnd(250, 'p')).join('/')}/end.txt`;

/** Payload names (under data/), each a kind the validator warns about or lets pass. */
const PAYLOAD = [
  // Windows device names, as a file, with extensions, and as a folder
  'CON',
  'aux.txt',
  'com1.log',
  'NUL.tar.gz',
  'lpt9',
  'PRN/inside.txt',
  // characters Windows does not allow
  'a:b.txt',
  'star*.txt',
  'what?.txt',
  'pipe|x.txt',
  '<angle>.txt',
  '"quoted".txt',
  // trailing dots and spaces, a folder with one, a leading space
  'trailing.',
  'trailing ',
  'dir./f.txt',
  ' leading space.txt',
  // control characters (a newline and a CR travel as %0A and %0D in the manifests)
  'nl\nname.txt',
  'cr\rname.txt',
  'tab\tname.txt',
  'ctl\u0001.txt',
  'del\u007f.txt',
  'esc\u001b[31m.txt',
  // percent signs, and names that look like the manifest escapes
  '100%.txt',
  'literal%0A.txt',
  'literal%25.txt',
  '50%off%.txt',
  // operating-system files
  '.DS_Store',
  'Thumbs.db',
  '._song.wav',
  '__MACOSX/x.txt',
  'Icon\r',
  // case and normalization collisions, and a name that is not NFC
  'Readme.txt',
  'README.txt',
  `${NFC}.txt`,
  `${NFD}.txt`,
  `only-nfd-${NFD}.txt`,
  `listed-nfd-${NFC}.txt`,
  // shell-looking and dot names
  '-rf',
  '--help.txt',
  '...',
  '..x',
  '.hidden',
  "$HOME `id` #1 & 'q'.txt",
  '😀 emoji.txt',
  // look-alikes of the separators that are refused
  'fullwidth\uff3cslash.txt',
  'leader\u2024\u2024.txt',
  'division\u2215slash.txt',
  // a name like a dir replica's temporary file
  '.x.preservd-0123456789abcdef.tmp',
  // the longest names: 255 bytes of ASCII, 255 bytes of three-byte UTF-8, and a deep path
  `${'L'.repeat(251)}.txt`,
  '\u3042'.repeat(85),
  DEEP,
];

/** Tag files no tag manifest lists, and one that is listed, in odd folders. */
const UNLISTED_TAG_FILES = [
  'notes:2026.txt',
  'CON.txt',
  'trail.',
  'tag\nnewline',
  'extra dir/x.txt',
  'aux/y.txt',
  `${NFD}-tag.txt`,
];

t.test('names the validator accepts go through zip, audit and a dir replica', async (t) => {
  const mirror = replicaFolder(t);
  const d = await TestDaemon.start(t, {
    config: { replicas: [{ name: 'mirror', kind: 'dir', path: mirror }] },
  });
  const alice = d.addUser('alice');
  const req = await newRequest(d, alice);
  const scratch = mkdtempSync(join(tmpdir(), 'preservd-names-'));
  t.teardown(() => rmSync(scratch, { recursive: true, force: true }));
  const dir = join(scratch, 'bag');
  const files = Object.fromEntries(PAYLOAD.map((name, i) => [name, `${i}: ${name}\n`]));
  await makeBag(dir, {
    files,
    chipmunkInfo: { externalId: req.external_id, bagId: req.bag_id, contentType: req.content_type },
    extraTagFiles: { 'meta:data/odd?name.txt': 'listed\n' },
  });
  // One name listed in another normalization than it has on disk.
  for (const manifest of ['manifest-md5.txt', 'manifest-sha256.txt']) {
    const text = await readFile(join(dir, manifest), 'utf8');
    await writeFile(
      join(dir, manifest),
      text.replace(`data/listed-nfd-${NFC}.txt`, `data/listed-nfd-${NFD}.txt`),
    );
  }
  await resealTagManifests(dir);
  for (const name of UNLISTED_TAG_FILES) {
    mkdirSync(dirname(join(dir, name)), { recursive: true });
    await writeFile(join(dir, name), `unlisted ${name}\n`);
  }
  const bagFiles = filesUnder(dir, { regularOnly: true }).sort();

  const validate = d.cli(['validate', dir]);
  t.equal(validate.code, 0, 'valid, with warnings only', { output: validate.stdout + validate.stderr });
  const warned = new Set(
    validate.stdout
      .split('\n')
      .filter((l) => l.startsWith('warning  '))
      .map((l) => l.split('  ')[1]),
  );
  t.same(
    [...warned].sort(),
    [
      'case-collision',
      'manifest-path-normalization',
      'non-portable-name',
      'normalization-collision',
      'path-ends-in-whitespace',
      'system-file',
    ],
    'every warning the names can earn',
  );

  const up = rsyncUpload(dir, req.upload_link);
  t.equal(up.code, 0, 'uploaded with rsync', { output: up.output });
  const complete = await d.request('POST', `/v1/requests/${req.bag_id}/complete`, { token: alice });
  t.equal(complete.status, 201, 'completed', { body: complete.text });
  const item = await d.waitForQueueItem(complete.json.id, alice, 120_000);
  t.equal(item.status, 'DONE', 'stored', { errors: item.errors });

  // The zip: every file under <bag_id>/, and its bytes.
  const zipPath = join(scratch, 'bag.zip');
  const zip = await fetch(`${d.url}/v1/packages/${req.bag_id}/download`, {
    headers: { authorization: `Bearer ${alice}` },
  });
  t.equal(zip.status, 200);
  await writeFile(zipPath, Buffer.from(await zip.arrayBuffer()));
  const unzip = spawnSync('unzip', ['-t', zipPath], { encoding: 'utf8' });
  t.equal(unzip.status, 0, 'unzip -t passes', { output: unzip.stdout.slice(-2000) + unzip.stderr });
  t.match(unzip.stdout, /No errors detected/);
  const script = [
    'import json, sys, zipfile',
    'z = zipfile.ZipFile(sys.argv[1])',
    'bad = z.testzip()',
    'print(json.dumps({"bad": bad, "entries": {i.filename: z.read(i).hex() for i in z.infolist()}}))',
  ].join('\n');
  const python = JSON.parse(
    execFileSync('python3', ['-c', script, zipPath], { encoding: 'utf8', maxBuffer: 64 << 20 }),
  );
  t.equal(python.bad, null, 'zipfile: every CRC matches');
  t.same(
    Object.keys(python.entries).sort(),
    bagFiles.map((p) => `${req.bag_id}/${p}`).sort(),
    'zipfile: one entry per file, by its name',
  );
  for (const path of bagFiles) {
    if (python.entries[`${req.bag_id}/${path}`] !== (await readFile(join(dir, path))).toString('hex'))
      t.fail(`zip entry ${JSON.stringify(path)}: other bytes`);
  }

  // The audit passes the package.
  const started = await d.request('POST', '/v1/audits');
  t.equal(started.status, 201, 'audit started', { body: started.text });
  let audit: any;
  const deadline = Date.now() + 120_000;
  do {
    await new Promise((r) => setTimeout(r, 100));
    audit = (await d.request('GET', `/v1/audits/${started.json.id}`)).json;
    if (Date.now() > deadline) throw new Error(`audit did not finish: ${JSON.stringify(audit)}`);
  } while (audit.finished_at === null);
  t.same(audit.failures, [], 'no audit failure');
  t.same(
    audit.successes.map((s: any) => s.bag_id),
    [req.bag_id],
  );

  // The dir replica verifies, with the same bytes at the same names.
  let states = await replicaStates(d, req.bag_id);
  for (
    const until = Date.now() + 120_000;
    states.some((s) => s.status === 'pending') && Date.now() < until;
  ) {
    await new Promise((r) => setTimeout(r, 200));
    states = await replicaStates(d, req.bag_id);
  }
  t.same(
    states.map((s) => [s.name, s.status]),
    [['mirror', 'verified']],
    'the dir replica verified',
    { states },
  );
  const prefix = contentFolder(req.bag_id);
  t.same(
    filesUnder(join(mirror, prefix), { regularOnly: true }).sort(),
    bagFiles,
    'every file on the replica, nothing else',
  );
  for (const path of bagFiles) {
    if (!(await dirBytes(mirror, `${prefix}/${path}`)).equals(await readFile(join(dir, path))))
      t.fail(`replica ${JSON.stringify(path)}: other bytes`);
  }
});
