/**
 * Browser sessions of the web pages: a login with a token opens one, logout, expiry or idleness
 * ends it. Like tokens, only the SHA-256 digest of the cookie's secret is kept. A session is only
 * as good as the token that opened it: revoking that token ends it too.
 *
 * Two indexes keep a login's cost independent of how many sessions there are: one by expiry (a
 * login removes at most `SWEEP_BATCH` expired sessions, the oldest first) and one by user (a
 * user holds at most `maxPerUser`; opening one more ends their oldest).
 */
import { randomBytes } from 'node:crypto';
import type { Database, RootDatabase } from 'lmdb';
import type { Transactor } from './transaction.js';
import type { Session } from './types.js';
import { tokenDigest } from './users.js';

/** Expired sessions removed by one login: more than one login ever adds, so they never pile up. */
export const SWEEP_BATCH = 100;

/** How often, at most, a session's last use is written (a write per request would be too many). */
const TOUCH_EVERY_MS = 60_000;

type ExpiryKey = [expiresAt: number, digest: string];
type UserKey = [userName: string, createdAt: number, digest: string];

export interface SessionLimits {
  /** Sessions one user may hold at once; opening one more ends the oldest. */
  maxPerUser: number;
  /** A session unused this long is refused; 0: no idle limit. */
  idleMs: number;
  /** The secret of the session the browser had before (a login ends it). */
  replaces?: string | undefined;
}

/** The configuration's defaults (auth.maxSessionsPerUser; no idle limit), for callers that set none. */
const DEFAULT_LIMITS: SessionLimits = { maxPerUser: 20, idleMs: 0 };

export class SessionStore {
  private readonly sessions: Database<Session, string>;
  private readonly byExpiry: Database<true, ExpiryKey>;
  private readonly byUser: Database<true, UserKey>;

  constructor(
    root: RootDatabase,
    private readonly catalog: Transactor,
    /** Whether the token with this digest is live (not revoked). */
    private readonly tokenLive: (digest: string) => boolean,
  ) {
    this.sessions = root.openDB({ name: 'sessions' });
    this.byExpiry = root.openDB({ name: 'sessionsByExpiry' });
    this.byUser = root.openDB({ name: 'sessionsByUser' });
  }

  /** Opens a session for the holder of `token` (already authenticated); returns the cookie's secret. */
  open(
    userName: string,
    token: string,
    lifetimeMs: number,
    limits: SessionLimits = DEFAULT_LIMITS,
  ): { secret: string; session: Session } {
    const secret = randomBytes(32).toString('base64url');
    const now = Date.now();
    return this.catalog.transaction(() => {
      this.sweep(now, SWEEP_BATCH);
      if (limits.replaces !== undefined && limits.replaces.length <= 256)
        this.remove(tokenDigest(limits.replaces));
      // The user's sessions, newest first: at most maxPerUser, the cap holds. A later one gets a
      // later createdAt, so that "the oldest" is exact even for logins within one millisecond.
      const mine = [
        ...this.byUser.getKeys({
          start: [userName, Number.MAX_SAFE_INTEGER, ''],
          end: [userName],
          reverse: true,
        }),
      ];
      const session: Session = {
        digest: tokenDigest(secret),
        userName,
        tokenDigest: tokenDigest(token),
        createdAt: Math.max(now, (mine[0]?.[1] ?? 0) + 1),
        expiresAt: now + lifetimeMs,
        lastSeenAt: now,
        ...(limits.idleMs > 0 ? { idleMs: limits.idleMs } : {}),
      };
      // Every one after the newest maxPerUser - 1 makes room.
      for (const key of mine.slice(limits.maxPerUser - 1)) this.remove(key[2]);
      this.put(session);
      return { secret, session };
    });
  }

  /** The live session a cookie's secret names, or undefined (unknown, expired, idle too long, token revoked). */
  find(secret: string): Session | undefined {
    if (secret.length > 256) return undefined;
    const session = this.sessions.get(tokenDigest(secret));
    if (session === undefined || !this.tokenLive(session.tokenDigest)) return undefined;
    const now = Date.now();
    const lastSeen = session.lastSeenAt ?? session.createdAt;
    if (session.expiresAt <= now || (session.idleMs !== undefined && lastSeen + session.idleMs <= now))
      return undefined;
    if (now - lastSeen >= Math.min(TOUCH_EVERY_MS, (session.idleMs ?? Infinity) / 4)) {
      this.catalog.transaction(() => {
        const current = this.sessions.get(session.digest);
        if (current !== undefined) this.sessions.putSync(session.digest, { ...current, lastSeenAt: now });
      });
    }
    return session;
  }

  end(secret: string): void {
    if (secret.length > 256) return;
    this.catalog.transaction(() => this.remove(tokenDigest(secret)));
  }

  /** Removes at most `limit` expired sessions, the longest expired first; how many it removed. */
  sweep(now: number, limit: number): number {
    return this.catalog.transaction(() => {
      const expired = [...this.byExpiry.getKeys({ end: [now + 1], limit })];
      for (const [, digest] of expired) this.remove(digest);
      return expired.length;
    });
  }

  /**
   * Indexes sessions written before the indexes existed (one transaction at start-up, so never
   * half done). Cheap when there is nothing to do: it looks at one key of each.
   */
  indexOlderSessions(): void {
    const any = (db: Database<unknown, string> | Database<true, ExpiryKey>) =>
      [...db.getKeys({ limit: 1 })].length > 0;
    if (!any(this.sessions) || any(this.byExpiry)) return;
    this.catalog.transaction(() => {
      for (const { value } of this.sessions.getRange()) this.put(value);
    });
  }

  private put(session: Session): void {
    this.sessions.putSync(session.digest, session);
    this.byExpiry.putSync([session.expiresAt, session.digest], true);
    this.byUser.putSync([session.userName, session.createdAt, session.digest], true);
  }

  private remove(digest: string): void {
    const session = this.sessions.get(digest);
    if (session === undefined) return;
    this.sessions.removeSync(digest);
    this.byExpiry.removeSync([session.expiresAt, digest]);
    this.byUser.removeSync([session.userName, session.createdAt, digest]);
  }
}
