/**
 * One stored file over real HTTP (fastify on loopback, fetch/node:http as the client): bytes and
 * headers, Range edge cases, conditional requests, HEAD, a file that no longer matches the
 * catalog or is a FIFO, a file cut short while streaming, and proxy offload.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readlinkSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import { contentDisposition, contentTypeFor, parseRange, READ_CHUNK } from '../../src/download/index.js';
import {
  defaultPayload,
  fileUrl,
  makeStoredBag,
  rawGet,
  run,
  serveBag,
  sha256,
} from './fixtures/stored-bag.js';
import { fileRecordOf } from '../helpers/stored-package.js';

const b64 = (hex: string) => Buffer.from(hex, 'hex').toString('base64');

t.test('parseRange', async (t) => {
  t.same(parseRange(undefined, 10), { kind: 'none' });
  t.same(parseRange('bytes=0-0', 10), { kind: 'range', start: 0, end: 0 });
  t.same(parseRange('bytes=9-9', 10), { kind: 'range', start: 9, end: 9 });
  t.same(parseRange('bytes=5-', 10), { kind: 'range', start: 5, end: 9 });
  t.same(parseRange('bytes=-3', 10), { kind: 'range', start: 7, end: 9 });
  t.same(
    parseRange('bytes=-30', 10),
    { kind: 'range', start: 0, end: 9 },
    'a suffix longer than the file is the whole file',
  );
  t.same(parseRange('bytes=2-100', 10), { kind: 'range', start: 2, end: 9 }, 'the end is clamped');
  t.same(parseRange('bytes=10-', 10), { kind: 'unsatisfiable' });
  t.same(parseRange('bytes=10-20', 10), { kind: 'unsatisfiable' });
  t.same(parseRange('bytes=-0', 10), { kind: 'unsatisfiable' });
  t.same(parseRange('bytes=0-', 0), { kind: 'unsatisfiable' }, 'nothing in an empty file can be satisfied');
  for (const malformed of [
    'bytes=5-2',
    'bytes=-',
    'bytes=a-b',
    'items=0-1',
    'bytes 0-1',
    'bytes=0-1,3-4',
    'bytes=1-2-3',
  ]) {
    t.same(parseRange(malformed, 10), { kind: 'none' }, malformed);
  }
});

t.test('content type and disposition', async (t) => {
  t.equal(contentTypeFor('data/a.WAV'), 'audio/wav');
  t.equal(contentTypeFor('data/x/scan.tiff'), 'image/tiff');
  t.equal(contentTypeFor('data/notes'), 'application/octet-stream');
  t.equal(contentTypeFor('data/.hidden'), 'application/octet-stream');
  t.equal(contentTypeFor('data/a.weird'), 'application/octet-stream');
  t.equal(contentDisposition('a.txt'), 'attachment; filename="a.txt"');
  t.equal(contentDisposition('say "hi"\\.json'), 'attachment; filename="say \\"hi\\"\\\\.json"');
  t.equal(
    contentDisposition("café (1)'*.txt"),
    `attachment; filename="caf_ (1)'*.txt"; filename*=UTF-8''caf%C3%A9%20%281%29%27%2A.txt`,
  );
});

t.test('file downloads', async (t) => {
  const bag = await makeStoredBag(t);
  const { base } = await serveBag(t, bag);
  const payload = defaultPayload();

  t.test('every payload file: bytes, digests and headers', async (t) => {
    for (const [path, bytes] of Object.entries(payload)) {
      const record = bag.files.find((f) => f.path === `data/${path}`)!;
      const res = await fetch(fileUrl(base, path));
      const body = Buffer.from(await res.arrayBuffer());
      t.equal(res.status, 200, path);
      t.equal(sha256(body), sha256(bytes), `${path}: bytes`);
      t.equal(body.length, bytes.length);
      t.equal(res.headers.get('content-length'), String(bytes.length));
      t.equal(res.headers.get('etag'), `"${record.digests.sha256}"`);
      t.equal(res.headers.get('repr-digest'), `sha-256=:${b64(sha256(bytes))}:`);
      t.equal(res.headers.get('content-digest'), `sha-256=:${b64(sha256(bytes))}:`);
      t.equal(res.headers.get('accept-ranges'), 'bytes');
      t.ok(res.headers.get('last-modified'));
      t.equal(res.headers.get('x-content-type-options'), 'nosniff');
    }
    const wav = await fetch(fileUrl(base, 'audio/take1.wav'));
    await wav.arrayBuffer();
    t.equal(wav.headers.get('content-type'), 'audio/wav');
    t.equal(wav.headers.get('content-disposition'), 'attachment; filename="take1.wav"');
    const tif = await fetch(fileUrl(base, 'images/scan.tif'));
    await tif.arrayBuffer();
    t.equal(tif.headers.get('content-type'), 'image/tiff');
    const quoted = await fetch(fileUrl(base, 'say "hi".json'));
    await quoted.arrayBuffer();
    t.equal(quoted.headers.get('content-disposition'), 'attachment; filename="say \\"hi\\".json"');
    t.equal(quoted.headers.get('content-type'), 'application/json');
    const unicode = await rawGet(fileUrl(base, 'nested/café – ünïcode 日本.txt'));
    t.equal(
      unicode.headers['content-disposition'],
      `attachment; filename="caf_ _ _n_code __.txt"; filename*=UTF-8''${encodeURIComponent('café – ünïcode 日本.txt')}`,
    );
  });

  t.test('ranges', async (t) => {
    const wav = payload['audio/take1.wav']!;
    const size = wav.length;
    const url = fileUrl(base, 'audio/take1.wav');
    const cases: Array<[string, number, number]> = [
      ['bytes=0-0', 0, 0],
      [`bytes=${size - 1}-${size - 1}`, size - 1, size - 1],
      ['bytes=-500', size - 500, size - 1],
      [`bytes=${size - 1_500_000}-`, size - 1_500_000, size - 1],
      ['bytes=1048570-2097160', 1_048_570, 2_097_160],
      [`bytes=100-${size + 1000}`, 100, size - 1],
    ];
    for (const [range, start, end] of cases) {
      const res = await fetch(url, { headers: { range } });
      const body = Buffer.from(await res.arrayBuffer());
      t.equal(res.status, 206, range);
      t.equal(res.headers.get('content-range'), `bytes ${start}-${end}/${size}`, range);
      t.equal(res.headers.get('content-length'), String(end - start + 1), range);
      t.ok(body.equals(wav.subarray(start, end + 1)), `${range}: bytes`);
      t.equal(
        res.headers.get('repr-digest'),
        `sha-256=:${b64(sha256(wav))}:`,
        `${range}: Repr-Digest describes the whole file`,
      );
      t.equal(res.headers.get('content-digest'), null, `${range}: no Content-Digest on a part`);
      t.equal(res.headers.get('etag'), `"${sha256(wav)}"`);
    }
    for (const range of [`bytes=${size}-`, `bytes=${size + 10}-${size + 20}`, 'bytes=-0']) {
      const res = await fetch(url, { headers: { range } });
      t.equal(res.status, 416, range);
      t.equal(res.headers.get('content-range'), `bytes */${size}`);
      t.match(await res.json(), { error: /range not satisfiable/ });
    }
    for (const range of ['bytes=5-2', 'bytes=x-y', 'lines=1-2', 'bytes=0-1,5-6', 'bytes=0-0, -1']) {
      const res = await fetch(url, { headers: { range } });
      const body = Buffer.from(await res.arrayBuffer());
      t.equal(res.status, 200, `${range}: ignored, whole body`);
      t.equal(body.length, size);
      t.equal(res.headers.get('content-range'), null);
    }
    const empty = await fetch(fileUrl(base, 'empty.bin'), { headers: { range: 'bytes=0-' } });
    t.equal(empty.status, 416, 'no range of an empty file is satisfiable');
    t.equal(empty.headers.get('content-range'), 'bytes */0');
    await empty.arrayBuffer();
    const emptyWhole = await fetch(fileUrl(base, 'empty.bin'));
    t.equal(emptyWhole.status, 200);
    t.equal((await emptyWhole.arrayBuffer()).byteLength, 0);
    t.equal(emptyWhole.headers.get('content-length'), '0');
  });

  t.test('If-Range', async (t) => {
    const url = fileUrl(base, 'audio/take1.wav');
    const etag = `"${sha256(payload['audio/take1.wav']!)}"`;
    const same = await fetch(url, { headers: { range: 'bytes=0-9', 'if-range': etag } });
    t.equal(same.status, 206, 'matching ETag: the range');
    t.equal((await same.arrayBuffer()).byteLength, 10);
    const other = await fetch(url, { headers: { range: 'bytes=0-9', 'if-range': '"0000"' } });
    t.equal(other.status, 200, 'another ETag: the whole file');
    t.equal((await other.arrayBuffer()).byteLength, payload['audio/take1.wav']!.length);
    const weak = await fetch(url, { headers: { range: 'bytes=0-9', 'if-range': `W/${etag}` } });
    t.equal(weak.status, 200, 'a weak ETag never validates If-Range');
    await weak.arrayBuffer();
    const lastModified = same.headers.get('last-modified')!;
    const byDate = await fetch(url, { headers: { range: 'bytes=0-9', 'if-range': lastModified } });
    t.equal(byDate.status, 206, 'the exact Last-Modified: the range');
    await byDate.arrayBuffer();
  });

  t.test('conditional requests', async (t) => {
    const url = fileUrl(base, 'a.txt');
    const etag = `"${sha256(payload['a.txt']!)}"`;
    for (const inm of [etag, `W/${etag}`, `"nope", ${etag}`, '*']) {
      const res = await fetch(url, { headers: { 'if-none-match': inm } });
      t.equal(res.status, 304, inm);
      t.equal(res.headers.get('etag'), etag);
      t.equal((await res.arrayBuffer()).byteLength, 0);
    }
    const miss = await fetch(url, { headers: { 'if-none-match': '"nope"' } });
    t.equal(miss.status, 200);
    t.equal(await miss.text(), 'hello world\n');
    const lastModified = miss.headers.get('last-modified')!;
    const ims = await fetch(url, { headers: { 'if-modified-since': lastModified } });
    t.equal(ims.status, 304, 'If-Modified-Since at Last-Modified');
    await ims.arrayBuffer();
    const old = await fetch(url, { headers: { 'if-modified-since': 'Mon, 01 Jan 1990 00:00:00 GMT' } });
    t.equal(old.status, 200);
    await old.arrayBuffer();
    const both = await fetch(url, {
      headers: { 'if-none-match': '"nope"', 'if-modified-since': lastModified },
    });
    t.equal(both.status, 200, 'If-None-Match wins over If-Modified-Since');
    await both.arrayBuffer();
    const rangeToo = await fetch(url, { headers: { 'if-none-match': etag, range: 'bytes=0-1' } });
    t.equal(rangeToo.status, 304, '304 before Range');
    await rangeToo.arrayBuffer();
  });

  t.test('HEAD', async (t) => {
    const size = payload['audio/take1.wav']!.length;
    const res = await fetch(fileUrl(base, 'audio/take1.wav'), { method: 'HEAD' });
    t.equal(res.status, 200);
    t.equal(res.headers.get('content-length'), String(size));
    t.equal(res.headers.get('etag'), `"${sha256(payload['audio/take1.wav']!)}"`);
    t.equal(res.headers.get('content-type'), 'audio/wav');
    t.ok(res.headers.get('repr-digest'));
    t.equal((await res.arrayBuffer()).byteLength, 0);
    const ranged = await fetch(fileUrl(base, 'audio/take1.wav'), {
      method: 'HEAD',
      headers: { range: 'bytes=0-9' },
    });
    t.equal(ranged.status, 200, 'Range is for GET only');
    t.equal(ranged.headers.get('content-length'), String(size));
    const cached = await fetch(fileUrl(base, 'a.txt'), {
      method: 'HEAD',
      headers: { 'if-none-match': `"${sha256(payload['a.txt']!)}"` },
    });
    t.equal(cached.status, 304);
  });

  t.test('no descriptor is left open', async (t) => {
    const open = readdirSync('/proc/self/fd').filter((fd) => {
      try {
        return readlinkSync(join('/proc/self/fd', fd)).startsWith(bag.dir);
      } catch {
        return false;
      }
    });
    t.same(open, []);
  });
});

t.test('a stored file that no longer matches the catalog', async (t) => {
  const bag = await makeStoredBag(t);
  const { base } = await serveBag(t, bag);
  truncateSync(join(bag.dir, 'data/audio/take1.wav'), 1000);
  const res = await fetch(fileUrl(base, 'audio/take1.wav'));
  t.equal(res.status, 500);
  const body = (await res.json()) as { error: string };
  t.match(body.error, /stored file data\/audio\/take1\.wav does not match the catalog/);
  t.notMatch(body.error, bag.dataDir, 'no server path in the answer');

  rmSync(join(bag.dir, 'data/a.txt'));
  const gone = await fetch(fileUrl(base, 'a.txt'));
  t.equal(gone.status, 500);
  const goneBody = (await gone.json()) as { error: string };
  t.match(goneBody.error, /stored file data\/a\.txt cannot be read/);
  t.notMatch(goneBody.error, bag.dataDir);
});

t.test('a FIFO in a stored file’s place is refused at once, not waited on', async (t) => {
  const bag = await makeStoredBag(t);
  const { base } = await serveBag(t, bag);
  rmSync(join(bag.dir, 'data/audio/take1.wav'));
  await run('mkfifo', [join(bag.dir, 'data/audio/take1.wav')]);
  const res = await fetch(fileUrl(base, 'audio/take1.wav'), { signal: AbortSignal.timeout(10_000) });
  t.equal(res.status, 500);
  t.match(((await res.json()) as { error: string }).error, /is not a regular file/);
});

t.test('a file cut short while streaming destroys the connection', async (t) => {
  const big = Buffer.alloc(48 << 20);
  for (let i = 0; i < big.length; i += 4096) big[i] = i & 0xff;
  const bag = await makeStoredBag(t, {
    payload: { 'a.txt': Buffer.from('a\n') },
    extra: async (dir) => {
      writeFileSync(join(dir, 'data/big.bin'), big);
      return [await fileRecordOf(dir, 'data/big.bin')];
    },
  });
  const { base } = await serveBag(t, bag);
  const res = await rawGet(fileUrl(base, 'big.bin'), {
    // Paused after the first bytes: the server has read only a few MiB ahead when the file shrinks.
    onPause: async () => truncateSync(join(bag.dir, 'data/big.bin'), 24 << 20),
  });
  t.equal(res.status, 200);
  t.equal(res.headers['content-length'], String(48 << 20));
  t.equal(res.complete, false, 'the response did not end cleanly');
  t.ok(res.body.length < 48 << 20, `short body (${res.body.length} bytes) is seen as cut`);
  t.ok(res.body.equals(big.subarray(0, res.body.length)), 'what arrived is the file’s prefix');
});

t.test('offload to a front proxy', async (t) => {
  const bag = await makeStoredBag(t);
  const payload = defaultPayload();
  const wavSha = sha256(payload['audio/take1.wav']!);

  t.test('X-Sendfile', async (t) => {
    const { base } = await serveBag(t, bag, { offload: { header: 'X-Sendfile' } });
    const res = await rawGet(fileUrl(base, 'audio/take1.wav'));
    t.equal(res.status, 200);
    // Percent-encoded per segment: the object's folder name `urn%3auuid%3a…` too.
    t.equal(res.headers['x-sendfile'], join(bag.dir.replaceAll('%', '%25'), 'data/audio/take1.wav'));
    t.equal(res.body.length, 0, 'empty body');
    t.equal(res.headers['content-length'], '0');
    t.equal(res.headers.etag, `"${wavSha}"`);
    t.equal(res.headers['content-type'], 'audio/wav');
    t.equal(res.headers['content-disposition'], 'attachment; filename="take1.wav"');
    t.equal(res.headers['repr-digest'], `sha-256=:${b64(wavSha)}:`);
    const cached = await fetch(fileUrl(base, 'audio/take1.wav'), {
      headers: { 'if-none-match': `"${wavSha}"` },
    });
    t.equal(cached.status, 304, 'validators are still ours');
    t.equal(cached.headers.get('x-sendfile'), null);
  });

  t.test(
    'X-Sendfile with a newline and a % in a file name: percent-encoded, never a malformed answer',
    async (t) => {
      const odd = 'nl\nname 100%.txt';
      const oddBag = await makeStoredBag(t, {
        extra: async (dir) => {
          writeFileSync(join(dir, 'data', odd), 'odd name\n');
          return [await fileRecordOf(dir, `data/${odd}`)];
        },
      });
      const { base } = await serveBag(t, oddBag, { offload: { header: 'X-Sendfile' } });
      const res = await rawGet(fileUrl(base, odd));
      t.equal(res.status, 200, 'not the 500 a raw newline in the header gave');
      t.equal(
        res.headers['x-sendfile'],
        join(oddBag.dir.replaceAll('%', '%25'), 'data', encodeURIComponent(odd)),
      );
      t.equal(
        decodeURIComponent(res.headers['x-sendfile'] as string),
        join(oddBag.dir, 'data', odd),
        'decodes to the file’s path',
      );
      t.equal(res.body.length, 0);
    },
  );

  t.test('X-Accel-Redirect', async (t) => {
    const { base } = await serveBag(t, bag, {
      offload: { header: 'X-Accel-Redirect', prefix: '/_storage/' },
    });
    const res = await rawGet(fileUrl(base, 'nested/café – ünïcode 日本.txt'));
    t.equal(res.status, 200);
    t.equal(
      res.headers['x-accel-redirect'],
      // The object's folder name holds `%` (urn%3auuid%3a…): escaped like any other character.
      `/_storage/${bag.storagePath.replaceAll('%', '%25')}/v1/content/data/nested/${encodeURIComponent('café – ünïcode 日本.txt')}`,
    );
    t.equal(res.body.length, 0);
    t.equal(res.headers['content-type'], 'text/plain');
  });
});

t.test('sha256 of what arrives equals the catalog for a big read', async (t) => {
  // Several full 1 MiB chunks plus a tail, through the stream path end to end.
  const bag = await makeStoredBag(t);
  const { base } = await serveBag(t, bag);
  const res = await rawGet(fileUrl(base, 'audio/take1.wav'));
  t.equal(res.complete, true);
  t.equal(
    createHash('sha256').update(res.body).digest('hex'),
    bag.files.find((f) => f.path === 'data/audio/take1.wav')!.digests.sha256,
  );
});

t.test('read buffers are kept from one response to the next, never while a socket holds them', async (t) => {
  const bag = await makeStoredBag(t);
  const { base } = await serveBag(t, bag);
  const url = fileUrl(base, 'audio/take1.wav');
  const expected = bag.files.find((f) => f.path === 'data/audio/take1.wav')!.digests.sha256;
  t.equal((await rawGet(url)).complete, true, 'a first download leaves its buffers behind');

  // A fresh 1 MiB buffer per read or per response made the collector cost a sixth of a download's CPU.
  const allocate = Buffer.allocUnsafeSlow.bind(Buffer);
  let fresh = 0;
  Buffer.allocUnsafeSlow = (size: number) => {
    if (size === READ_CHUNK) fresh++;
    return allocate(size);
  };
  t.teardown(() => {
    Buffer.allocUnsafeSlow = allocate;
  });
  for (let i = 0; i < 8; i++) {
    const res = await rawGet(url);
    t.equal(sha256(res.body), expected, `download ${i + 1} is the file`);
  }
  t.ok(fresh <= 3, `8 downloads of 4 chunks took ${fresh} new read buffers, at most one response's worth`);

  // Several at once, each paused partway so that its buffers wait on a full socket meanwhile.
  const many = await Promise.all(
    Array.from({ length: 5 }, (_, i) =>
      rawGet(url, { pauseAfter: (i + 1) * 300_000, onPause: () => sleep(20 * (i + 1)) }),
    ),
  );
  for (const [i, res] of many.entries()) {
    t.equal(res.complete, true, `concurrent download ${i + 1} complete`);
    t.equal(sha256(res.body), expected, `concurrent download ${i + 1} is the file`);
  }
});
