/**
 * Logging in and out of the web pages: a token typed into a form opens a session in the catalog
 * (catalog/sessions.ts), named by an HttpOnly, SameSite=Strict cookie; logout ends it. Both forms
 * carry a CSRF token, and both replace the CSRF secret (`_csrf`), so a form token from before
 * cannot be posted after. A wrong token answers 401 with the form again
 * and sets no session cookie; too many from one address, 429 (failed-auth.ts).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { SESSION_COOKIE, sessionUser } from '../auth.js';
import type { HttpContext } from '../context.js';
import type { FailureCounter } from '../failed-auth.js';
import { CSRF_COOKIE, cookieSecurity, renderPage } from './site.js';

export async function sessionRoutes(
  app: FastifyInstance,
  ctx: HttpContext,
  countFailure: FailureCounter,
): Promise<void> {
  const cookieOptions = {
    path: '/',
    httpOnly: true,
    sameSite: 'strict',
    secure: cookieSecurity(ctx.config),
  } as const;
  let warned = false;
  const loginForm = (request: FastifyRequest, reply: FastifyReply, problem: string | null) =>
    renderPage(request, reply, 'login', { title: 'Log in' }, { problem });

  app.get(
    '/login',
    { config: { public: true, page: true }, schema: { hide: true } },
    async (request, reply) => {
      if (sessionUser(request, ctx.catalog) !== undefined) return reply.redirect('/', 303);
      return loginForm(request, reply, null);
    },
  );

  app.post<{ Body: { token?: unknown } | undefined }>(
    '/login',
    { config: { public: true, page: true }, schema: { hide: true }, preHandler: app.csrfProtection },
    async (request, reply) => {
      const token = typeof request.body?.token === 'string' ? request.body.token.trim() : '';
      const user = token === '' ? undefined : ctx.catalog.users.authenticate(token);
      if (user === undefined) {
        const limited = token === '' ? undefined : await countFailure(request);
        if (limited !== undefined) {
          reply.code(429).header('retry-after', String(limited.retryAfterSeconds));
          return loginForm(
            request,
            reply,
            `Too many wrong tokens from this address; try again in ${limited.retryAfterSeconds} seconds.`,
          );
        }
        reply.code(401);
        return loginForm(
          request,
          reply,
          token === '' ? 'Enter your token.' : 'That token is unknown or revoked.',
        );
      }
      const { auth } = ctx.config;
      const lifetimeMs = auth.sessionHours * 3600_000;
      const { secret } = ctx.catalog.sessions.open(user.name, token, lifetimeMs, {
        maxPerUser: auth.maxSessionsPerUser,
        idleMs: auth.sessionIdleMinutes * 60_000,
        replaces: request.cookies[SESSION_COOKIE],
      });
      if (
        !warned &&
        request.protocol !== 'https' &&
        request.headers['x-forwarded-proto'] === 'https' &&
        !ctx.config.http.secureCookies
      ) {
        warned = true;
        request.log.warn(
          'INSECURE COOKIES: a proxy says this login came over https, but it is not in http.trustedProxies: the session cookie is not marked Secure',
        );
      }
      newCsrfSecret(request, reply);
      return reply
        .setCookie(SESSION_COOKIE, secret, { ...cookieOptions, maxAge: Math.floor(lifetimeMs / 1000) })
        .redirect('/', 303);
    },
  );

  app.post(
    '/logout',
    { config: { page: true }, schema: { hide: true }, preHandler: app.csrfProtection },
    async (request, reply) => {
      const secret = request.cookies[SESSION_COOKIE];
      if (secret !== undefined) ctx.catalog.sessions.end(secret);
      newCsrfSecret(request, reply);
      return reply.clearCookie(SESSION_COOKIE, cookieOptions).redirect('/login', 303);
    },
  );
}

/** Replaces the CSRF secret cookie: @fastify/csrf-protection makes a new one for a request that has none. */
function newCsrfSecret(request: FastifyRequest, reply: FastifyReply): void {
  delete request.cookies[CSRF_COOKIE];
  reply.generateCsrf();
}
