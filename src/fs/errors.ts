/**
 * System errors from node:fs and child processes: their code. A leaf module with no imports of
 * ours, so the libraries (bagit, fixity) may use it as well as the daemon.
 */

/** Whether `err` is a system error with this code (ENOENT, EACCES, ...). */
export function isErrno(err: unknown, code: string): boolean {
  return typeof err === 'object' && err !== null && (err as NodeJS.ErrnoException).code === code;
}

/** The `code` of a system error (ENOENT, EACCES, ...), or EUNKNOWN. */
export function errorCode(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : 'EUNKNOWN';
}
