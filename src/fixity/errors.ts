/**
 * The errors a hashing job rejects with. Every one carries a `code` a caller can switch on:
 * the operating system's (ENOENT, EACCES, ELOOP for a symbolic link, EISDIR…) or one of ours.
 */

/** Codes of our own, beside the operating system's errno names. */
export const NOT_REGULAR_FILE = 'ERR_NOT_REGULAR_FILE';
export const POOL_CLOSED = 'ERR_FIXITY_POOL_CLOSED';
export const WORKER_FAILED = 'ERR_FIXITY_WORKER_FAILED';
const ABORTED = 'ABORT_ERR';

export class FixityError extends Error {
  readonly code: string;
  /** The file the job was for, when there was one. */
  readonly path?: string;
  readonly syscall?: string;

  constructor(
    code: string,
    message: string,
    details: { path?: string | undefined; syscall?: string | undefined; cause?: unknown } = {},
  ) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'FixityError';
    this.code = code;
    if (details.path !== undefined) this.path = details.path;
    if (details.syscall !== undefined) this.syscall = details.syscall;
  }
}

/** Shaped like Node's own AbortError (name 'AbortError', code 'ABORT_ERR', cause = signal.reason). */
export class AbortError extends Error {
  readonly code = ABORTED;
  constructor(path: string, reason?: unknown) {
    super(`hashing of ${path} was aborted`, reason === undefined ? undefined : { cause: reason });
    this.name = 'AbortError';
  }
}

/** What crosses from a worker to the pool: an Error loses its own properties in postMessage. */
export interface SerializedError {
  code: string;
  message: string;
  syscall?: string;
}

export function serializeError(err: unknown): SerializedError {
  if (err instanceof Error) {
    const { code, syscall } = err as NodeJS.ErrnoException;
    return {
      code: typeof code === 'string' ? code : 'ERR_FIXITY_INTERNAL',
      message: err.message,
      ...(typeof syscall === 'string' ? { syscall } : {}),
    };
  }
  return { code: 'ERR_FIXITY_INTERNAL', message: String(err) };
}

export function deserializeError(err: SerializedError, path: string): FixityError {
  return new FixityError(err.code, err.message, { path, ...(err.syscall ? { syscall: err.syscall } : {}) });
}
