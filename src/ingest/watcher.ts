/**
 * Watches the landing zone: per open request, how many files and bytes have arrived, when the
 * folder last changed, and whether rsync temp files (a transfer mid-file) are present. The
 * ingest asks it `waitForQuiet` before moving an upload out of the client's reach.
 *
 * chokidar misses files when many are created in a burst (`cp -r`: 5–16 of 500, see
 * research/toolchain.md §3), so its events are only hints: each one schedules a directory scan
 * of that upload, and the numbers come from the scans. Only `landing/` is watched (chokidar 5
 * spends one inotify watch per file), never staging or storage.
 *
 * Times are change times (ctime), not mtimes: `rsync -t` sets each file's mtime to the source's,
 * so only ctime says when our disk last changed.
 */
import { watch, type FSWatcher } from 'chokidar';
import type { Dirent } from 'node:fs';
import { lstat, mkdir, readdir } from 'node:fs/promises';
import { join, relative, resolve, sep } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { assertCapability, isCapability } from './capability.js';
import { isErrno } from '../fs/errors.js';
import { silentLogger, type Logger } from '../logger.js';

/** rsync's temp file for `name` while it is being received: `.name.XXXXXX`. */
const RSYNC_TEMP_FILE = /^\..+\.[A-Za-z0-9]{6}$/;

export function isRsyncTempFile(name: string): boolean {
  return RSYNC_TEMP_FILE.test(name);
}

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

/** Where an upload stands, as `LandingWatcher.progress` reports it. */
export interface UploadProgress {
  files: number;
  bytes: number;
  /** Epoch ms of the last change seen, by scan or by watcher event. */
  lastWriteAt: number;
  tempFiles: number;
}

export interface QuietOptions {
  /** How long nothing may have changed. */
  quietMs: number;
  /** Transfers into this upload the rsync gate admitted and that have not ended. */
  activeTransfers: () => Promise<number>;
  /**
   * When the last transfer into this upload through our rsync daemon ended (epoch ms), if any.
   * With none running, no temp file, and nothing on disk changed after it, the upload is
   * complete at once: rsync has said so, and waiting `quietMs` would only add latency.
   */
  lastTransferEndedAt?: () => Promise<number | undefined>;
  signal?: AbortSignal;
  /** Time between scans; default quietMs / 4, between 50 ms and 1 s. */
  pollMs?: number;
  /**
   * A temp-file name that has not changed for this long, with no transfer running, is taken to
   * be an ordinary file that merely looks like one (`.notes.backup`), not a transfer in
   * progress; otherwise such a bag would never be quiet. Default 10 minutes.
   */
  tempFileTimeoutMs?: number;
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
  while (pending.length > 0) {
    const current = pending.pop() as string;
    let entries: Dirent[];
    try {
      entries = await readdir(current, { withFileTypes: true });
    } catch (err) {
      if (isErrno(err, 'ENOENT') || isErrno(err, 'ENOTDIR')) continue;
      throw err;
    }
    for (let i = 0; i < entries.length; i += 64) {
      await Promise.all(
        entries.slice(i, i + 64).map(async (entry) => {
          const path = join(current, entry.name);
          let st;
          try {
            st = await lstat(path);
          } catch (err) {
            if (isErrno(err, 'ENOENT')) return;
            throw err;
          }
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
        }),
      );
    }
  }
  return scan;
}

export interface LandingWatcherOptions {
  logger?: Logger;
  /** Least time between two scans of one upload while events arrive. Default 1 s. */
  minScanIntervalMs?: number;
  /** Every upload is rescanned this often even without events. Default 60 s. */
  rescanMs?: number;
}

interface Tracked {
  scan?: UploadScan;
  /** Signature of the last scan, to notice whether anything changed between two scans. */
  signature?: string;
  lastEventAt: number;
  lastScanAt: number;
  lastScanDurationMs: number;
  timer?: NodeJS.Timeout | undefined;
  scanning?: Promise<void> | undefined;
  rescan: boolean;
}

/** How often `waitForQuiet` looks again while a transfer into the upload runs. */
const ACTIVE_POLL_MS = 50;

/** Debounce for a burst of events: the first scan waits this long for more to arrive. */
const BURST_MS = 150;

