/**
 * How the catalog's lists are read a page at a time: who may see what (`Scope`), the index
 * ranges a scope reads (by owner, by content type), merged in ascending order, and the opaque
 * cursor a page ends with. Every list is ordered by an integer that only grows (a package's
 * sequence number, an event's or queue item's or audit's id), so "after" is that number.
 *
 * It reads nothing itself: the stores hand it their index ranges. It knows nothing of HTTP.
 */
import type { Database } from 'lmdb';

/**
 * What a caller may see: everything, or what the named users own plus everything of the named
 * content types (grants). Lists read the owner and content-type indexes of a `some` scope
 * merged in order, never the whole catalog.
 */
export type Scope =
  { kind: 'all' } | { kind: 'some'; users: readonly string[]; contentTypes: readonly string[] };

export const EVERYTHING: Scope = { kind: 'all' };

/** One page of a list: the items, and the order key to continue after when there are more. */
export interface Page<T> {
  items: T[];
  /** The order key of the last item, when more items follow; undefined at the end. */
  next: number | undefined;
}

/** Every list's page size bounds (API.md: `limit` is 1–1000). */
export const MAX_PAGE = 1000;

/** The two indexes a `some` scope reads: `[user, key]` and `[content type, key]`. */
export interface ScopeIndexes {
  byOwner: Database<unknown, [string, number]>;
  byContentType: Database<unknown, [string, number]>;
}

/**
 * The order keys (ascending, each once) of what `scope` may see, after `after`: for `all` the
 * store's own order, for `some` its owners' and content types' index ranges merged.
 */
export function keysInScope(
  scope: Scope,
  indexes: ScopeIndexes,
  all: (after: number) => Iterable<number>,
  after: number,
): Iterable<number> {
  if (scope.kind === 'all') return all(after);
  return merge(
    rangesOf(scope, indexes, (index, name) => indexRange(index, name, { after })),
    'ascending',
  );
}

/**
 * The same keys newest first (descending), below `before`: what a search that shows the latest
 * first reads, stopping when its page is full.
 */
export function keysInScopeNewestFirst(
  scope: Scope,
  indexes: ScopeIndexes,
  all: (before: number) => Iterable<number>,
  before: number,
): Iterable<number> {
  if (scope.kind === 'all') return all(before);
  return merge(
    rangesOf(scope, indexes, (index, name) => indexRange(index, name, { before })),
    'descending',
  );
}

function rangesOf(
  scope: Scope & { kind: 'some' },
  indexes: ScopeIndexes,
  range: (index: ScopeIndexes['byOwner'], name: string) => Iterable<number>,
): Iterable<number>[] {
  return [
    ...[...new Set(scope.users)].map((u) => range(indexes.byOwner, u)),
    ...[...new Set(scope.contentTypes)].map((c) => range(indexes.byContentType, c)),
  ];
}

/** The keys of one `[name, key]` index range: ascending after `after`, or descending below `before`. */
export function* indexRange<N extends string | number>(
  index: Database<unknown, [N, number]>,
  name: N,
  bound: { after: number } | { before: number },
): Generator<number> {
  const range =
    'after' in bound
      ? { start: [name, bound.after + 1], end: [name, Infinity] }
      : { start: [name, bound.before - 1], end: [name, 0], reverse: true }; // order keys start at 1
  for (const key of index.getKeys(range)) yield key[1];
}

/** Sorted sequences (all ascending or all descending) merged into one, each value once. */
function* merge(sources: Iterable<number>[], order: 'ascending' | 'descending'): Generator<number> {
  if (sources.length === 1) {
    yield* sources[0]!;
    return;
  }
  const first = (a: number, b: number) => (order === 'ascending' ? a < b : a > b);
  const heads: Array<{ value: number; it: Iterator<number> }> = [];
  for (const source of sources) {
    const it = source[Symbol.iterator]();
    const step = it.next();
    if (step.done !== true) heads.push({ value: step.value, it });
  }
  let last = NaN;
  while (heads.length > 0) {
    // A handful of sources (one per owner or granted content type): a linear minimum is enough.
    let next = 0;
    for (let i = 1; i < heads.length; i++) if (first(heads[i]!.value, heads[next]!.value)) next = i;
    const head = heads[next]!;
    if (head.value !== last) yield head.value;
    last = head.value;
    const step = head.it.next();
    if (step.done === true) heads.splice(next, 1);
    else head.value = step.value;
  }
}

/**
 * Up to `limit` items from `keys` that `load` finds and `keep` accepts, and whether more follow
 * (one more is looked for, never more).
 */
export function takePage<T>(
  keys: Iterable<number>,
  limit: number,
  load: (key: number) => T | undefined,
  keep: (item: T) => boolean = () => true,
): Page<T> {
  const items: T[] = [];
  let lastKey = 0;
  for (const key of keys) {
    const item = load(key);
    if (item === undefined || !keep(item)) continue;
    if (items.length === limit) return { items, next: lastKey };
    items.push(item);
    lastKey = key;
  }
  return { items, next: undefined };
}

/** The cursor of `after`: opaque to clients (base64url of a versioned text). */
export function encodeCursor(key: number): string {
  return Buffer.from(`c1:${key}`, 'utf8').toString('base64url');
}

/** The order key a cursor names, or undefined when it is not one of ours. */
export function decodeCursor(cursor: string): number | undefined {
  if (!/^[A-Za-z0-9_-]{1,40}$/.test(cursor)) return undefined;
  const match = /^c1:(\d{1,15})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (match === null) return undefined;
  const key = Number(match[1]);
  return Number.isSafeInteger(key) ? key : undefined;
}
