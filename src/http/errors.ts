/**
 * HTTP errors as values: a status, one clear sentence, and for 422 the fields at fault. The
 * error handler turns them (and fastify's own errors) into `{"error": ...}` bodies; anything
 * unexpected becomes a 500 whose body says nothing about the server.
 */
export class HttpError extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
    readonly fields?: Record<string, string[]>,
  ) {
    super(message);
    this.name = 'HttpError';
  }
}

export const badRequest = (message: string) => new HttpError(400, message);
export const forbidden = (message = 'you may not access this resource') => new HttpError(403, message);
export const notFound = (message: string) => new HttpError(404, message);
export const conflict = (message: string) => new HttpError(409, message);
export const tooMany = (message: string) => new HttpError(429, message);
export const unprocessable = (fields: Record<string, string[]>) =>
  new HttpError(422, `invalid request: ${Object.entries(fields).map(([f, p]) => `${f} ${p.join(', ')}`).join('; ')}`, fields);
