/**
 * What the request log says about a request and its response: the route template (so lines can
 * be grouped without bag ids), the method, status and a URL whose secrets are blanked. Tokens
 * travel in the Authorization header, which is never logged; a client that also puts one in the
 * query string (`?token=...`) must not see it copied into the log either.
 */
import type { IncomingMessage } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';

/** Query parameters whose values are credentials. */
const SECRET_PARAMS = /^(token|access_token|api_key|apikey|key|secret|password|auth|authorization)$/i;

const REDACTED = '[Redacted]';

/** The URL with the value of every credential-like query parameter replaced. */
export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const query = url
    .slice(q + 1)
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      const rawKey = eq < 0 ? pair : pair.slice(0, eq);
      let key = rawKey;
      try {
        key = decodeURIComponent(rawKey.replaceAll('+', ' '));
      } catch {
        // a malformed escape: judge the raw key
      }
      return eq >= 0 && SECRET_PARAMS.test(key.trim()) ? `${rawKey}=${REDACTED}` : pair;
    })
    .join('&');
  return `${url.slice(0, q)}?${query}`;
}

/**
 * A client's `X-Request-Id` becomes the request's id (`reqId` in every log line) only when it
 * is a plain token that cannot pass for one of ours (`req-…`): anything else (spaces, quotes,
 * control characters, a forged line) gets our own id, and the client's value is logged beside it,
 * shortened and escaped, as `clientRequestId`.
 */
const PLAIN_REQUEST_ID = /^(?!req-)[A-Za-z0-9._:@/+=-]{1,64}$/;
const MAX_REQ_ID = 2_147_483_647;
let lastRequestId = 0;

export function requestIdOf(req: IncomingMessage): string {
  const sent = req.headers['x-request-id'];
  if (typeof sent === 'string' && PLAIN_REQUEST_ID.test(sent)) return sent;
  lastRequestId = (lastRequestId + 1) & MAX_REQ_ID;
  return `req-${lastRequestId.toString(36)}`;
}

/** The client's X-Request-Id when it was not taken as the id: printable ASCII without quotes, at most 64 characters. */
function refusedRequestId(request: FastifyRequest): string | undefined {
  const sent = request.headers['x-request-id'];
  if (sent === undefined || sent === request.id) return undefined;
  const text = [sent].flat().join(',');
  return text.slice(0, 64).replace(/[^\x20-\x7e]|["\\]/g, '?');
}

/** The route template a request matched, or `unmatched` (never the raw URL). */
function routeOf(request: FastifyRequest): string {
  return request.routeOptions?.url ?? 'unmatched';
}

/** pino serializers for fastify's `incoming request` and `request completed` lines. */
export const requestLogSerializers = {
  req(request: FastifyRequest) {
    return {
      method: request.method,
      route: routeOf(request),
      url: redactUrl(request.url),
      remoteAddress: request.ip,
      remotePort: request.socket?.remotePort,
      ...(request.headers?.['x-request-id'] === undefined
        ? {}
        : { clientRequestId: refusedRequestId(request) }),
    };
  },
  res(reply: FastifyReply) {
    return {
      statusCode: reply.statusCode,
      ...(reply.request === undefined ? {} : { method: reply.request.method, route: routeOf(reply.request) }),
    };
  },
};
