/**
 * Who is calling. Accepts `Authorization: Bearer <token>` and the forms chipmunk-client and its
 * server understood: `Token token=<t>`, `Token token="<t>"`, `Bearer token=<t>`. Tokens are
 * looked up by digest (catalog/users.ts). No token ever reaches a log.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Access } from '../auth/access.js';
import type { Catalog } from '../catalog/catalog.js';
import type { User } from '../catalog/types.js';
import type { Config } from '../config/config.js';
import { forbidden, HttpError } from './errors.js';

declare module 'fastify' {
  interface FastifyRequest {
    user?: User;
    /** The caller's rights (auth/access.ts), set with `user`. */
    access?: Access;
  }
  interface FastifyContextConfig {
    /** Route answers without credentials. */
    public?: boolean;
  }
}

export const WWW_AUTHENTICATE = 'Bearer realm="preservd"';

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
    const val = piece.slice(eq + 1).replaceAll('"', '').trim();
    if (key === 'token' && val !== '') return val;
  }
  return undefined;
}

export class Unauthorized extends HttpError {
  constructor(message: string) {
    super(401, message);
  }
}

/** onRequest hook: sets request.user, or answers 401, for every non-public route. */
export function authenticate(catalog: Catalog, config: Config) {
  return async (request: FastifyRequest, _reply: FastifyReply): Promise<void> => {
    if (request.routeOptions.config?.public === true || request.routeOptions.url === undefined) return;
    const token = tokenFromHeader(request.headers.authorization);
    if (token === undefined) throw new Unauthorized('authentication required: send "Authorization: Bearer <token>"');
    const user = catalog.users.authenticate(token);
    if (user === undefined) throw new Unauthorized('the token is unknown or revoked');
    signIn(request, catalog, config, user);
  };
}

/** Sets the caller and their rights on the request. */
function signIn(request: FastifyRequest, catalog: Catalog, config: Config, user: User): void {
  request.user = user;
  request.access = Access.of(user, catalog.grants.of(user.name), { requireGrants: config.auth.requireGrants });
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

export function requireAdmin(request: FastifyRequest): User {
  if (!access(request).isAdmin) throw forbidden('only administrators may do this');
  return caller(request);
}
