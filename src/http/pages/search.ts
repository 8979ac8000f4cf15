/**
 * The package search of the pages: a bag_id or external_id, whole or in part, newest deposits
 * first, a page at a time. Its cost is bounded whatever the catalog's size: a whole id is one
 * index read; a part of one is looked for in the caller's packages newest first, reading at most
 * `SEARCH_BUDGET` of them per request (the rest is one "older" link away) and stopping as soon
 * as a page is full. It decides nothing about visibility: it is handed the caller's scope.
 */
import type { Catalog } from '../../catalog/catalog.js';
import { encodeCursor, type Scope } from '../../catalog/scan.js';
import type { Package } from '../../catalog/types.js';

/** Matches per page. */
const PAGE_SIZE = 50;
/** Packages read per request at most, matched or not. */
export const SEARCH_BUDGET = 20_000;

export interface SearchQuery {
  scope: Scope;
  canSee: (pkg: Package) => boolean;
  /** A bag_id or external_id, or a part of one (case-insensitive); '' for every package. */
  q: string;
  contentType: string | undefined;
  /** Continue with packages deposited before this order key (a cursor's value). */
  before: number | undefined;
}

export interface SearchResult {
  /** The package the query names exactly (then there are no other matches). */
  exact: Package | undefined;
  /** Matches of a part of an id, newest first. */
  matches: Package[];
  /** The cursor of the next page, when more may follow. */
  older: string | undefined;
  /** Whether the page ended because the read budget was spent (not because it was full). */
  budgetSpent: boolean;
}

/**
 * A query that names a package the caller may see (its whole bag_id or external_id) finds that
 * package alone; any other is matched as a part of ids, newest first.
 */
export function searchPackages(catalog: Catalog, query: SearchQuery): SearchResult {
  const needle = query.q.toLowerCase();
  const named = query.q !== '' && query.before === undefined ? catalog.packages.find(query.q) : undefined;
  const exact =
    named !== undefined &&
    query.canSee(named) &&
    (query.contentType === undefined || named.contentType === query.contentType)
      ? named
      : undefined;
  if (exact !== undefined) return { exact, matches: [], older: undefined, budgetSpent: false };
  const matches: Package[] = [];
  let read = 0;
  let lastRead: number | undefined;
  let more = false;
  let budgetSpent = false;
  for (const { seq, pkg } of catalog.packages.newestFirst({
    scope: query.scope,
    contentType: query.contentType,
    before: query.before,
  })) {
    const isMatch =
      needle === '' || pkg.bagId.includes(needle) || pkg.externalId.toLowerCase().includes(needle);
    if (isMatch && matches.length === PAGE_SIZE) {
      more = true;
      break;
    }
    if (read === SEARCH_BUDGET) {
      more = budgetSpent = true;
      break;
    }
    read++;
    lastRead = seq;
    if (isMatch) matches.push(pkg);
  }
  return {
    exact,
    matches,
    older: more && lastRead !== undefined ? encodeCursor(lastRead) : undefined,
    budgetSpent,
  };
}
