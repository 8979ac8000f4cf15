/**
 * Stopping the API. fastify's close stops accepting, closes the idle keep-alive connections and
 * waits for the requests under way; after the grace period whatever is left is cut. Two kinds of
 * connection with no request to finish are not idle to Node when the stop begins, and each held
 * it for the whole grace period (10 s): one that has not sent a byte (Node waits for its first
 * request, up to `http.requestTimeoutMs`; a client's spare connection), closed at once; and a
 * keep-alive one whose download ends during the stop, idle only from then on, closed by looking
 * again every 100 ms.
 */
import type { FastifyInstance } from 'fastify';
import type { Socket } from 'node:net';

/** Watches `app`'s connections from now on (call before it listens); the function stops it. */
export function gracefulCloser(app: FastifyInstance, graceMs: number): () => Promise<void> {
  const open = new Set<Socket>();
  app.server.on('connection', (socket: Socket) => {
    open.add(socket);
    socket.once('close', () => open.delete(socket));
  });
  return async () => {
    const deadline = setTimeout(() => app.server.closeAllConnections(), graceMs);
    const sweep = setInterval(() => app.server.closeIdleConnections(), 100);
    deadline.unref();
    sweep.unref();
    const closed = app.close();
    for (const socket of open) if (socket.bytesRead === 0) socket.destroy();
    try {
      await closed;
    } finally {
      clearTimeout(deadline);
      clearInterval(sweep);
    }
  };
}
