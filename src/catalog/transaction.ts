/**
 * What a store needs from the catalog to change it: one all-or-nothing write transaction. The
 * stores take this, not the `Catalog`, so that `catalog.ts` alone knows every store.
 */
export interface Transactor {
  transaction<T>(fn: () => T): T;
  /**
   * Claims disk room for a write bigger than usual (about `bytes` of records), before or inside
   * its transaction; throws an out-of-space error, and so fails the transaction, when there is none.
   */
  reserve(bytes: number): void;
}