export class LandingWatcher {
  private readonly landing: string;
  private readonly logger: Logger;
  private readonly minScanIntervalMs: number;
  private readonly rescanMs: number;
  private readonly uploads = new Map<string, Tracked>();
  private watcher: FSWatcher | undefined;
  private rescanTimer: NodeJS.Timeout | undefined;
  private ready = false;
  private stopped = false;

  /** `landingRoot` is `<dataDir>/landing` (`landingLayout(dataDir).landing`). */
  constructor(landingRoot: string, options: LandingWatcherOptions = {}) {
    this.landing = resolve(landingRoot);
    this.logger = options.logger ?? silentLogger;
    this.minScanIntervalMs = options.minScanIntervalMs ?? 1_000;
    this.rescanMs = options.rescanMs ?? 60_000;
  }

  /** Watches `landing/` and scans every upload already there; resolves when both are done. */
  async start(): Promise<void> {
    if (this.watcher) return;
    this.stopped = false;
    await mkdir(this.landing, { recursive: true, mode: 0o700 });
    const watcher = watch(this.landing, {
      ignoreInitial: false,
      alwaysStat: true,
      persistent: true,
      ignorePermissionErrors: true,
    });
    this.watcher = watcher;
    watcher.on('all', (_event, path) => this.onEvent(path));
    watcher.on('error', (err) => this.logger.warn({ err }, 'landing watcher error'));
    await new Promise<void>((resolve) => watcher.once('ready', () => resolve()));
    this.ready = true;
    // One upload after another: at start-up the disk is busy enough with chokidar's own walk.
    for (const cap of (await readdir(this.landing)).filter(isCapability)) await this.scanNow(cap);
    this.rescanTimer = setInterval(() => {
      for (const cap of this.uploads.keys()) this.scheduleScan(cap);
    }, this.rescanMs);
    this.rescanTimer.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.ready = false;
    clearInterval(this.rescanTimer);
    this.rescanTimer = undefined;
    const watcher = this.watcher;
    this.watcher = undefined;
    await watcher?.close();
    const scans: Promise<void>[] = [];
    for (const tracked of this.uploads.values()) {
      clearTimeout(tracked.timer);
      if (tracked.scanning) scans.push(tracked.scanning);
    }
    await Promise.all(scans);
    this.uploads.clear();
  }

  /** The upload's numbers as of the last scan; undefined for a capability with no folder. */
  progress(capability: string): UploadProgress | undefined {
    assertCapability(capability);
    const tracked = this.uploads.get(capability);
    if (!tracked?.scan) return undefined;
    const { files, bytes, tempFiles, lastWriteMs } = tracked.scan;
    return { files, bytes, tempFiles, lastWriteAt: Math.max(lastWriteMs, tracked.lastEventAt) };
  }

  /**
   * Resolves once a fresh scan shows no temp file, `activeTransfers()` is 0, and nothing has
   * changed for `quietMs` (by ctime, by a difference between two scans, or by a watcher event),
   * or nothing has changed on disk since our rsync's last transfer into it ended.
   * Resolves at once if the folder does not exist (nothing can be written to it then: the
   * gate admits only existing folders). Rejects when `signal` aborts.
   */
  async waitForQuiet(capability: string, options: QuietOptions): Promise<void> {
    assertCapability(capability);
    const dir = join(this.landing, capability);
    const { quietMs, signal } = options;
    const pollMs = options.pollMs ?? Math.min(1_000, Math.max(50, quietMs / 4));
    const tempFileTimeoutMs = options.tempFileTimeoutMs ?? 600_000;
    let signature: string | undefined;
    let changedAt = -Infinity;
    for (;;) {
      signal?.throwIfAborted();
      // While rsync still writes (or runs its post-xfer hook), a scan says nothing new.
      if ((await options.activeTransfers()) > 0) {
        await sleep(Math.min(pollMs, ACTIVE_POLL_MS), undefined, { signal });
        continue;
      }
      let scan: UploadScan;
      try {
        scan = await scanUpload(dir);
      } catch (err) {
        if (isErrno(err, 'ENOENT')) return;
        throw err;
      }
      // A transfer that began during the scan: wait for it as above.
      if ((await options.activeTransfers()) > 0) continue;
      const now = Date.now();
      const current = signatureOf(scan);
      if (signature !== undefined && current !== signature) changedAt = now;
      signature = current;
      if (this.watcher) this.record(capability, scan);
      // A change time in the future (clock stepped back) says nothing; scan differences still do.
      const lastWrite = Math.max(
        changedAt,
        this.uploads.get(capability)?.lastEventAt ?? -Infinity,
        scan.lastWriteMs <= now ? scan.lastWriteMs : -Infinity,
      );
      const tempInProgress = scan.tempFiles > 0 && now - scan.lastTempWriteMs < tempFileTimeoutMs;
      if (!tempInProgress && now - lastWrite >= quietMs) return;
      if (scan.tempFiles === 0 && changedAt === -Infinity && options.lastTransferEndedAt) {
        // Only the disk's own change times count here: event and scan times are taken later.
        const endedAt = await options.lastTransferEndedAt();
        if (endedAt !== undefined && scan.lastWriteMs <= endedAt) return;
      }
      await sleep(pollMs, undefined, { signal });
    }
  }

