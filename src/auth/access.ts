/**
 * Who may see and do what: the one place that decides it, for the API and the pages alike.
 * An `Access` is a user with their grants resolved (API.md, "Authentication and roles"):
 *
 * - admins (the user's flag, or the role `admin` on `all`) may do everything;
 * - a regular user sees what they own, plus every package of a content type they hold any role
 *   on (`viewer`, `content_manager`, `admin`; `all` covers every type);
 * - they complete what they own, plus requests of types they hold `content_manager` or `admin` on;
 *   only they are shown an open request's upload link (a bearer capability to write into it);
 * - they create requests of any type, unless `auth.requireGrants`, which asks for
 *   `content_manager` or `admin` on the type (chipmunk's rule);
 * - `storage_location` (and replicas) show to admins, and to holders of `admin` on the type;
 * - a deaccession is asked for by `content_manager`s of the type (or admins) and decided by an
 *   admin other than the one who asked (`canRequestDeaccession`, `isAdmin`);
 * - audits, repair and metrics are for admins only: `isAdmin`.
 *
 * It knows nothing of HTTP: routes and pages ask it and turn a "no" into a 403 themselves.
 */
import { ALL } from '../catalog/grants.js';
import type { Grant, Package, User } from '../catalog/types.js';

/**
 * What a user can see, as data: everything, or "owner is `owner` OR content type in
 * `contentTypes`" (a role on `all` makes it everything), so a list can use indexes by owner and
 * by content type instead of testing every package.
 */
export type Visibility =
  { everything: true } | { everything: false; owner: string; contentTypes: ReadonlySet<string> };

/** The part of a package access depends on. */
export type Owned = Pick<Package, 'user' | 'contentType'>;

export interface AccessOptions {
  /** `auth.requireGrants`: creating a request needs `content_manager` or `admin` on its type. */
  requireGrants: boolean;
}

export class Access {
  /** The user's flag or `admin` on `all`: every right, everywhere. */
  readonly isAdmin: boolean;
  readonly visibility: Visibility;
  /** Types (or `all`) on which the user holds any role, `content_manager` or `admin`, `admin`. */
  private readonly sees: ReadonlySet<string>;
  private readonly manages: ReadonlySet<string>;
  private readonly administers: ReadonlySet<string>;

  private constructor(
    readonly user: User,
    grants: readonly Grant[],
    private readonly options: AccessOptions,
  ) {
    const own = grants.filter((g) => g.user === user.name);
    this.sees = new Set(own.map((g) => g.scope));
    this.manages = new Set(own.filter((g) => g.role !== 'viewer').map((g) => g.scope));
    this.administers = new Set(own.filter((g) => g.role === 'admin').map((g) => g.scope));
    this.isAdmin = user.admin || this.administers.has(ALL);
    this.visibility =
      this.isAdmin || this.sees.has(ALL)
        ? { everything: true }
        : { everything: false, owner: user.name, contentTypes: this.sees };
  }

  static of(user: User, grants: readonly Grant[], options: AccessOptions): Access {
    return new Access(user, grants, options);
  }

  /** Whether the package (its files, downloads, events and queue items) is visible. */
  canSee(pkg: Owned): boolean {
    const v = this.visibility;
    return v.everything || pkg.user === v.owner || v.contentTypes.has(pkg.contentType);
  }

  /** Whether a new request of this content type may be made. */
  canCreate(contentType: string): boolean {
    if (this.isAdmin || !this.options.requireGrants) return true;
    return covers(this.manages, contentType);
  }

  /** Whether the request may be completed (a new ingest attempt). */
  canComplete(pkg: Owned): boolean {
    return this.isAdmin || pkg.user === this.user.name || covers(this.manages, pkg.contentType);
  }

  /**
   * Whether the request's `upload_link` is shown: whoever holds it may write into the upload, so
   * only those who may complete it, and only while it is open (a stored package's link is dead).
   */
  canSeeUploadLink(pkg: Owned & Pick<Package, 'stored'>): boolean {
    return !pkg.stored && this.canComplete(pkg);
  }

  /** Whether a deaccession of the package may be asked for: admins, and `content_manager`s (or `admin`s) of its type. */
  canRequestDeaccession(pkg: Owned): boolean {
    return this.isAdmin || covers(this.manages, pkg.contentType);
  }

  /** Whether the package's storage details (`storage_location`, replicas) are shown. */
  canSeeStorage(pkg: Owned): boolean {
    return this.isAdmin || covers(this.administers, pkg.contentType);
  }
}

function covers(scopes: ReadonlySet<string>, contentType: string): boolean {
  return scopes.has(ALL) || scopes.has(contentType);
}
