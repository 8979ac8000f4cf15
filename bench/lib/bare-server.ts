/**
 * A bare server for bench/scale's show, in a process of its own: it answers GET
 * `/v1/packages/:bag_id` with the bytes the daemon's show sent, body and headers both, from
 * memory, so that the wire is the same byte for byte (`date` aside). `node` is node:http alone;
 * `fastify` is one route of the show's shape on the fastify the daemon runs (this install's), no
 * plugin, hook or logger: what the framework itself costs per answer, the yardstick of the
 * show's CPU target. Environment: BARE (`node` or `fastify`), BODY (base64), HEADERS (JSON);
 * prints its port.
 */
import Fastify from 'fastify';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

const body = Buffer.from(process.env.BODY!, 'base64');
const headers = JSON.parse(process.env.HEADERS!) as Record<string, string>;
// The daemon's (and fastify's default) keep-alive timeout, so that `keep-alive: timeout=72` matches too.
const KEEP_ALIVE_MS = 72_000;

if (process.env.BARE === 'node') {
  const server = createServer((_req, res) => {
    res.writeHead(200, { ...headers, 'content-length': body.length });
    res.end(body);
  });
  server.keepAliveTimeout = KEEP_ALIVE_MS;
  server.listen(0, '127.0.0.1', () => process.stdout.write(`${(server.address() as AddressInfo).port}\n`));
} else {
  const app = Fastify({ logger: false, keepAliveTimeout: KEEP_ALIVE_MS });
  app.get('/v1/packages/:bag_id', (_request, reply) => {
    reply.headers(headers).send(body);
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  process.stdout.write(`${(app.server.address() as AddressInfo).port}\n`);
}