  private onEvent(path: string): void {
    if (this.stopped) return;
    const rel = relative(this.landing, path);
    const capability = rel.split(sep)[0];
    if (!isCapability(capability)) return;
    const tracked = this.track(capability);
    // Events of chokidar's initial walk are old news; the scan after 'ready' has their times.
    if (this.ready) tracked.lastEventAt = Date.now();
    this.scheduleScan(capability);
  }

  private track(capability: string): Tracked {
    let tracked = this.uploads.get(capability);
    if (!tracked) {
      tracked = { lastEventAt: -Infinity, lastScanAt: 0, lastScanDurationMs: 0, rescan: false };
      this.uploads.set(capability, tracked);
    }
    return tracked;
  }

  /** A scan soon, but not more often than the interval (longer if scans are slow). */
  private scheduleScan(capability: string): void {
    if (this.stopped) return;
    const tracked = this.track(capability);
    if (tracked.scanning) {
      tracked.rescan = true;
      return;
    }
    if (tracked.timer) return;
    const interval = Math.max(this.minScanIntervalMs, 4 * tracked.lastScanDurationMs);
    const delay = Math.max(BURST_MS, tracked.lastScanAt + interval - Date.now());
    tracked.timer = setTimeout(() => {
      tracked.timer = undefined;
      void this.scanNow(capability);
    }, delay);
  }

  private scanNow(capability: string): Promise<void> {
    const tracked = this.track(capability);
    if (tracked.scanning) {
      tracked.rescan = true;
      return tracked.scanning;
    }
    tracked.rescan = false;
    const started = Date.now();
    tracked.scanning = (async () => {
      let changed = false;
      try {
        const scan = await scanUpload(join(this.landing, capability));
        changed = this.record(capability, scan);
      } catch (err) {
        if (isErrno(err, 'ENOENT')) {
          // The folder is gone (staged, or removed): nothing left to follow.
          clearTimeout(tracked.timer);
          this.uploads.delete(capability);
          return;
        }
        this.logger.warn({ err, capability }, 'landing scan failed');
      } finally {
        tracked.scanning = undefined;
        tracked.lastScanAt = Date.now();
        tracked.lastScanDurationMs = tracked.lastScanAt - started;
      }
      // Missed events are possible, so keep scanning while scans still see changes.
      if ((tracked.rescan || changed) && this.uploads.get(capability) === tracked) {
        this.scheduleScan(capability);
      }
    })();
    return tracked.scanning;
  }

  /** Stores a scan; true if it differs from the previous one. */
  private record(capability: string, scan: UploadScan): boolean {
    const tracked = this.track(capability);
    const signature = signatureOf(scan);
    const changed = tracked.signature !== undefined && tracked.signature !== signature;
    tracked.scan = scan;
    tracked.signature = signature;
    return changed;
  }
}

function signatureOf(scan: UploadScan): string {
  return [scan.files, scan.bytes, scan.directories, scan.tempFiles, scan.lastWriteMs, scan.lastTempWriteMs].join(':');
}

