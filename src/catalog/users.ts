/**
 * Users and their API tokens. A token is 256 random bits shown once; only its SHA-256 digest is
 * kept, and the first 16 hex digits of that digest are the token's public id (for `revoke`).
 */
import { hash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Database, RootDatabase } from 'lmdb';
import { CatalogError } from './errors.js';
import type { Transactor } from './transaction.js';
import type { Token, User } from './types.js';

const USER_NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;

export function tokenDigest(secret: string): string {
  // One-shot `hash`, cheaper than createHash, and every API request pays it (docs/performance.md, "Scale").
  return hash('sha256', secret, 'hex');
}

export class UserStore {
  private readonly users: Database<User, string>;
  /** Keyed by the token's digest. */
  private readonly tokens: Database<Token, string>;

  /** `changed` is called inside every transaction that writes a user or a token (catalog.ts, authGeneration). */
  constructor(
    root: RootDatabase,
    private readonly catalog: Transactor,
    private readonly changed: () => void,
  ) {
    this.users = root.openDB({ name: 'users' });
    this.tokens = root.openDB({ name: 'tokens' });
  }

  static isValidName(name: string): boolean {
    return USER_NAME.test(name);
  }

  get(name: string): User | undefined {
    return this.users.get(name);
  }

  add(name: string, admin: boolean): User {
    if (!UserStore.isValidName(name))
      throw new CatalogError(
        `"${name}" is not a valid user name: lower-case letters, digits, ".", "_" and "-", at most 64`,
      );
    return this.catalog.transaction(() => {
      if (this.users.get(name) !== undefined) throw new CatalogError(`user "${name}" already exists`);
      const user: User = { name, admin, createdAt: Date.now() };
      this.users.putSync(name, user);
      this.changed();
      return user;
    });
  }

  list(): Array<User & { liveTokens: number }> {
    const live = new Map<string, number>();
    for (const { value } of this.tokens.getRange()) {
      if (value.revokedAt === undefined) live.set(value.userName, (live.get(value.userName) ?? 0) + 1);
    }
    return [...this.users.getRange()].map(({ value }) => ({
      ...value,
      liveTokens: live.get(value.name) ?? 0,
    }));
  }

  /** Issues a new token for `userName`; the returned secret is never stored. */
  issueToken(userName: string): { id: string; secret: string } {
    const secret = randomBytes(32).toString('base64url');
    const digest = tokenDigest(secret);
    const id = digest.slice(0, 16);
    this.catalog.transaction(() => {
      if (this.users.get(userName) === undefined) throw new CatalogError(`no user "${userName}"`);
      this.tokens.putSync(digest, { id, userName, digest, createdAt: Date.now() });
      this.changed();
    });
    return { id, secret };
  }

  /** Revokes the token with this public id; false if there is none (or it was revoked). */
  revokeToken(id: string): boolean {
    if (!/^[0-9a-f]{16}$/.test(id)) return false;
    return this.catalog.transaction(() => {
      for (const { key, value } of this.tokens.getRange({ start: id, end: `${id}g` })) {
        if (value.revokedAt !== undefined) return false;
        this.tokens.putSync(key, { ...value, revokedAt: Date.now() });
        this.changed();
        return true;
      }
      return false;
    });
  }

  /** The user a presented secret belongs to, or undefined for an unknown or revoked token. */
  authenticate(secret: string): User | undefined {
    return this.authenticateDigest(tokenDigest(secret));
  }

  /** The same, for a secret whose digest (`tokenDigest`) the caller has already taken. */
  authenticateDigest(digest: string): User | undefined {
    const token = this.tokens.get(digest);
    if (token === undefined || token.revokedAt !== undefined) return undefined;
    // The lookup is by digest; compare once more in constant time so no path depends on bytes.
    if (!timingSafeEqual(Buffer.from(token.digest, 'hex'), Buffer.from(digest, 'hex'))) return undefined;
    return this.users.get(token.userName);
  }

  /** Whether the token with this digest exists and is not revoked. */
  isLive(digest: string): boolean {
    const token = this.tokens.get(digest);
    return token !== undefined && token.revokedAt === undefined;
  }
}
