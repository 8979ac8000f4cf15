/**
 * Stopping the API on SIGTERM (src/http/close.ts): a download under way is answered in full, one
 * whose client stops reading is cut after `http.shutdownGraceSeconds`, and connections with no
 * request under way (idle after a request, or never having sent a byte) do not hold the stop.
 */
import { request as httpGet, type IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';
import t, { type Test } from 'tap';
import { TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';

const SIZE = 32 * 1024 * 1024;

/** GET `path` as the admin; resolves once the headers are in, the body left paused. */
function download(d: TestDaemon, path: string): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = httpGet(
      `${d.url}${path}`,
      { headers: { authorization: `Bearer ${d.adminToken}` } },
      (res) => {
        res.pause();
        resolve(res);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** Reads the rest of `res`: how many bytes came, and whether the response ended whole. */
function drain(res: IncomingMessage): Promise<{ bytes: number; complete: boolean }> {
  return new Promise((resolve) => {
    let bytes = 0;
    res.on('data', (chunk: Buffer) => (bytes += chunk.length));
    res.on('close', () => resolve({ bytes, complete: res.complete }));
    res.on('error', () => undefined);
    res.resume();
  });
}

async function daemonWithBigFile(t: Test, graceSeconds: number): Promise<{ d: TestDaemon; path: string }> {
  const d = await TestDaemon.start(t, { config: { http: { shutdownGraceSeconds: graceSeconds } } });
  const { request } = await ingestBag(d, d.adminToken, { 'big.bin': Buffer.alloc(SIZE, 7) });
  return { d, path: `/v1/packages/${request.bag_id}/big.bin` };
}

t.test('connections with no request under way do not hold a stop', async (t) => {
  const d = await TestDaemon.start(t); // the default grace: 10 s
  // One idle after a request (keep-alive), one that never sends a byte.
  const idle: Socket = connect(d.httpPort, '127.0.0.1');
  await new Promise((resolve) => idle.once('connect', resolve));
  idle.write(`GET /v1/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n`);
  await new Promise((resolve) => idle.once('data', resolve));
  const silent: Socket = connect(d.httpPort, '127.0.0.1');
  await new Promise((resolve) => silent.once('connect', resolve));
  for (const s of [idle, silent]) s.on('error', () => undefined).resume();
  t.teardown(() => [idle, silent].forEach((s) => s.destroy()));

  const started = Date.now();
  d.proc.kill('SIGTERM');
  t.ok(await d.exitsWithin(5_000), `stopped in ${Date.now() - started} ms, well within the 10 s grace`);
  t.equal(await d.waitForExit(), 0, 'a clean exit');
});

t.test('a download under way at SIGTERM is answered in full, then the daemon stops', async (t) => {
  const { d, path } = await daemonWithBigFile(t, 10);
  const res = await download(d, path);
  d.proc.kill('SIGTERM');
  t.notOk(await d.exitsWithin(500), 'the daemon waits for it');
  t.same(await drain(res), { bytes: SIZE, complete: true }, 'every byte came');
  t.ok(await d.exitsWithin(5_000), 'and then it stopped');
  t.equal(await d.waitForExit(), 0, 'a clean exit');
});

t.test('a download whose client stopped reading is cut after the grace period', async (t) => {
  const { d, path } = await daemonWithBigFile(t, 1);
  const res = await download(d, path);
  const started = Date.now();
  d.proc.kill('SIGTERM');
  t.ok(await d.exitsWithin(10_000), `stopped after ${Date.now() - started} ms`);
  t.ok(Date.now() - started >= 900, 'not before the grace period');
  const got = await drain(res);
  t.ok(got.bytes < SIZE && !got.complete, `the download was cut (${got.bytes} of ${SIZE} bytes)`);
});
