/**
 * Uploaded files made durable before a record or the store counts on them: each file's
 * fdatasync, or, for many files at a moment the machine holds little else unwritten, one
 * `syncfs` of their filesystem (coreutils `sync -f`; node has no binding).
 *
 * At complete the ~2,000 small files of a bag that arrived in its last moments were flushed one
 * by one: three system calls each through libuv's four threads, each answered on the daemon's
 * thread while it validates, ~100 ms on an idle machine and 300 ms beside a validation; one
 * syncfs took 23–37 ms, the child process included (docs/performance.md, "Tenth session"). It
 * writes back whatever the filesystem holds unwritten, other uploads' data too, so it is taken
 * only while that is small: the wait it adds is bounded, and the landed hasher flushes every
 * upload's large files as they are hashed, so little waits unwritten for long.
 */
import { close, existsSync, fdatasync, open, readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { LimitFunction } from 'p-limit';
import { spawnIsolated } from '../process/spawn.js';

/**
 * From this many files one syncfs may do; fewer get their own fdatasync. Starting `sync` costs
 * the daemon's thread 13–18 ms (a fork of a large process), what ~1,000 fdatasyncs cost it, but
 * those take it longer: 128 fdatasyncs at once through libuv's four threads already wait longer
 * than one syncfs.
 */
const SYNCFS_FROM = 128;
/** The most the machine may hold unwritten (Dirty + Writeback) for a syncfs to be taken. */
const SYNCFS_MAX_UNWRITTEN_BYTES = 64 * 1024 * 1024;

export interface FlushOptions {
  /** Default SYNCFS_FROM; Infinity never takes a syncfs. */
  syncfsFrom?: number;
  /** Default SYNCFS_MAX_UNWRITTEN_BYTES. */
  maxUnwrittenBytes?: number;
}

/**
 * Flushes `paths` (absolute, all on one filesystem) to disk; resolves with those flushed. A file
 * that is not there is not flushed (one that went meanwhile is the next read's concern); an
 * fdatasync that fails rejects. `limit` paces the fdatasyncs.
 */
export async function flushFiles(
  paths: readonly string[],
  limit: LimitFunction,
  options: FlushOptions = {},
): Promise<Set<string>> {
  const { syncfsFrom = SYNCFS_FROM, maxUnwrittenBytes = SYNCFS_MAX_UNWRITTEN_BYTES } = options;
  if (paths.length > 0 && paths.length >= syncfsFrom && unwrittenBytes() <= maxUnwrittenBytes) {
    const present = paths.filter((path) => existsSync(path));
    if (await syncFilesystemOf(paths[0]!)) return new Set(present);
  }
  const flushed = new Set<string>();
  await Promise.all(paths.map((path) => limit(async () => (await flush(path)) && flushed.add(path))));
  return flushed;
}

/**
 * fdatasync of a file: false if it could not be opened. Callbacks, not a FileHandle: each
 * FileHandle costs the daemon's thread more than its three system calls do.
 */
function flush(abs: string): Promise<boolean> {
  return new Promise((resolve, reject) => {
    open(abs, 'r', (openErr, fd) => {
      if (openErr !== null) return resolve(false);
      fdatasync(fd, (syncErr) => close(fd, () => (syncErr === null ? resolve(true) : reject(syncErr))));
    });
  });
}

/**
 * Writeback started without waiting for it: one `sync -f` at a time, and one more once it ends
 * if asked for meanwhile. It only makes a later syncfs (the take-over's at complete) shorter;
 * what it fails to write, that one writes or reports.
 */
export class BackgroundWriteback {
  private running = false;
  private again: string | undefined;

  /** `allowed`: whether one may start now (asked when one would); `sync`: the tests' stand-in. */
  constructor(
    private readonly allowed: () => boolean,
    private readonly sync: (path: string) => Promise<boolean> = syncFilesystemOf,
  ) {}

  /** Starts the writeback of the filesystem of `path`, or asks for one after the one under way. */
  request(path: string): void {
    if (this.running) {
      this.again = path;
      return;
    }
    if (!this.allowed()) return;
    this.running = true;
    void this.sync(path).finally(() => {
      this.running = false;
      const again = this.again;
      this.again = undefined;
      if (again !== undefined) this.request(again);
    });
  }
}

/** Dirty + Writeback of /proc/meminfo in bytes; Infinity where it cannot be read. */
function unwrittenBytes(): number {
  let meminfo: string;
  try {
    meminfo = readFileSync('/proc/meminfo', 'latin1');
  } catch {
    return Infinity;
  }
  const kB = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB$`, 'm').exec(meminfo)?.[1] ?? NaN);
  const total = (kB('Dirty') + kB('Writeback')) * 1024;
  return Number.isFinite(total) ? total : Infinity;
}

/**
 * `sync -f` on the folder of `path`: syncfs(2), whose success (Linux ≥ 5.8) also says no
 * writeback on the filesystem failed unseen. False if it could not run or failed: the caller
 * then flushes file by file, which reports what failed.
 */
function syncFilesystemOf(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const child = spawnIsolated('sync', ['-f', dirname(path)], { stdio: 'ignore' });
    child.once('error', () => resolve(false));
    child.once('exit', (code) => resolve(code === 0));
  });
}
