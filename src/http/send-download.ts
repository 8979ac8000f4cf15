/**
 * Sends a `DownloadAnswer` through fastify. Bodies are taken away from fastify
 * (`reply.hijack()`): status and headers go out first, then `writeBody` writes the exact length
 * from reused buffers; onResponse hooks and request logging still run, onSend hooks do not see
 * the body. Here, too, the download's failures are logged.
 */
import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { writeBody, type DownloadAnswer } from '../download/index.js';

export async function sendDownload(
  request: FastifyRequest,
  reply: FastifyReply,
  answer: DownloadAnswer,
): Promise<FastifyReply> {
  // A stored file may be kept by the caller's browser, never by a shared cache (errors stay no-store).
  if (answer.kind !== 'error') reply.header('cache-control', 'private');
  switch (answer.kind) {
    case 'error':
      if (answer.status === 500)
        request.log.error({ ...answer.context, err: answer.cause }, 'stored file cannot be served');
      reply.code(answer.status).headers(answer.headers);
      return reply.type('application/json; charset=utf-8').send({ error: answer.message });
    case 'headers':
      reply.code(answer.status).headers(answer.headers);
      // fastify keeps our Content-Length for HEAD only when the payload is a stream.
      return reply.send(request.method === 'HEAD' ? Readable.from([]) : undefined);
    case 'offload':
      reply.code(200).headers(answer.headers).removeHeader('content-length');
      return reply.send();
    case 'body': {
      const res = hijackWithHead(reply, answer.status, answer.headers);
      const result = await writeBody(res, answer.source, answer.length);
      if (result.outcome === 'client-gone')
        request.log.info(
          { ...answer.context, sent: result.sent, length: answer.length },
          'download stopped: the client went away',
        );
      if (result.outcome === 'failed')
        request.log.error(
          { ...answer.context, err: result.err, sent: result.sent, length: answer.length },
          'download aborted',
        );
      return reply;
    }
  }
}

/** The raw response, its head written: `status`, the headers hooks set on the reply, then `headers`. The caller writes the body. */
function hijackWithHead(reply: FastifyReply, status: number, headers: OutgoingHttpHeaders): ServerResponse {
  reply.hijack();
  const res = reply.raw;
  const set = reply.getHeaders();
  for (const name in set) {
    const value = set[name];
    if (value !== undefined) res.setHeader(name, value);
  }
  res.writeHead(status, headers);
  return res;
}
