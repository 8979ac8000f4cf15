/**
 * Taking a response away from fastify (`reply.hijack()`) for a body it should not serialise or
 * copy, and writing its head: the headers hooks already set on the reply go out too, with the
 * caller's on top. onResponse hooks and the request log still run; onSend hooks do not. Used by
 * the downloads (send-download.ts) and the show (send-parts.ts).
 */
import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { FastifyReply } from 'fastify';

/** The raw response, its head written: `status`, the reply's headers, then `headers`. The caller writes the body. */
export function hijackWithHead(reply: FastifyReply, status: number, headers: OutgoingHttpHeaders): ServerResponse {
  reply.hijack();
  const res = reply.raw;
  const set = reply.getHeaders();
  for (const name in set) {
    const value = set[name];
    if (value !== undefined) res.setHeader(name, value);
  }
  // With no header set before, node sends `headers` as they are (writeHead's fast path); else it sets them on top.
  res.writeHead(status, headers);
  return res;
}
