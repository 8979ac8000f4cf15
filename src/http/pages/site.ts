/**
 * The web pages' machinery (API.md, "The browser side"): cookies, CSRF protection, the template
 * engine (eta, escaping every interpolation unless a template says `<%~`), the stylesheet, the
 * one script and the icon, the pages' security headers (@fastify/helmet), and rendering a page
 * or an error page. What each page shows is in pages.ts; logging in and out in session.ts.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import cookie from '@fastify/cookie';
import csrf from '@fastify/csrf-protection';
import helmet from '@fastify/helmet';
import view from '@fastify/view';
import { Eta } from 'eta';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../../config/config.js';
import { formatBytes } from '../../format.js';
import type { HttpContext } from '../context.js';

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url));

/** Scripts and styles from this origin only, no inline code, no framing. */
const CONTENT_SECURITY_POLICY = {
  defaultSrc: ["'none'"],
  styleSrc: ["'self'"],
  scriptSrc: ["'self'"],
  imgSrc: ["'self'"],
  connectSrc: ["'self'"],
  formAction: ["'self'"],
  frameAncestors: ["'none'"],
  baseUri: ["'none'"],
};

/** The CSRF secret's cookie (@fastify/csrf-protection's name). */
export const CSRF_COOKIE = '_csrf';

/**
 * The cookies' `secure`: always with `http.secureCookies`, else `auto`, i.e. when the request
 * came over https as a trusted proxy says (`X-Forwarded-Proto`, `http.trustedProxies`).
 */
export function cookieSecurity(config: Config): true | 'auto' {
  return config.http.secureCookies ? true : 'auto';
}

interface Asset {
  path: string;
  type: string;
  body: Buffer;
  etag: string;
}

function asset(name: string, type: string): Asset {
  const body = readFileSync(here(`./assets/${name}`));
  return {
    path: `/assets/${name}`,
    type,
    body,
    etag: `"${createHash('sha256').update(body).digest('hex').slice(0, 32)}"`,
  };
}

/**
 * @fastify/helmet's security headers, for the scope of the pages (server.ts): the CSP above,
 * X-Frame-Options, COOP, nosniff, Referrer-Policy. The API's routes are outside that scope: its
 * hooks cost CPU on every request, even one whose route skips them (docs/performance.md), and
 * `/v1` sets its two headers itself. HSTS is left to the TLS proxy, which alone knows the site
 * is https.
 */
export async function registerPageHeaders(app: FastifyInstance): Promise<void> {
  await app.register(helmet, {
    contentSecurityPolicy: { useDefaults: false, directives: CONTENT_SECURITY_POLICY },
    referrerPolicy: { policy: 'same-origin' },
    frameguard: { action: 'deny' },
    strictTransportSecurity: false,
  });
}

/** Registers cookies, CSRF, the views and the assets in the pages' scope (server.ts), before their authentication. */
export async function registerSite(app: FastifyInstance, ctx: HttpContext): Promise<void> {
  await app.register(cookie);
  await app.register(csrf, {
    cookieKey: CSRF_COOKIE,
    cookieOpts: { path: '/', sameSite: 'strict', httpOnly: true, secure: cookieSecurity(ctx.config) },
    // The forms post the token as a field; the script of the audit page sends no form.
    getToken: (request) => (request.body as { _csrf?: string } | undefined)?._csrf,
  });
  // production: compile each template once (otherwise @fastify/view re-reads it per request).
  await app.register(view, { engine: { eta: new Eta() }, templates: here('./templates'), production: true });

  const assets = [
    asset('preservd.css', 'text/css; charset=utf-8'),
    asset('audit-progress.js', 'text/javascript; charset=utf-8'),
    asset('favicon.svg', 'image/svg+xml'),
  ];
  for (const a of assets) {
    app.get(a.path, { config: { public: true }, schema: { hide: true } }, async (request, reply) => {
      reply.header('etag', a.etag).header('cache-control', 'no-cache').type(a.type);
      if (request.headers['if-none-match'] === a.etag) return reply.code(304).send();
      return reply.send(a.body);
    });
  }
}

/** Whether an answer to this request should be a page rather than JSON. */
export function wantsPage(request: FastifyRequest): boolean {
  if (request.routeOptions.config?.page === true) return true;
  if (request.routeOptions.url !== undefined) return false;
  // An unknown URL outside the API, asked for by a browser.
  const path = request.url.split('?')[0]!;
  return (
    !path.startsWith('/v1/') && path !== '/metrics' && (request.headers.accept ?? '').includes('text/html')
  );
}

/** What every page's layout needs besides its own data. */
export interface PageFrame {
  title: string;
  /** Which navigation entry is current. */
  section?: 'overview' | 'queue' | 'packages' | 'audits' | 'deaccessions';
}

/** Renders a template inside the layout, with the caller, the CSRF token and the headers of a page. */
export async function renderPage(
  request: FastifyRequest,
  reply: FastifyReply,
  template: string,
  frame: PageFrame,
  data: object = {},
): Promise<FastifyReply> {
  const csrfToken = reply.generateCsrf();
  const user = request.user;
  const rights = request.access;
  pageHeaders(reply);
  return reply.view(template, {
    ...data,
    title: frame.title,
    section: frame.section ?? null,
    user: user?.name ?? null,
    isAdmin: rights?.isAdmin === true,
    csrfToken,
    fmt: FORMAT,
  });
}

/** One formatter, made once: toLocaleString builds a new one on every call. */
const thousands = new Intl.NumberFormat('en-US');

/** How the templates write numbers and times. */
const FORMAT = {
  /** 1,234,567 */
  count: (n: number) => thousands.format(n),
  /** 1.2 MB, as the CLI writes it. */
  bytes: formatBytes,
  /** RFC 3339 for the machine-readable attribute. */
  iso: (ms: number) => new Date(ms).toISOString(),
  /** 2026-11-25 09:18:27 UTC for people. */
  date: (ms: number) => `${new Date(ms).toISOString().slice(0, 19).replace('T', ' ')} UTC`,
};

/** The error page: a status, its name as the heading, one sentence. */
export async function renderErrorPage(
  request: FastifyRequest,
  reply: FastifyReply,
  status: number,
  message: string,
): Promise<FastifyReply> {
  const headings: Record<number, string> = {
    400: 'That request is not right',
    401: 'Please log in',
    403: 'You may not see this',
    404: 'Not found',
  };
  reply.code(status);
  return renderPage(
    request,
    reply,
    'error',
    { title: headings[status] ?? 'Something went wrong' },
    { status, message },
  );
}

/** helmet set the security headers; a page is the caller's alone and never kept. */
function pageHeaders(reply: FastifyReply): void {
  reply.header('cache-control', 'no-store').type('text/html; charset=utf-8');
}
