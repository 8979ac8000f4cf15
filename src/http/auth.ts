/**
 * Who is calling. Accepts `Authorization: Bearer <token>` and the forms chipmunk-client and its
 * server understood: `Token token=<t>`, `Token token="<t>"`, `Bearer token=<t>`. Tokens are
 * looked up by digest (catalog/users.ts). No token ever reaches a log.
 *
 * The web pages' session cookie (opened by logging in with a token, catalog/sessions.ts) stands
 * for a token on the pages, and on `/v1` for GET and HEAD only: a cookie alone never changes
 * anything through the API (the pages' own forms carry a CSRF token besides).
 */
import type {} from '@fastify/cookie'; // its request.cookies
import { parseCookie } from 'cookie';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { LRUCache } from 'lru-cache';
import { Access } from '../auth/access.js';
import type { Catalog } from '../catalog/catalog.js';
import { tokenDigest } from '../catalog/users.js';
import type { User } from '../catalog/types.js';
import type { Config } from '../config/config.js';
import { forbidden, HttpError } from './errors.js';
import type { FailureCounter } from './failed-auth.js';

declare module 'fastify' {
  interface FastifyRequest {
    user?: User;
    /** The caller's rights (auth/access.ts), set with `user`. */
    access?: Access;
  }
  interface FastifyContextConfig {
    /** Route answers without credentials. */
    public?: boolean;
    /** An HTML page: authenticated by the session cookie (303 to /login without one), errors as pages. */
    page?: boolean;
  }
}

export const WWW_AUTHENTICATE = 'Bearer realm="preservd"';
/** The pages' session cookie. */
export const SESSION_COOKIE = 'preservd_session';

/** The token in an Authorization header value, or undefined if there is none. */
function tokenFromHeader(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const value = header.trim();
  const scheme = /^(Bearer|Token)(?::|\s+|$)/i.exec(value);
  if (scheme === null) return undefined;
  const rest = value.slice(scheme[0].length).trim();
  if (rest === '') return undefined;
  // `Bearer <token>`: a bare token68 (no "token=" parameter).
  if (!/[=]/.test(rest.replace(/=+$/, '')) && !/[\s,;]/.test(rest)) return rest;
  for (const piece of rest.split(/\s*[:,;\t]\s*/)) {
    const eq = piece.indexOf('=');
    if (eq < 0) continue;
    const key = piece.slice(0, eq).trim().toLowerCase();
    const val = piece
      .slice(eq + 1)
      .replaceAll('"', '')
      .trim();
    if (key === 'token' && val !== '') return val;
  }
  return undefined;
}

export class Unauthorized extends HttpError {
  constructor(
    message: string,
    /** A credential was sent and is wrong (counted by failed-auth.ts), not merely missing. */
    readonly wrongCredential = false,
  ) {
    super(401, message);
  }
}

/** At most this many bearer tokens' callers are kept (least recently seen go first). */
const KNOWN_CALLERS = 10_000;

/** A caller authenticated by a bearer token, and the catalog's auth generation it was read at. */
interface KnownCaller {
  generation: number;
  user: User;
  access: Access;
}

/**
 * onRequest hook of the API's scope (`/v1` and /metrics): sets request.user and request.access
 * for every non-public route, or answers 401. The pages have their own (authenticatePage).
 *
 * A bearer token's caller (user and grants, resolved into an `Access`) is kept by the token's
 * digest while the catalog's auth generation stays the same: any write to a user, token or grant,
 * by this process or another (`preservd token revoke`), changes it, so the next request reads
 * the catalog again and a revoked token is refused at once. A request then costs the token's
 * digest and one read of the generation instead of reading the token, the user and the grants
 * (docs/decisions.md, "Authenticated callers are kept"). Only successes are kept: an unknown
 * token costs its reads every time, and fills nothing; each one counts against its address's limit
 * of failures (failed-auth.ts).
 */
