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
export const gone = (message: string) => new HttpError(410, message);
export const tooMany = (message: string) => new HttpError(429, message);
export const unprocessable = (fields: Record<string, string[]>) =>
  new HttpError(
    422,
    `invalid request: ${Object.entries(fields)
      .map(([f, p]) => `${f} ${p.join(', ')}`)
      .join('; ')}`,
    fields,
  );

/** One problem fastify's ajv found in a body (`verbose`: with the schema that failed). */
interface BodyError {
  keyword: string;
  instancePath: string;
  params: Record<string, unknown>;
  message?: string | undefined;
  parentSchema?: { required?: string[]; problem?: string } | undefined;
}

/**
 * A body's schema problems as 422 `fields` (API.md): each field with what is wrong with it, in
 * words, in the order of the schema's `properties`; the body itself under `body` when it is not
 * an object at all.
 */
export function bodyFields(
  errors: readonly BodyError[],
  schema: { properties?: object } | undefined,
): Record<string, string[]> {
  const fields: Record<string, string[]> = {};
  const add = (field: string, problem: string) => {
    const list = (fields[field] ??= []);
    if (!list.includes(problem)) list.push(problem);
  };
  for (const e of errors) {
    const field = e.instancePath.split('/').slice(1).join('.');
    if (e.keyword === 'required') add(e.params.missingProperty as string, 'is required');
    else if (field === '')
      add(
        'body',
        `must be an object with ${(e.parentSchema?.required ?? []).join(', ').replace(/, ([^,]*)$/, ' and $1')}`,
      );
    else if (e.keyword === 'type') add(field, `must be a ${String(e.params.type).split(',')[0]}`);
    else add(field, e.parentSchema?.problem ?? e.message ?? 'is not valid');
  }
  const order = Object.keys(schema?.properties ?? {});
  const place = (field: string) => (order.includes(field) ? order.indexOf(field) : order.length);
  return Object.fromEntries(Object.entries(fields).sort(([a], [b]) => place(a) - place(b)));
}
