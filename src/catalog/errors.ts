/** A catalog that cannot be used as asked: a newer schema, a user or token that is not there. */
export class CatalogError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CatalogError';
  }
}