export function authenticate(catalog: Catalog, config: Config, countFailure: FailureCounter) {
  const known = new LRUCache<string, KnownCaller>({ max: KNOWN_CALLERS });
  const byToken = (token: string): KnownCaller | undefined => {
    const digest = tokenDigest(token);
    // Read before the token, user and grants: what they say is at least as new as this.
    const generation = catalog.authGeneration();
    const kept = known.get(digest);
    if (kept !== undefined && kept.generation === generation) return kept;
    const user = catalog.users.authenticateDigest(digest);
    if (user === undefined) {
      known.delete(digest);
      return undefined;
    }
    const caller = { generation, user, access: accessOf(catalog, config, user) };
    known.set(digest, caller);
    return caller;
  };
  /** Sets the caller, or throws 401. */
  const identify = (request: FastifyRequest): void => {
    const route = request.routeOptions;
    if (route.config?.public === true || route.url === undefined) return;
    const token = tokenFromHeader(request.headers.authorization);
    if (token === undefined) {
      const reading =
        (request.method === 'GET' || request.method === 'HEAD') && request.url.startsWith('/v1/');
      const user = reading ? userOfSession(catalog, sessionCookie(request)) : undefined;
      if (user === undefined)
        throw new Unauthorized('authentication required: send "Authorization: Bearer <token>"');
      signIn(request, user, accessOf(catalog, config, user));
      return;
    }
    const caller = byToken(token);
    if (caller === undefined) throw new Unauthorized('the token is unknown or revoked', true);
    signIn(request, caller.user, caller.access);
  };
  // Callback style: an async hook costs every request a promise and a microtask.
  return function authenticate(
    request: FastifyRequest,
    _reply: FastifyReply,
    done: (err?: Error) => void,
  ): void {
    try {
      identify(request);
      done();
    } catch (err) {
      if (err instanceof Unauthorized && err.wrongCredential) {
        countFailure(request).then(
          (limited) => done(limited ?? err),
          () => done(err),
        );
      } else done(err as Error);
    }
  };
}

/**
 * onRequest hook of the pages' scope (after @fastify/cookie's parse): sets the caller of a page
 * from the session cookie, or answers 303 to /login; public pages and unknown URLs pass.
 */
export function authenticatePage(catalog: Catalog, config: Config) {
  return function authenticatePage(request: FastifyRequest, reply: FastifyReply, done: () => void): void {
    const route = request.routeOptions;
    if (route.config?.public === true || route.url === undefined) return done();
    const user = sessionUser(request, catalog);
    if (user === undefined) {
      void reply.redirect('/login', 303);
      return;
    }
    signIn(request, user, accessOf(catalog, config, user));
    done();
  };
}

/**
 * The session cookie on an API request. The API's scope has no @fastify/cookie (its hooks would
 * cost every request, docs/decisions.md), so the header is parsed here, and only for a GET or
 * HEAD without a token.
 */
function sessionCookie(request: FastifyRequest): string | undefined {
  const header = request.headers.cookie;
  return header === undefined ? undefined : parseCookie(header)[SESSION_COOKIE];
}

/** The user of the live session the request's cookie names, if any (the pages' scope: cookies parsed). */
export function sessionUser(request: FastifyRequest, catalog: Catalog): User | undefined {
  return userOfSession(catalog, request.cookies[SESSION_COOKIE]);
}

/** The user of the live session this cookie secret names, if any. */
function userOfSession(catalog: Catalog, secret: string | undefined): User | undefined {
  if (secret === undefined || secret === '') return undefined;
  const session = catalog.sessions.find(secret);
  return session === undefined ? undefined : catalog.users.get(session.userName);
}

/** The user's rights, their grants read from the catalog. */
function accessOf(catalog: Catalog, config: Config, user: User): Access {
  return Access.of(user, catalog.grants.of(user.name), { requireGrants: config.auth.requireGrants });
}

/** Sets the caller and their rights on the request. */
function signIn(request: FastifyRequest, user: User, access: Access): void {
  request.user = user;
  request.access = access;
}

/** The authenticated caller (routes run after the hook, so there always is one). */
export function caller(request: FastifyRequest): User {
  if (request.user === undefined) throw new Unauthorized('authentication required');
  return request.user;
}

/** The caller's rights. */
export function access(request: FastifyRequest): Access {
  if (request.access === undefined) throw new Unauthorized('authentication required');
  return request.access;
}

/** The caller, if an administrator; else 403 with `refusal` (the pages say it in their own words). */
export function requireAdmin(request: FastifyRequest, refusal = 'only administrators may do this'): User {
  if (!access(request).isAdmin) throw forbidden(refusal);
  return caller(request);
}
