/** Whether a path exists, without confusing "absent" with "cannot look". */
import { stat } from 'node:fs/promises';
import { isErrno } from './errors.js';

/** True if `path` exists (links followed); false if it or a parent is absent; other errors throw. */
export async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch (err) {
    if (isErrno(err, 'ENOENT') || isErrno(err, 'ENOTDIR')) return false;
    throw err;
  }
}
