/**
 * A browser's side of the pages' sessions for tests over plain HTTP: a cookie jar, and logging in
 * through the CSRF-protected form.
 */
import type { TestDaemon } from './daemon.js';

/** A browser's cookie jar, just enough of one: name → value, from Set-Cookie headers. */
export class Jar {
  readonly cookies = new Map<string, string>();
  take(headers: Headers): string[] {
    const set = headers.getSetCookie();
    for (const line of set) {
      const [pair] = line.split(';');
      const eq = pair!.indexOf('=');
      const value = pair!.slice(eq + 1);
      if (value === '' || /max-age=0|expires=thu, 01 jan 1970/i.test(line))
        this.cookies.delete(pair!.slice(0, eq));
      else this.cookies.set(pair!.slice(0, eq), value);
    }
    return set;
  }
  get header(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }
}

export const csrfField = (html: string) => /name="_csrf" value="([^"]+)"/.exec(html)?.[1] ?? '';

/** GET /login, then POST the form with `token`; returns the POST's answer. */
export async function logIn(d: TestDaemon, jar: Jar, token: string, options: { csrf?: boolean } = {}) {
  const form = await d.request('GET', '/login', { token: null, headers: { cookie: jar.header } });
  jar.take(form.headers);
  const fields: Record<string, string> = { token };
  if (options.csrf !== false) fields._csrf = csrfField(form.text);
  const res = await d.request('POST', '/login', {
    token: null,
    form: fields,
    headers: { cookie: jar.header },
  });
  return { res, setCookies: jar.take(res.headers) };
}

/** A page fetched with the jar's cookies. */
export function getPage(d: TestDaemon, jar: Jar, path: string) {
  return d.request('GET', path, { token: null, headers: { cookie: jar.header } });
}
