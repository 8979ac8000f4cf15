/**
 * Answering a list (API.md, Conventions): with `limit` one page of at most that many items and,
 * when more follow, `Link: <same path and filters, limit, after>; rel="next"`; without it the
 * whole collection, streamed to the socket a page at a time as the socket takes it, so neither
 * the catalog's read transactions nor the memory grow with the list. A bad `limit` or `after` is
 * a 400.
 *
 * The routes say what a page is (a catalog scan); this file only pages, serialises and streams.
 */
import { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { decodeCursor, encodeCursor, MAX_PAGE, type Page } from '../catalog/scan.js';
import { badRequest } from './errors.js';

/** Reads one page: the items after the order key `after` (0: from the start), at most `limit`. */
export type PageReader<T> = (after: number, limit: number) => Page<T>;

/** What the caller asked for: a page size (undefined: everything) and where to start. */
export interface Paging {
  limit: number | undefined;
  after: number;
}

/** Items per read while streaming a whole list: one short read transaction each. */
const STREAM_PAGE = 256;

/** The query parameters every list takes, for the route schemas (and so the OpenAPI document). */
export const pagingQuery = {
  limit: {
    type: 'string',
    pattern: '^[0-9]+$',
    description: `At most this many items (1–${MAX_PAGE}); without it the whole list is streamed.`,
  },
  after: {
    type: 'string',
    description: 'Where the page starts: the cursor of a previous page’s `Link: rel="next"` header.',
  },
} as const;

/** The filters of the package lists. */
export const packageFilters = {
  content_type: { type: 'string', description: 'Only packages of this content type.' },
  stored: {
    type: 'string',
    enum: ['true', 'false'],
    description:
      'Only stored packages (true) or open requests (false); a deaccessioned package (a tombstone) is in neither.',
  },
} as const;

/** `limit` and `after` of a request; 400 when either is not acceptable. */
export function pagingOf(query: { limit?: string | undefined; after?: string | undefined }): Paging {
  let limit: number | undefined;
  if (query.limit !== undefined) {
    limit = /^[0-9]{1,4}$/.test(query.limit) ? Number(query.limit) : NaN;
    if (!(limit >= 1 && limit <= MAX_PAGE))
      throw badRequest(`limit must be an integer from 1 to ${MAX_PAGE}`);
  }
  let after = 0;
  if (query.after !== undefined) {
    const key = decodeCursor(query.after);
    if (key === undefined)
      throw badRequest(
        'after is not a cursor this server gave out (take it from the Link header of the previous page)',
      );
    after = key;
  }
  return { limit, after };
}

/** `stored=true|false` as a boolean; undefined when absent. */
export function storedFilterOf(value: string | undefined): boolean | undefined {
  if (value === undefined) return undefined;
  if (value === 'true') return true;
  if (value === 'false') return false;
  throw badRequest('stored must be true or false');
}

/** Sends the list `read` gives, paged or streamed as `paging` says, each item through `view`. */
export function sendList<T>(
  request: FastifyRequest,
  reply: FastifyReply,
  paging: Paging,
  read: PageReader<T>,
  view: (item: T) => unknown,
): FastifyReply {
  reply.type('application/json; charset=utf-8');
  if (paging.limit !== undefined) {
    const page = read(paging.after, paging.limit);
    if (page.next !== undefined)
      reply.header('link', `<${nextPageUrl(request.url, paging.limit, page.next)}>; rel="next"`);
    return reply.send(`[${page.items.map((item) => JSON.stringify(view(item))).join(',')}]`);
  }
  return reply.send(Readable.from(streamList(paging.after, read, view), { objectMode: false }));
}

/**
 * The whole list as JSON text, a page per chunk; each page is read only when the socket has
 * taken the one before (Readable.from pulls on demand).
 */
async function* streamList<T>(
  after: number,
  read: PageReader<T>,
  view: (item: T) => unknown,
): AsyncGenerator<string> {
  let first = true;
  let from = after;
  yield '[';
  for (;;) {
    const page = read(from, STREAM_PAGE);
    if (page.items.length > 0) {
      yield (first ? '' : ',') + page.items.map((item) => JSON.stringify(view(item))).join(',');
      first = false;
    }
    if (page.next === undefined) break;
    from = page.next;
  }
  yield ']';
}

/** The same path and filters, with this page size and the cursor after `key`. */
function nextPageUrl(url: string, limit: number, key: number): string {
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  const params = new URLSearchParams(q < 0 ? '' : url.slice(q + 1));
  params.delete('limit');
  params.delete('after');
  params.set('limit', String(limit));
  params.set('after', encodeCursor(key));
  return `${path}?${params.toString()}`;
}
