/**
 * Grants: chipmunk's roles per content type (`preservd grant USER ROLE SCOPE`). A grant is a key
 * `[user, scope, role]` and nothing more; what a role allows is decided in `auth/access.ts`, not
 * here. This store only refuses grants that could never mean anything (an unknown user, role or
 * content type), all problems in one message, and changes nothing then.
 */
import type { Database, RootDatabase } from 'lmdb';
import { CatalogError } from './errors.js';
import type { Transactor } from './transaction.js';
import type { Grant, Role } from './types.js';

export const ROLES: readonly Role[] = ['viewer', 'content_manager', 'admin'];
/** The scope that covers every content type. */
export const ALL = 'all';

function isRole(s: string): s is Role {
  return (ROLES as readonly string[]).includes(s);
}

export class GrantStore {
  private readonly grants: Database<Grant, [string, string, string]>;

  constructor(
    root: RootDatabase,
    private readonly catalog: Transactor,
    private readonly userExists: (name: string) => boolean,
    /** Called inside every transaction that writes a grant (catalog.ts, authGeneration). */
    private readonly changed: () => void,
  ) {
    this.grants = root.openDB({ name: 'grants' });
  }

  /**
   * Gives `user` the role on `scope` (a content type of `contentTypes`, or `all`). Returns false
   * when the user already held exactly this grant (nothing changes then).
   */
  grant(user: string, role: string, scope: string, contentTypes: readonly string[]): boolean {
    return this.catalog.transaction(() => {
      const checked = this.check(user, role, scope, contentTypes);
      const key: [string, string, string] = [user, scope, checked];
      if (this.grants.get(key) !== undefined) return false;
      this.grants.putSync(key, { user, role: checked, scope, createdAt: Date.now() });
      this.changed();
      return true;
    });
  }

  /** Takes the grant away; refused (nothing changes) when the user does not hold it. */
  revoke(user: string, role: string, scope: string): void {
    this.catalog.transaction(() => {
      const key: [string, string, string] = [user, scope, role];
      if (this.grants.get(key) === undefined) {
        if (!this.userExists(user)) throw new CatalogError(`no user "${user}"`);
        throw new CatalogError(`${user} holds no grant ${role} on ${scope}`);
      }
      this.grants.removeSync(key);
      this.changed();
    });
  }

  /** Every grant of one user, by scope then role. */
  of(user: string): Grant[] {
    return [...this.grants.getRange({ start: [user], end: [user, '\uffff'] })].map((e) => e.value);
  }

  /** Every grant, by user, scope and role. */
  list(): Grant[] {
    return [...this.grants.getRange()].map((e) => e.value);
  }

  private check(user: string, role: string, scope: string, contentTypes: readonly string[]): Role {
    const problems: string[] = [];
    if (!this.userExists(user)) problems.push(`no user "${user}" (preservd user add ${user} creates one)`);
    if (!isRole(role)) problems.push(`no role "${role}": the roles are ${ROLES.join(', ')}`);
    if (scope !== ALL && !contentTypes.includes(scope))
      problems.push(`no content type "${scope}": the scope is one of ${[...contentTypes, ALL].join(', ')}`);
    if (problems.length > 0) throw new CatalogError(`grant refused, nothing changed: ${problems.join('; ')}`);
    return role as Role;
  }
}
