/**
 * What the catalog's two logs about packages (events, queue items) share: records numbered by an
 * id that only grows, each about one package, indexed by that package and by its audience (the
 * package's owner and content type), so that a package's records and a page of what a caller may
 * see each read only their own index ranges, never the whole log.
 *
 * It writes only inside the caller's transaction and decides nothing about the records.
 */
import type { Database, RootDatabase } from 'lmdb';
import { EVERYTHING, indexRange, keysInScope, MAX_PAGE, takePage, type Page, type Scope } from './scan.js';

/** Who may see a package's records: its owner, and grantees of its content type. */
export type Audience = (bagId: string) => { user: string; contentType: string } | undefined;

/** A page of a log: of one package, or of every package `scope` may see, after the id `after`. */
export interface LogQuery {
  scope?: Scope;
  bagId?: string | undefined;
  after?: number | undefined;
  limit?: number;
}

export class PackageLog<T extends { id: number; bagId: string }> {
  private readonly byPackage: Database<null, [string, number]>;
  private readonly byOwner: Database<null, [string, number]>;
  private readonly byContentType: Database<null, [string, number]>;

  /** `name`: the log's database; its indexes are `<name>ByPackage`, `<name>ByOwner`, `<name>ByContentType`. */
  constructor(
    root: RootDatabase,
    name: string,
    private readonly records: Database<T, number>,
    private readonly audience: Audience,
  ) {
    this.byPackage = root.openDB({ name: `${name}ByPackage` });
    this.byOwner = root.openDB({ name: `${name}ByOwner` });
    this.byContentType = root.openDB({ name: `${name}ByContentType` });
  }

  /** Indexes a new record by its package and audience (inside the caller's transaction). */
  index(record: T): void {
    this.byPackage.putSync([record.bagId, record.id], null);
    this.indexAudience(record);
  }

  /** The owner and content-type entries of a record (also rebuilt by the migration). */
  indexAudience(record: T): void {
    const audience = this.audience(record.bagId);
    if (audience === undefined) return;
    this.byOwner.putSync([audience.user, record.id], null);
    this.byContentType.putSync([audience.contentType, record.id], null);
  }

  /** The records of one package, oldest first (ids grow with time), or newest first. */
  *ofPackage(bagId: string, order: 'oldest first' | 'newest first' = 'oldest first'): Generator<T> {
    for (const id of indexRange(
      this.byPackage,
      bagId,
      order === 'oldest first' ? { after: 0 } : { before: Infinity },
    )) {
      const record = this.records.get(id);
      if (record !== undefined) yield record;
    }
  }

  /** The ids `scope` may see after `after`, ascending: for `all` the log's own order, else its audience's index ranges merged. */
  idsInScope(scope: Scope, after = 0): Iterable<number> {
    return keysInScope(
      scope,
      { byOwner: this.byOwner, byContentType: this.byContentType },
      (a) => this.records.getKeys({ start: a + 1 }),
      after,
    );
  }

  /** One page, in id order after `after`: of one package, or of every package `scope` may see. */
  page(query: LogQuery): Page<T> {
    const after = query.after ?? 0;
    const limit = Math.min(query.limit ?? MAX_PAGE, MAX_PAGE);
    const ids =
      query.bagId !== undefined
        ? indexRange(this.byPackage, query.bagId, { after })
        : this.idsInScope(query.scope ?? EVERYTHING, after);
    return takePage(ids, limit, (id) => this.records.get(id));
  }
}
