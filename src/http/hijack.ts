/**
 * Taking a response away from fastify (`reply.hijack()`) for a body it should not serialise or
 * copy: the headers hooks already set on the reply go out too, with the caller's on top.
 * onResponse hooks and the request log still run; onSend hooks do not. Used by the downloads
 * (send-download.ts) and the show (send-parts.ts).
 */
import type { ServerResponse } from 'node:http';
import type { FastifyReply } from 'fastify';

/** The raw response, its headers set (the reply's, then `headers`); the caller writes the head. */
export function hijackWithHeaders(reply: FastifyReply, headers: Record<string, string | number>): ServerResponse {
  reply.hijack();
  const res = reply.raw;
  for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) res.setHeader(name, value);
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
  return res;
}
