/**
 * Browser sessions of the web pages: a login with a token opens one, logout or expiry ends it.
 * Like tokens, only the SHA-256 digest of the cookie's secret is kept. A session is only as good
 * as the token that opened it: revoking that token ends it too.
 */
import { randomBytes } from 'node:crypto';
import type { Database, RootDatabase } from 'lmdb';
import type { Transactor } from './transaction.js';
import type { Session } from './types.js';
import { tokenDigest } from './users.js';

export class SessionStore {
  private readonly sessions: Database<Session, string>;

  constructor(
    root: RootDatabase,
    private readonly catalog: Transactor,
    /** Whether the token with this digest is live (not revoked). */
    private readonly tokenLive: (digest: string) => boolean,
  ) {
    this.sessions = root.openDB({ name: 'sessions' });
  }

  /** Opens a session for the holder of `token` (already authenticated); returns the cookie's secret. */
  open(userName: string, token: string, lifetimeMs: number): { secret: string; session: Session } {
    const secret = randomBytes(32).toString('base64url');
    const now = Date.now();
    const session: Session = { digest: tokenDigest(secret), userName, tokenDigest: tokenDigest(token), createdAt: now, expiresAt: now + lifetimeMs };
    this.catalog.transaction(() => {
      this.sweep(now);
      this.sessions.putSync(session.digest, session);
    });
    return { secret, session };
  }

  /** The live session a cookie's secret names, or undefined (unknown, expired, token revoked). */
  find(secret: string): Session | undefined {
    if (secret.length > 256) return undefined;
    const session = this.sessions.get(tokenDigest(secret));
    if (session === undefined || session.expiresAt <= Date.now() || !this.tokenLive(session.tokenDigest)) return undefined;
    return session;
  }

  end(secret: string): void {
    this.catalog.transaction(() => {
      this.sessions.removeSync(tokenDigest(secret));
    });
  }

  /** Forgets expired sessions (run at each login: sessions are few, one per login). */
  private sweep(now: number): void {
    for (const { key, value } of this.sessions.getRange()) if (value.expiresAt <= now) this.sessions.removeSync(key);
  }
}
