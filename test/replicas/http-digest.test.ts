/**
 * The bare HTTP/1.1 GET that hashes read-backs (src/replicas/http-digest.ts) against a real HTTP
 * server on loopback, for the answers Ceph does not give on demand: a body hashed as it arrives
 * (one byte at a time, too), an error answer's S3 code, a chunked answer handed back as
 * unsupported, a connection cut short, a server that stalls, and no server at all. Against the
 * real gateway, over `http:` and `https:`, it runs in targets.test.ts.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { BufferPool } from '../../src/replicas/bare-http.js';
import { BareGetFailed, bareGetDigest } from '../../src/replicas/http-digest.js';
import { freePort } from '../helpers/daemon.js';

const body = randomBytes(3 * 1024 * 1024 + 17);
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

const routes: Record<string, (req: IncomingMessage, res: ServerResponse) => void> = {
  '/whole': (_req, res) => {
    res.writeHead(200, { 'content-length': body.length });
    res.end(body);
  },
  '/trickle': (_req, res) => {
    res.writeHead(200, { 'content-length': 5 });
    res.flushHeaders();
    let i = 0;
    const next = () =>
      i < 5 ? res.write(Buffer.from('abcde').subarray(i, ++i), () => setTimeout(next, 5)) : res.end();
    next();
  },
  '/empty': (_req, res) => {
    res.writeHead(200, { 'content-length': 0 });
    res.end();
  },
  '/refused': (_req, res) => {
    const xml =
      '<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message></Message></Error>';
    res.writeHead(403, { 'content-length': Buffer.byteLength(xml), 'content-type': 'application/xml' });
    res.end(xml);
  },
  '/chunked': (_req, res) => {
    res.writeHead(200, { 'transfer-encoding': 'chunked' });
    res.end('some bytes');
  },
  '/cut': (_req, res) => {
    res.writeHead(200, { 'content-length': body.length });
    res.write(body.subarray(0, 1000), () => res.socket?.destroy());
  },
  '/stall': (_req, res) => {
    res.writeHead(200, { 'content-length': 10 });
    res.write('12345');
  },
};

t.test('a bare GET against a real HTTP server', async (t) => {
  const seen: Array<string | undefined> = [];
  const server = createServer((req, res) => {
    seen.push(`${req.method} ${req.url} host=${req.headers.host} connection=${req.headers.connection}`);
    routes[req.url!.split('?')[0]!]!(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  const { port } = server.address() as AddressInfo;
  const opts = {
    host: '127.0.0.1',
    port,
    hostHeader: `127.0.0.1:${port}`,
    connectTimeoutMs: 2000,
    idleTimeoutMs: 2000,
    buffers: new BufferPool(256 * 1024, 8),
  };

  t.same(await bareGetDigest('/whole?X-Amz-Signature=abc', opts), {
    kind: 'body',
    size: body.length,
    sha256: sha(body),
  });
  t.same(
    seen,
    [`GET /whole?X-Amz-Signature=abc host=127.0.0.1:${port} connection=close`],
    'the path and query as given, the Host signed for, one connection',
  );
  t.same(
    await bareGetDigest('/trickle', opts),
    { kind: 'body', size: 5, sha256: sha(Buffer.from('abcde')) },
    'a body in pieces',
  );
  t.same(await bareGetDigest('/empty', opts), { kind: 'body', size: 0, sha256: sha(Buffer.alloc(0)) });
  t.same(await bareGetDigest('/refused', opts), { kind: 'status', status: 403, code: 'AccessDenied' });
  t.same(await bareGetDigest('/chunked', opts), { kind: 'unsupported', reason: 'a chunked answer' });
  await t.rejects(
    bareGetDigest('/cut', opts),
    new BareGetFailed(`the connection closed after 1000 of ${body.length} bytes`),
  );
  await t.rejects(
    bareGetDigest('/stall', { ...opts, idleTimeoutMs: 300 }),
    new BareGetFailed('no answer for 0.3 s'),
  );

  // At a rate limit: no faster than asked.
  const started = performance.now();
  t.same(await bareGetDigest('/whole', { ...opts, bytesPerSec: 4 * 1024 * 1024 }), {
    kind: 'body',
    size: body.length,
    sha256: sha(body),
  });
  t.ok(performance.now() - started >= 700, 'a 3 MiB body at 4 MiB/s takes at least 0.7 s');

  // An abort ends the GET with the signal's reason.
  const stop = new AbortController();
  const aborted = bareGetDigest('/stall', { ...opts, signal: stop.signal });
  setTimeout(() => stop.abort(new Error('stop')), 100);
  await t.rejects(aborted, { message: 'stop' });

  // Nobody listening.
  const gone = await freePort();
  await t.rejects(bareGetDigest('/whole', { ...opts, port: gone }), {
    name: 'BareGetFailed',
    message: /^ECONNREFUSED: /,
  });
});
