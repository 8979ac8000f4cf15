/**
 * A deaccessioned package's object taken out of the primary root (catalog/deaccessions.ts): the
 * object folder is renamed whole into `staging/` (one rename: the root holds the whole object or
 * none of it), the layout's folders it leaves empty go at once (an empty folder is no valid OCFL
 * root, E073), then it is deleted there, however long that takes. Run again after a crash at any
 * point, it finishes the job.
 */
import { constants } from 'node:fs';
import { open, readdir, rename, rm, rmdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { failpoint } from '../failpoints.js';
import { errorCode } from '../fs/errors.js';
import type { Storage } from './storage.js';

/** `staging/<bag_id>.removing`: an object on its way out. */
const REMOVING_SUFFIX = '.removing';

export async function removeObjectFromPrimary(storage: Storage, bagId: string): Promise<void> {
  const object = storage.objectDir(bagId);
  const removing = `${storage.stagingDir(bagId)}${REMOVING_SUFFIX}`;
  try {
    await rename(object, removing);
    await syncFolder(dirname(object));
    failpoint('deaccession:primary-renamed');
  } catch (err) {
    // Gone already (an earlier run renamed it, or it never reached this root).
    if (errorCode(err) !== 'ENOENT') throw err;
  }
  await pruneEmptyFolders(storage, dirname(object));
  await rm(removing, { recursive: true, force: true });
}

/** Removes `folder` and the parents below the root it leaves empty, up to the first that is not. */
async function pruneEmptyFolders(storage: Storage, folder: string): Promise<void> {
  for (; folder.startsWith(`${storage.storageRoot}/`); folder = dirname(folder)) {
    if ((await readdir(folder).catch(() => ['?'])).length > 0) return;
    await rmdir(folder).catch((err: unknown) => {
      if (errorCode(err) !== 'ENOENT' && errorCode(err) !== 'ENOTEMPTY') throw err;
    });
  }
}

/** Whether anything of the package's object is still in the primary root. */
export async function primaryHoldsObject(storage: Storage, bagId: string): Promise<boolean> {
  try {
    await readdir(storage.objectDir(bagId));
    return true;
  } catch (err) {
    if (errorCode(err) === 'ENOENT') return false;
    throw err;
  }
}

async function syncFolder(folder: string): Promise<void> {
  const handle = await open(folder, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
