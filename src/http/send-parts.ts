/**
 * Sends a 200 whose body is a few buffers written one after the other (a show: a small head,
 * the kept payload list, a small tail), corked into one write, instead of one buffer assembled
 * for it. A fresh 43 kB body per answer cost more CPU than the copy itself (docs/decisions.md, "A
 * show's CPU"). As for downloads the reply is hijacked (hijack.ts): onResponse hooks and the
 * request log still run, onSend hooks do not (none of this path's sets anything); headers set
 * on the reply before (by hooks) go out too. A HEAD gets the same headers and no body, as fastify does.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { hijackWithHead } from './hijack.js';

export function sendParts(request: FastifyRequest, reply: FastifyReply, contentType: string, parts: readonly Buffer[]): FastifyReply {
  let length = 0;
  for (const part of parts) length += part.length;
  const res = hijackWithHead(reply, 200, { 'content-type': contentType, 'content-length': length });
  if (request.method === 'HEAD') {
    res.end();
    return reply;
  }
  res.cork();
  for (let i = 0; i < parts.length - 1; i++) res.write(parts[i]!);
  res.end(parts[parts.length - 1]);
  return reply;
}
