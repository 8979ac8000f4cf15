/**
 * Logging in and out of the web pages: a token typed into a form opens a session in the catalog
 * (catalog/sessions.ts), named by an HttpOnly, SameSite=Strict cookie; logout ends it. Both forms
 * carry a CSRF token. A wrong token answers 401 with the form again and sets no session cookie.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { SESSION_COOKIE, sessionUser } from '../auth.js';
import type { HttpContext } from '../context.js';
import { renderPage } from './site.js';

export async function sessionRoutes(app: FastifyInstance, ctx: HttpContext): Promise<void> {
  const cookieOptions = { path: '/', httpOnly: true, sameSite: 'strict', secure: ctx.config.http.secureCookies } as const;
  const loginForm = (request: FastifyRequest, reply: FastifyReply, problem: string | null) =>
    renderPage(request, reply, 'login', { title: 'Log in' }, { problem });

  app.get('/login', { config: { public: true, page: true }, schema: { hide: true } }, async (request, reply) => {
    if (sessionUser(request, ctx.catalog) !== undefined) return reply.redirect('/', 303);
    return loginForm(request, reply, null);
  });

  app.post<{ Body: { token?: unknown } | undefined }>(
    '/login',
    { config: { public: true, page: true }, schema: { hide: true }, preHandler: app.csrfProtection },
    async (request, reply) => {
      const token = typeof request.body?.token === 'string' ? request.body.token.trim() : '';
      const user = token === '' ? undefined : ctx.catalog.users.authenticate(token);
      if (user === undefined) {
        reply.code(401);
        return loginForm(request, reply, token === '' ? 'Enter your token.' : 'That token is unknown or revoked.');
      }
      const lifetimeMs = ctx.config.auth.sessionHours * 3600_000;
      const { secret } = ctx.catalog.sessions.open(user.name, token, lifetimeMs);
      return reply
        .setCookie(SESSION_COOKIE, secret, { ...cookieOptions, maxAge: Math.floor(lifetimeMs / 1000) })
        .redirect('/', 303);
    },
  );

  app.post('/logout', { config: { page: true }, schema: { hide: true }, preHandler: app.csrfProtection }, async (request, reply) => {
    const secret = request.cookies[SESSION_COOKIE];
    if (secret !== undefined) ctx.catalog.sessions.end(secret);
    return reply.clearCookie(SESSION_COOKIE, cookieOptions).redirect('/login', 303);
  });
}
