/**
 * rsync abuse through the real daemon (the gate's own cases are in test/ingest/rsyncd.test.ts):
 * listing the module, reaching another request's folder, links and devices sent with rsync's
 * own options, writing through an uploaded link, and uploads after complete and after DONE.
 * Nothing may land outside the capability, and storage never changes.
 */
import { spawnSync } from 'node:child_process';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { rsyncUpload, TestDaemon } from '../helpers/daemon.js';
import { assertInvariants } from '../helpers/invariants.js';
import { makeBag } from '../helpers/make-bag.js';
import {
  capabilityOf,
  landingDirOf,
  listTree,
  newRequest,
  snapshot,
  type Request,
} from './fixtures/attack.js';

const scratch = mkdtempSync(join(tmpdir(), 'preservd-hostile-rsync-'));
t.teardown(() => rmSync(scratch, { recursive: true, force: true }));

function rsync(args: string[]): { code: number; output: string } {
  const r = spawnSync('rsync', args, { encoding: 'utf8', timeout: 60_000 });
  return { code: r.status ?? -1, output: `${r.stdout}${r.stderr}` };
}

t.test('rsync abuse', async (t) => {
  const d = await TestDaemon.start(t);
  const alice = d.addUser('alice');
  const bob = d.addUser('bob');
  const base = `rsync://127.0.0.1:${d.rsyncPort}`;
  const module = `${base}/preservd`;
  let n = 0;
  const bagFor = async (
    req: Request,
    files: Record<string, string> = { 'a.txt': 'hello\n' },
  ): Promise<string> =>
    makeBag(join(scratch, `bag-${++n}`), {
      files,
      chipmunkInfo: { externalId: req.external_id, bagId: req.bag_id, contentType: req.content_type },
    });
  const complete = async (req: Request, token: string): Promise<any> => {
    const res = await d.request('POST', `/v1/requests/${req.bag_id}/complete`, { token });
    t.equal(res.status, 201, res.text);
    return d.waitForQueueItem(res.json.id, token);
  };

  const aliceReq = await newRequest(d, alice);
  const bobReq = await newRequest(d, bob);
  const source = await bagFor(aliceReq);

  await t.test('the module cannot be listed or read', async (t) => {
    const modules = rsync(['--list-only', `${base}/`]);
    t.notMatch(modules.output, /preservd/, `the module list does not show the module: ${modules.output}`);
    for (const link of [`${module}/`, aliceReq.upload_link, `${aliceReq.upload_link}data/`]) {
      const listing = rsync(['--list-only', link]);
      t.not(listing.code, 0, `listing ${link} is refused`);
      t.notMatch(
        listing.output,
        new RegExp(`${capabilityOf(aliceReq)}|${capabilityOf(bobReq)}|bagit\\.txt`),
        'and shows no capability or file',
      );
    }
    t.equal(rsyncUpload(source, aliceReq.upload_link).code, 0);
    const download = rsync(['-r', aliceReq.upload_link, join(scratch, 'stolen')]);
    t.not(download.code, 0, 'an upload link cannot be downloaded from');
    t.notOk(existsSync(join(scratch, 'stolen', 'bagit.txt')));
  });

  await t.test("one request's link cannot reach another's folder", async (t) => {
    const bobBefore = await listTree(landingDirOf(d, bobReq));
    const attempts = [
      `${aliceReq.upload_link}../${capabilityOf(bobReq)}/`,
      `${aliceReq.upload_link}data/../../${capabilityOf(bobReq)}/`,
      `${module}/./${capabilityOf(bobReq)}/../${capabilityOf(aliceReq)}/`,
      `${module}/${capabilityOf(bobReq).slice(0, 31)}/`,
      `${module}//${capabilityOf(bobReq)}x/`,
    ];
    for (const link of attempts)
      t.not(rsyncUpload(source, link).code, 0, `${link.slice(base.length)} is refused`);
    const protect = rsync([
      '-rtvzP',
      '-s',
      `${source}/`,
      `${aliceReq.upload_link}../${capabilityOf(bobReq)}/`,
    ]);
    t.not(protect.code, 0, 'also with --protect-args');
    t.same(await listTree(landingDirOf(d, bobReq)), bobBefore, "bob's folder is untouched");
    t.same(
      readdirSync(join(d.dataDir, 'landing')).sort(),
      [capabilityOf(aliceReq), capabilityOf(bobReq)].sort(),
      'nothing new in landing/',
    );
  });

  await t.test(
    'links and devices sent with -a: munged, refused at validation, nothing written outside',
    async (t) => {
      const req = await newRequest(d, alice);
      const outside = join(scratch, 'outside');
      mkdirSync(outside);
      const bag = await bagFor(req, { 'a.txt': 'hello\n' });
      symlinkSync('/etc/passwd', join(bag, 'data', 'passwd'));
      symlinkSync(outside, join(bag, 'data', 'out'));
      symlinkSync('../../../../../../../../tmp', join(bag, 'data', 'up'));
      spawnSync('mkfifo', [join(bag, 'data', 'pipe')]);
      const withDevice = spawnSync('mknod', [join(bag, 'data', 'mem'), 'c', '1', '1']).status === 0;
      const up = rsync(['-a', '-D', '-H', `${bag}/`, req.upload_link]);
      t.equal(up.code, 0, up.output);
      // A second transfer that tries to write through the uploaded link to a folder outside.
      const through = join(scratch, 'through');
      mkdirSync(join(through, 'data', 'out'), { recursive: true });
      writeFileSync(join(through, 'data', 'out', 'pwned'), 'x');
      rsync(['-r', '--keep-dirlinks', `${through}/`, req.upload_link]);
      t.same(readdirSync(outside), [], 'nothing was written through the link');
      const landed = landingDirOf(d, req);
      for (const name of ['passwd', 'up']) {
        const st = lstatSync(join(landed, 'data', name), { throwIfNoEntry: false });
        if (st !== undefined && st.isSymbolicLink()) t.ok(true, `data/${name} arrived as a (munged) link`);
      }
      if (process.getuid?.() === 0) {
        for (const name of ['passwd', 'up', 'pipe', ...(withDevice ? ['mem'] : [])])
          t.ok(
            lstatSync(join(landed, 'data', name)).isFile(),
            `data/${name} landed as a plain file (fake super)`,
          );
      }
      const before = await snapshot(d);
      const item = await complete(req, alice);
      t.equal(item.status, 'FAILED');
      const named = new Set(item.errors.map((e: any) => `${e.code} ${e.path}`));
      if (process.getuid?.() === 0) {
        // As root rsync runs with `fake super` (docs/operators.md, the rsync side): links, FIFOs and
        // devices land as plain files holding their description, which no manifest lists.
        for (const name of ['passwd', 'up', 'pipe', ...(withDevice ? ['mem'] : [])]) {
          t.ok(
            named.has(`file-not-in-manifest data/${name}`),
            `data/${name} is refused: ${JSON.stringify([...named])}`,
          );
        }
      } else {
        t.ok(named.has('symlink data/passwd'), JSON.stringify([...named]));
        t.ok(named.has('symlink data/up'));
        t.ok(named.has('special-file data/pipe'));
        if (withDevice && existsSync(join(landed, 'data', 'mem')))
          t.ok(named.has('special-file data/mem'), 'a device node rsync created is refused, never opened');
      }
      t.same(await snapshot(d), before, 'nothing stored');

      // The upload opened again under a new link (the old one retired): the fixed bag (--delete removes the links) is stored.
      const reopened = (await d.request('GET', `/v1/requests/${req.bag_id}`, { token: alice })).json
        .upload_link;
      t.not(reopened, req.upload_link, 'a new link');
      const fixed = rsync([
        '-rtvzP',
        '--delete',
        '--no-group',
        '--no-perms',
        `${await bagFor(req)}/`,
        reopened,
      ]);
      t.equal(fixed.code, 0, fixed.output);
      t.equal((await complete(req, alice)).status, 'DONE', 'a FAILED upload can be fixed and completed');
    },
  );

  await t.test('uploads after complete and after DONE are refused; storage is unchanged', async (t) => {
    const item = await complete(aliceReq, alice);
    t.equal(item.status, 'DONE');
    const stored = await snapshot(d);
    const changed = await bagFor(aliceReq, { 'a.txt': 'changed\n', 'b.txt': 'new\n' });
    const again = rsyncUpload(changed, aliceReq.upload_link);
    t.not(again.code, 0, 'the link of a stored bag is closed');
    t.match(again.output, /unknown upload link|upload is (finished|complete)/);
    t.notOk(existsSync(landingDirOf(d, aliceReq)), 'and no landing folder came back');
    mkdirSync(join(scratch, 'empty-dir'));
    const deleting = rsync(['-r', '--delete', `${join(scratch, 'empty-dir')}/`, aliceReq.upload_link]);
    t.not(deleting.code, 0, '--delete through a closed link does nothing');
    t.same(await snapshot(d), stored, 'storage and catalog unchanged');
    const res = await d.request('POST', `/v1/requests/${aliceReq.bag_id}/complete`, { token: alice });
    t.equal(res.status, 303, 'complete again points at the DONE item');

    // While an ingest is PENDING the link is closed too.
    const pending = await newRequest(d, bob);
    t.equal(rsyncUpload(await bagFor(pending), pending.upload_link).code, 0);
    const started = await d.request('POST', `/v1/requests/${pending.bag_id}/complete`, { token: bob });
    const during = rsyncUpload(changed, pending.upload_link);
    t.not(during.code, 0, 'no upload after complete');
    const done = await d.waitForQueueItem(started.json.id, bob);
    t.equal(done.status, 'DONE');
    const files = await d.request('GET', `/v1/packages/${pending.bag_id}`, { token: bob });
    t.same(files.json.files, ['a.txt'], 'the stored bag is the one completed');
  });

  await d.stop();
  await assertInvariants(t, d.dataDir);
});
