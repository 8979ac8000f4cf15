/**
 * The bare HTTP/1.1 PUT that writes objects to S3 (src/replicas/http-put.ts) against a real HTTP
 * server on loopback, for what Ceph does not do on demand: the whole file arrives with the signed
 * headers, a file that no longer matches the catalog never arrives whole, an error answer's S3
 * code (also one given before the body was read), a server that stalls, and no server at all.
 * Against the real gateway, over `http:` and `https:`, it runs in targets.test.ts and replication.test.ts.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { BufferPool } from '../../src/replicas/bare-http.js';
import {
  barePut,
  BarePutFailed,
  fileReader,
  ObjectCheck,
  type BarePutOptions,
} from '../../src/replicas/http-put.js';
import { SourceChanged, type ExpectedFile } from '../../src/replicas/target.js';
import { freePort } from '../helpers/daemon.js';

const body = randomBytes(3 * 1024 * 1024 + 17);
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** The whole file as one object. */
const barePutFile = (path: string, file: FileHandle, expected: ExpectedFile, opts: BarePutOptions) =>
  barePut(
    path,
    { read: fileReader(file), start: 0, end: expected.size, check: new ObjectCheck(expected) },
    opts,
  );

interface Received {
  url: string;
  headers: IncomingMessage['headers'];
  bytes: number;
  sha256: string;
  complete: boolean;
}

t.test('a bare PUT against a real HTTP server', async (t) => {
  const received: Received[] = [];
  const refuse = (res: ServerResponse) => {
    const xml = '<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code></Error>';
    res.writeHead(403, { 'content-length': Buffer.byteLength(xml) });
    res.end(xml);
  };
  const server = createServer((req, res) => {
    const path = req.url!.split('?')[0]!;
    if (path === '/stall') return;
    const hash = createHash('sha256');
    let bytes = 0;
    req.on('data', (chunk: Buffer) => {
      hash.update(chunk);
      bytes += chunk.length;
    });
    req.on('aborted', () =>
      received.push({ url: req.url!, headers: req.headers, bytes, sha256: '', complete: false }),
    );
    req.on('end', () => {
      received.push({
        url: req.url!,
        headers: req.headers,
        bytes,
        sha256: hash.digest('hex'),
        complete: true,
      });
      if (path === '/refused') return refuse(res);
      res.writeHead(200, { etag: '"abc"', 'content-length': 0 });
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const dir = mkdtempSync(join(tmpdir(), 'preservd-http-put-'));
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const path = join(dir, 'file');
  writeFileSync(path, body);
  const file = await open(path);
  t.teardown(() => file.close());
  const { port } = server.address() as AddressInfo;
  const opts = {
    host: '127.0.0.1',
    port,
    hostHeader: `127.0.0.1:${port}`,
    headers: [['x-amz-meta-sha256', sha(body)]] as const,
    connectTimeoutMs: 2000,
    idleTimeoutMs: 2000,
    buffers: new BufferPool(512 * 1024, 8),
  };
  const expected = { size: body.length, sha256: sha(body) };

  t.same(await barePutFile('/bag/file?X-Amz-Signature=abc', file, expected, opts), {
    status: 200,
    code: '',
    etag: '"abc"',
  });
  const [whole] = received.splice(0);
  t.match(
    whole,
    { url: '/bag/file?X-Amz-Signature=abc', bytes: body.length, sha256: sha(body), complete: true },
    'the whole file, at the path and query given',
  );
  t.match(
    whole!.headers,
    {
      host: `127.0.0.1:${port}`,
      'content-length': String(body.length),
      'x-amz-meta-sha256': sha(body),
      connection: 'close',
    },
    'with the signed headers',
  );

  const empty = join(dir, 'empty');
  writeFileSync(empty, '');
  const emptyFile = await open(empty);
  t.teardown(() => emptyFile.close());
  t.same(
    await barePutFile('/bag/empty', emptyFile, { size: 0, sha256: sha(Buffer.alloc(0)) }, opts),
    { status: 200, code: '', etag: '"abc"' },
    'an empty file',
  );
  t.match(received.splice(0), [{ bytes: 0, complete: true }]);

  t.same(
    await barePutFile('/refused', file, expected, opts),
    { status: 403, code: 'AccessDenied', etag: undefined },
    'an error answer after the body',
  );
  received.splice(0);
  // A gateway that answers before it has read the body (and goes on reading, so nothing is reset).
  const early = createNetServer((socket) => {
    socket.once('data', () =>
      socket.write(
        'HTTP/1.1 403 Forbidden\r\nContent-Length: 40\r\n\r\n<Error><Code>AccessDenied</Code></Error>',
      ),
    );
    socket.resume();
  });
  await new Promise<void>((resolve) => early.listen(0, '127.0.0.1', resolve));
  t.teardown(() => early.close());
  const earlyPort = (early.address() as AddressInfo).port;
  t.same(
    await barePutFile('/early', file, expected, { ...opts, port: earlyPort }),
    { status: 403, code: 'AccessDenied', etag: undefined },
    'an error answer before the body was read',
  );

  // Not the catalog's bytes (changed, longer, shorter): a SourceChanged, and the server never gets the whole body.
  await t.rejects(
    barePutFile('/bag/changed', file, { ...expected, sha256: sha(Buffer.from('other')) }, opts),
    SourceChanged,
  );
  await t.rejects(barePutFile('/bag/shorter', file, { ...expected, size: body.length - 1 }, opts), {
    name: 'SourceChanged',
    size: body.length,
  });
  await t.rejects(barePutFile('/bag/longer', file, { ...expected, size: body.length + 1 }, opts), {
    name: 'SourceChanged',
    size: body.length,
  });
  await new Promise((resolve) => setTimeout(resolve, 100));
  t.ok(
    received.every((r) => !r.complete),
    'none of them arrived whole',
  );

  await t.rejects(
    barePutFile('/stall', file, expected, { ...opts, idleTimeoutMs: 300 }),
    new BarePutFailed('no progress for 0.3 s'),
  );

  // An abort ends the PUT with the signal's reason.
  const stop = new AbortController();
  const aborted = barePutFile('/stall', file, expected, { ...opts, signal: stop.signal });
  setTimeout(() => stop.abort(new Error('stop')), 100);
  await t.rejects(aborted, { message: 'stop' });

  // Nobody listening.
  const gone = await freePort();
  await t.rejects(barePutFile('/bag/file', file, expected, { ...opts, port: gone }), {
    name: 'BarePutFailed',
    message: /^ECONNREFUSED: /,
  });
});
