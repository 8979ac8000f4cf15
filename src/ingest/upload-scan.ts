/**
 * What an upload folder holds, found by walking it: files, bytes, folders, rsync temp files, and
 * when anything in it last changed (ctime: `rsync -t` sets mtimes to the source's). A directory
 * scan counts every file, which filesystem events alone do not (they miss a `cp -r` burst).
 */
import { lstatSync, type Dirent } from 'node:fs';
import { lstat, readdir } from 'node:fs/promises';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { isErrno } from '../fs/errors.js';
import { under } from '../fs/paths.js';

/** rsync's temp file for `name` while it is being received: `.name.XXXXXX`. */
const RSYNC_TEMP_FILE = /^\..+\.[A-Za-z0-9]{6}$/;

export function isRsyncTempFile(name: string): boolean {
  return RSYNC_TEMP_FILE.test(name);
}

/**
 * The longest run of lstat calls before the event loop gets a turn: one synchronous lstat of a
 * cached inode costs a few microseconds, a promise's round trip through libuv ten times that.
 */
const SLICE_MS = 4;

/** What a directory scan of one upload found. */
export interface UploadScan {
  /** Entries other than directories and rsync temp files (symlinks and the like included). */
  files: number;
  /** Bytes in regular files, temp files excluded. */
  bytes: number;
  directories: number;
  tempFiles: number;
  /** Latest change time (ctime, epoch ms) of the folder or anything in it. */
  lastWriteMs: number;
  /** Latest change time of a temp file; 0 when there is none. */
  lastTempWriteMs: number;
}

/**
 * Walks an upload with lstat (symlinks are counted, never followed). Throws ENOENT when the
 * folder does not exist; entries that vanish during the walk (renamed temp files) are skipped.
 */
export async function scanUpload(dir: string): Promise<UploadScan> {
  const root = await lstat(dir);
  if (!root.isDirectory()) throw new Error(`${dir} is not a directory`);
  const scan: UploadScan = {
    files: 0,
    bytes: 0,
    directories: 0,
    tempFiles: 0,
    lastWriteMs: root.ctimeMs,
    lastTempWriteMs: 0,
  };
  const pending = [dir];
  let sliceStart = performance.now();
  while (pending.length > 0) {
    const current = pending.pop() as string;
    let entries: Dirent[];
    try {
      entries = await readdir(current, { withFileTypes: true });
    } catch (err) {
      if (isErrno(err, 'ENOENT') || isErrno(err, 'ENOTDIR')) continue;
      throw err;
    }
    for (const entry of entries) {
      if (performance.now() - sliceStart > SLICE_MS) {
        await nextTurn();
        sliceStart = performance.now();
      }
      const path = under(current, entry.name);
      const st = lstatSync(path, { throwIfNoEntry: false });
      if (st === undefined) continue;
      scan.lastWriteMs = Math.max(scan.lastWriteMs, st.ctimeMs);
      if (st.isDirectory()) {
        scan.directories += 1;
        pending.push(path);
      } else if (st.isFile() && isRsyncTempFile(entry.name)) {
        scan.tempFiles += 1;
        scan.lastTempWriteMs = Math.max(scan.lastTempWriteMs, st.ctimeMs);
      } else {
        scan.files += 1;
        if (st.isFile()) scan.bytes += st.size;
      }
    }
  }
  return scan;
}

/** A scan's numbers as one string: two scans alike found the same upload. */
export function signatureOf(scan: UploadScan): string {
  return [
    scan.files,
    scan.bytes,
    scan.directories,
    scan.tempFiles,
    scan.lastWriteMs,
    scan.lastTempWriteMs,
  ].join(':');
}
