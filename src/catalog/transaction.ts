/**
 * What a store needs from the catalog to change it: one all-or-nothing write transaction. The
 * stores take this, not the `Catalog`, so that `catalog.ts` alone knows every store.
 */
export interface Transactor {
  transaction<T>(fn: () => T): T;
}
