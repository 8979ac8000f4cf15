/**
 * The two replica kinds against the real thing: a bucket on a private Ceph RADOS Gateway and a
 * folder. Each writes streamed from disk, reads back, refuses to overwrite unless asked, lists,
 * and refuses to complete a copy whose source does not match what the catalog says; the start-up
 * check names a missing bucket or folder; a large file goes up in parts and a kill of the
 * gateway is ReplicaDown, not a problem of the object. The bucket is tried over `http:` and
 * `https:` (the gateway's TLS, its CA given as `caFile`), on one cluster.
 */
import {
  CreateBucketCommand,
  GetObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  ListObjectVersionsCommand,
  PutObjectCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, mkdtemp, open, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import t, { type Test } from 'tap';
import { checkTargets, ReplicaDown, targetsFor, type ReplicaTarget } from '../../src/replicas/index.js';
import { trustedCAs } from '../../src/replicas/bare-http.js';
import { PresignedWriter } from '../../src/replicas/s3-put.js';
import { s3Test, startCeph, type Ceph } from '../helpers/ceph.js';
import { s3Client } from './fixtures/replica-world.js';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

async function exercise(t: Test, target: ReplicaTarget, scratch: string): Promise<void> {
  const small = Buffer.from('hello, replica\n');
  const smallFile = join(scratch, 'small');
  await writeFile(smallFile, small);
  const key = 'ab/cd/ef/abcdef00-0000-4000-8000-000000000000/data/hello.txt';
  const expected = { size: small.length, sha256: sha(small) };

  t.equal(await target.write(key, createReadStream(smallFile), expected, { replace: false }), 'written');
  t.same(await target.readBack(key, expected, {}), { kind: 'match' });
  t.equal(
    await target.write(
      key,
      Readable.from([Buffer.from('other')]),
      { size: 5, sha256: sha(Buffer.from('other')) },
      { replace: false },
    ),
    'exists',
    'an existing object is not overwritten',
  );
  t.same(await target.readBack(key, expected, {}), { kind: 'match' }, 'still the first bytes');

  // A source that is not what the catalog says: nothing lands.
  const wrongKey = 'ab/cd/ef/abcdef00-0000-4000-8000-000000000000/data/wrong.txt';
  await t.rejects(
    target.write(wrongKey, Readable.from([Buffer.from('not this')]), expected, { replace: false }),
    { name: 'SourceChanged' },
  );
  t.same(await target.readBack(wrongKey, expected, {}), { kind: 'missing' });

  // Replacing, when asked.
  const other = Buffer.from('replaced bytes');
  t.equal(
    await target.write(
      key,
      Readable.from([other]),
      { size: other.length, sha256: sha(other) },
      { replace: true },
    ),
    'written',
  );
  t.same(await target.readBack(key, expected, {}), {
    kind: 'differs',
    size: other.length,
    sha256: sha(other),
  });

  // A large file, from an open file (S3: a multipart upload of ranges read side by side) and as a stream.
  const big = randomBytes(40 * 1024 * 1024 + 123);
  const bigFile = join(scratch, 'big');
  await writeFile(bigFile, big);
  const bigKey = 'ab/cd/ef/abcdef00-0000-4000-8000-000000000000/data/big.bin';
  const bigExpected = { size: big.length, sha256: sha(big) };
  const handle = await open(bigFile);
  t.equal(await target.write(bigKey, handle, bigExpected, { replace: false }), 'written');
  t.same(await target.readBack(bigKey, bigExpected, {}), { kind: 'match' });
  const streamedKey = 'ab/cd/ef/abcdef00-0000-4000-8000-000000000000/streamed/big.bin';
  t.equal(
    await target.write(streamedKey, createReadStream(bigFile), bigExpected, { replace: false, absent: true }),
    'written',
  );
  t.same(await target.readBack(streamedKey, bigExpected, {}), { kind: 'match' });
  // A large file that is not what the catalog says: nothing lands, from a file or a stream.
  const wrongBig = { size: big.length, sha256: sha(Buffer.from('something else')) };
  await t.rejects(target.write(`${bigKey}.wrong`, handle, wrongBig, { replace: false }), {
    name: 'SourceChanged',
  });
  await t.rejects(target.write(`${bigKey}.wrong`, createReadStream(bigFile), wrongBig, { replace: false }), {
    name: 'SourceChanged',
  });
  t.same(await target.readBack(`${bigKey}.wrong`, wrongBig, {}), { kind: 'missing' });
  await handle.close();
  const range = await target.open(bigKey, { start: 1000, end: 1999 });
  const chunks: Buffer[] = [];
  for await (const c of range!) chunks.push(c as Buffer);
  t.ok(Buffer.concat(chunks).equals(big.subarray(1000, 2000)), 'a range reads the right bytes');

  const listed: string[] = [];
  for await (const o of target.list('ab/cd/ef/abcdef00-0000-4000-8000-000000000000/'))
    listed.push(`${o.key} ${o.size}`);
  t.same(listed, [`${bigKey} ${big.length}`, `${key} ${other.length}`, `${streamedKey} ${big.length}`]);
  t.equal(await target.open('ab/cd/ef/abcdef00-0000-4000-8000-000000000000/nothing'), undefined);
}

t.test('dir replica', async (t) => {
  const scratch = await mkdtemp(join(tmpdir(), 'preservd-dir-replica-'));
  t.teardown(() => rm(scratch, { recursive: true, force: true }));
  const root = join(scratch, 'replica'); // its scratch folder, replica.preservd-tmp, is in `scratch` too
  const [missing] = await targetsFor([{ name: 'mirror', kind: 'dir', path: root }]);
  await t.rejects(checkTargets([missing!]), {
    message: `a replica cannot be used:\n  replica mirror: folder ${root} does not exist; create it (and mount the filesystem it is on) first`,
  });
  await mkdir(root);
  const [target] = await targetsFor([{ name: 'mirror', kind: 'dir', path: root }]);
  await checkTargets([target!]);
  t.same(
    (await readdir(root, { recursive: true })).sort(),
    [
      '0=ocfl_1.1',
      'extensions',
      'extensions/0003-hash-and-id-n-tuple-storage-layout',
      'extensions/0003-hash-and-id-n-tuple-storage-layout/config.json',
      'ocfl_layout.json',
    ],
    'the start-up check leaves the OCFL root files and nothing else under the root',
  );
  t.same(await readdir(`${root}.preservd-tmp`), [], 'its write check leaves nothing in the scratch folder');
  await exercise(t, target!, scratch);
  // Temporary files a killed write left behind in the scratch folder beside the root (never
  // under it) are removed; this run's own, in flight, are not.
  const temporaries = `${root}.preservd-tmp`;
  await writeFile(join(temporaries, '1-0123456789abcdef.tmp'), 'partial');
  await writeFile(join(temporaries, `${process.pid}-0123456789abcdef.tmp`), 'in flight');
  t.equal(await target!.abandonUnfinished('ab/cd/ef/abcdef00-0000-4000-8000-000000000000/'), 1);
  t.same(await readdir(temporaries), [`${process.pid}-0123456789abcdef.tmp`]);
  const folder = join(root, 'ab/cd/ef/abcdef00-0000-4000-8000-000000000000/data');
  t.same((await readdir(folder)).sort(), ['big.bin', 'hello.txt']);
  t.equal(await readFile(join(folder, 'hello.txt'), 'utf8'), 'replaced bytes');
  // A name of NAME_MAX bytes: its temporary name must fit too.
  for (const name of [`${'L'.repeat(251)}.txt`, '\u3042'.repeat(85), '\u{1F600}'.repeat(63)]) {
    const longKey = `ab/cd/ef/abcdef00-0000-4000-8000-000000000000/data/${name}`;
    const bytes = Buffer.from(name);
    t.equal(
      await target!.write(
        longKey,
        Readable.from([bytes]),
        { size: bytes.length, sha256: sha(bytes) },
        { replace: false },
      ),
      'written',
      `${Buffer.byteLength(name)} bytes`,
    );
    t.same(await target!.readBack(longKey, { size: bytes.length, sha256: sha(bytes) }, {}), {
      kind: 'match',
    });
  }
});

t.test(
  'a dir replica whose root is not an OCFL root of ours is refused, and nothing is written',
  async (t) => {
    const scratch = await mkdtemp(join(tmpdir(), 'preservd-dir-root-'));
    t.teardown(() => rm(scratch, { recursive: true, force: true }));
    const refused = async (name: string, setUp: (root: string) => Promise<void>, message: RegExp) => {
      const root = join(scratch, name);
      await mkdir(root);
      await setUp(root);
      const before = (await readdir(root, { recursive: true })).sort();
      const [target] = await targetsFor([{ name: 'mirror', kind: 'dir', path: root }]);
      await t.rejects(checkTargets([target!]), { message }, name);
      t.same((await readdir(root, { recursive: true })).sort(), before, `${name}: nothing written`);
    };
    await refused(
      'other-layout',
      async (root) => {
        await writeFile(join(root, '0=ocfl_1.1'), 'ocfl_1.1\n');
        await writeFile(
          join(root, 'ocfl_layout.json'),
          '{"extension": "0004-hashed-n-tuple-storage-layout"}\n',
        );
      },
      /^a replica cannot be used:\n {2}replica mirror: folder \S+ holds a ocfl_layout\.json that is not preservd's \(\d+ bytes, sha256 [0-9a-f]{64}\); it is not an OCFL root laid out as preservd lays out its roots/,
    );
    await refused(
      'before-ocfl',
      async (root) => {
        await mkdir(join(root, 'ab/cd/ef/abcdef00-0000-4000-8000-000000000000/data'), { recursive: true });
        await writeFile(join(root, 'ab/cd/ef/abcdef00-0000-4000-8000-000000000000/bagit.txt'), 'x');
      },
      /replica mirror: folder \S+ holds packages in the layout before OCFL \(ab, \.\.\.: ab\/cd\/ef\/<bag_id>\); stop here and run `preservd migrate`/,
    );
    await refused(
      'someone-elses',
      (root) => writeFile(join(root, 'notes.txt'), 'mine'),
      /replica mirror: folder \S+ is not empty \(notes\.txt\) and is not an OCFL storage root \(no 0=ocfl_1\.1\)/,
    );
  },
);

s3Test(t, 's3 replica on a real Ceph RADOS Gateway', async (t) => {
  const ceph = await startCeph(t);
  const s3 = s3Client(ceph);
  t.teardown(() => s3.destroy());
  await t.test('over http:', (t) => s3Replica(t, ceph, s3, 'http'));
  await t.test('over https:', (t) => s3Replica(t, ceph, s3, 'https'));

  // An https: endpoint whose CA is not trusted: refused at start-up, naming why.
  const bucket = 'replica-https';
  const [untrusted] = await targetsFor([
    {
      name: 'ceph',
      kind: 's3',
      endpoint: ceph.httpsEndpoint,
      bucket,
      region: ceph.region,
      prefix: '',
      forcePathStyle: true,
      accessKeyId: ceph.accessKeyId,
      secretAccessKey: ceph.secretAccessKey,
    },
  ]);
  await t.rejects(checkTargets([untrusted!]), {
    message:
      /^a replica cannot be used:\n {2}replica ceph: bucket replica-https at https:\/\/127\.0\.0\.1:\d+ cannot be reached: .*certificate/,
  });
  untrusted!.close();

  // A multipart upload (parts as small as S3 allows), from a file and from a stream, over both schemes.
  const scratch = await mkdtemp(join(tmpdir(), 'preservd-s3-parts-'));
  t.teardown(() => rm(scratch, { recursive: true, force: true }));
  const big = randomBytes(12 * 1024 * 1024 + 5);
  const bigFile = join(scratch, 'big');
  await writeFile(bigFile, big);
  const expected = { size: big.length, sha256: sha(big) };
  for (const [scheme, endpoint] of [
    ['http', ceph.endpoint],
    ['https', ceph.httpsEndpoint],
  ] as const) {
    const client = s3Client({ ...ceph, endpoint }, ceph.caFile);
    const writer = new PresignedWriter(client, 'ceph', trustedCAs(await readFile(ceph.caFile, 'utf8')), {
      singlePut: 5 * 1024 * 1024,
      part: 5 * 1024 * 1024,
    });
    const handle = await open(bigFile);
    await writer.put({ Bucket: `replica-${scheme}`, Key: 'parts/file' }, handle, expected, undefined);
    await writer.put(
      { Bucket: `replica-${scheme}`, Key: 'parts/stream' },
      createReadStream(bigFile),
      expected,
      undefined,
    );
    // Not the catalog's bytes: the upload is aborted, nothing lands.
    await t.rejects(
      writer.put(
        { Bucket: `replica-${scheme}`, Key: 'parts/wrong' },
        handle,
        { ...expected, sha256: sha(Buffer.from('x')) },
        undefined,
      ),
      { name: 'SourceChanged' },
    );
    await t.rejects(
      writer.put(
        { Bucket: `replica-${scheme}`, Key: 'parts/wrong' },
        createReadStream(bigFile),
        { ...expected, size: big.length - 1 },
        undefined,
      ),
      { name: 'SourceChanged', size: big.length },
    );
    await handle.close();
    for (const key of ['parts/file', 'parts/stream']) {
      const got = await s3.send(new GetObjectCommand({ Bucket: `replica-${scheme}`, Key: key }));
      t.equal(
        sha(Buffer.from(await got.Body!.transformToByteArray())),
        expected.sha256,
        `${scheme}: ${key} went up in 3 parts, whole`,
      );
      t.match(got.ETag, /-3"$/, `${scheme}: ${key} is a multipart object`);
    }
    t.same(
      (await s3.send(new ListObjectsV2Command({ Bucket: `replica-${scheme}`, Prefix: 'parts/wrong' })))
        .Contents ?? [],
      [],
      `${scheme}: the wrong ones are not there`,
    );
    t.same(
      (await s3.send(new ListMultipartUploadsCommand({ Bucket: `replica-${scheme}` }))).Uploads ?? [],
      [],
      `${scheme}: and their uploads were aborted`,
    );
    client.destroy();
  }
});

async function s3Replica(t: Test, ceph: Ceph, s3: S3Client, scheme: 'http' | 'https'): Promise<void> {
  const scratch = await mkdtemp(join(tmpdir(), 'preservd-s3-replica-'));
  t.teardown(() => rm(scratch, { recursive: true, force: true }));
  const endpoint = scheme === 'http' ? ceph.endpoint : ceph.httpsEndpoint;
  const bucket = `replica-${scheme}`;
  const config = {
    name: 'ceph',
    kind: 's3' as const,
    endpoint,
    bucket,
    region: ceph.region,
    prefix: 'pre/',
    forcePathStyle: true,
    accessKeyId: ceph.accessKeyId,
    secretAccessKey: ceph.secretAccessKey,
    ...(scheme === 'https' ? { caFile: ceph.caFile } : {}),
  };
  const [absent] = await targetsFor([config]);
  await t.rejects(checkTargets([absent!]), {
    message: `a replica cannot be used:\n  replica ceph: bucket ${bucket} does not exist at ${endpoint}; create it first`,
  });
  absent!.close();
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  const [target] = await targetsFor([config]);
  t.teardown(() => target!.close());
  await checkTargets([target!]);
  const listed = await s3.send(new ListObjectsV2Command({ Bucket: bucket }));
  t.same(
    (listed.Contents ?? []).map((o) => o.Key).sort(),
    [
      'pre/0=ocfl_1.1',
      'pre/extensions/0003-hash-and-id-n-tuple-storage-layout/config.json',
      'pre/ocfl_layout.json',
    ],
    `${scheme}: the start-up check leaves the OCFL root files under the prefix and nothing else`,
  );
  t.same(
    (await s3.send(new ListMultipartUploadsCommand({ Bucket: bucket }))).Uploads ?? [],
    [],
    `${scheme}: its write check's upload was aborted`,
  );
  await checkTargets([target!]);
  t.equal(
    (await s3.send(new ListObjectVersionsCommand({ Bucket: bucket }))).Versions?.length ?? 0,
    3,
    `${scheme}: a second start rewrites nothing`,
  );
  await exercise(t, target!, scratch);

  // Reads go over plain HTTP from presigned URLs: keys as bags name files (spaces, non-ASCII, '+',
  // '%') are signed and fetched as they are; a rate limit holds; an abort stops a read.
  const odd = 'ab/cd/ef/abcdef00-0000-4000-8000-000000000000/data/Ünïcode name + 100% (1).txt';
  const oddBytes = Buffer.from('odd name\n');
  const oddExpected = { size: oddBytes.length, sha256: sha(oddBytes) };
  t.equal(await target!.write(odd, Readable.from([oddBytes]), oddExpected, { replace: false }), 'written');
  t.same(await target!.readBack(odd, oddExpected, {}), { kind: 'match' });
  t.same(
    (await s3.send(new GetObjectCommand({ Bucket: bucket, Key: `pre/${odd}` }))).ContentLength,
    oddBytes.length,
    'the key is the one the SDK knows',
  );
  const paced = randomBytes(4 * 1024 * 1024);
  const pacedKey = 'ab/cd/ef/abcdef00-0000-4000-8000-000000000000/data/paced.bin';
  const pacedExpected = { size: paced.length, sha256: sha(paced) };
  t.equal(
    await target!.write(pacedKey, Readable.from([paced]), pacedExpected, { replace: false }),
    'written',
  );
  const started = performance.now();
  t.same(await target!.readBack(pacedKey, pacedExpected, { bytesPerSec: 4 * 1024 * 1024 }), {
    kind: 'match',
  });
  t.ok(performance.now() - started >= 950, 'read no faster than the rate limit');
  const stop = new AbortController();
  const aborted = target!.readBack(pacedKey, pacedExpected, {
    bytesPerSec: 1024 * 1024,
    signal: stop.signal,
  });
  setTimeout(() => stop.abort(new Error('stop reading')), 200);
  await t.rejects(aborted, { message: 'stop reading' });
  // A gateway that refuses the read (keys it does not know): the copy is unreadable, named so.
  const [forged] = await targetsFor([{ ...config, secretAccessKey: 'not-the-secret-key' }]);
  t.same(await forged!.readBack(pacedKey, pacedExpected, {}), {
    kind: 'unreadable',
    reason: 'SignatureDoesNotMatch, HTTP 403',
  });
  // ... and the write: a refusal about the object (a write-refused problem), not the replica down.
  await t.rejects(
    forged!.write(
      'k/forged',
      Readable.from([Buffer.from('x')]),
      { size: 1, sha256: sha(Buffer.from('x')) },
      { replace: false, absent: true },
    ),
    { name: 'ObjectRefused', message: 'SignatureDoesNotMatch, HTTP 403' },
  );
  forged!.close();

  // Retention asked of a bucket without Object Lock: refused at start-up.
  const [locked] = await targetsFor([{ ...config, retention: { mode: 'GOVERNANCE', days: 1 } }]);
  await t.rejects(checkTargets([locked!]), {
    message: `a replica cannot be used:\n  replica ceph: retention is configured but bucket ${bucket} has no Object Lock; Object Lock can only be enabled when a bucket is created (see docs/replicas.md)`,
  });
  locked!.close();

  // Keys are under the prefix, as the storage lays bags out; no upload was left unfinished.
  const versions = await s3.send(new ListObjectVersionsCommand({ Bucket: bucket, Prefix: 'pre/ab/' }));
  t.same((versions.Versions ?? []).map((v) => v.Key).sort(), [
    'pre/ab/cd/ef/abcdef00-0000-4000-8000-000000000000/data/big.bin',
    'pre/ab/cd/ef/abcdef00-0000-4000-8000-000000000000/data/hello.txt',
    'pre/ab/cd/ef/abcdef00-0000-4000-8000-000000000000/data/paced.bin',
    'pre/ab/cd/ef/abcdef00-0000-4000-8000-000000000000/data/Ünïcode name + 100% (1).txt',
    'pre/ab/cd/ef/abcdef00-0000-4000-8000-000000000000/streamed/big.bin',
  ]);
  t.same(
    (await s3.send(new ListMultipartUploadsCommand({ Bucket: bucket }))).Uploads ?? [],
    [],
    'the refused uploads were aborted',
  );

  // The gateway down: ReplicaDown, not a problem with the object; back up: works again.
  await ceph.stopGateway();
  const expected = { size: 1, sha256: sha(Buffer.from('x')) };
  await t.rejects(
    target!.write('k/x', Readable.from([Buffer.from('x')]), expected, { replace: false }),
    ReplicaDown,
  );
  await t.rejects(target!.readBack('k/x', expected, {}), ReplicaDown);
  await ceph.startGateway();
  t.equal(
    await target!.write('k/x', Readable.from([Buffer.from('x')]), expected, { replace: false }),
    'written',
  );
  await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'pre/k/y', Body: 'y' }));
  t.same(await target!.readBack('k/x', expected, {}), { kind: 'match' });
}
