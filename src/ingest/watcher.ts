/**
 * The landing zone as the ingest and the API see it: per open request, how many files and bytes
 * have arrived, when the folder last changed, and whether rsync temp files (a transfer mid-file)
 * are present. The ingest asks it `waitForQuiet` before moving an upload out of the client's
 * reach.
 *
 * An open request costs nothing until data arrives: no filesystem watch per landing folder, no
 * scan of every upload at start or on a timer. Only uploads receiving data are followed, and
 * the rsync daemon says which (the pre-xfer gate's records of admitted transfers, one
 * `fs.watch` on their folder plus a poll): each is scanned while its transfer runs and once
 * after. Any other upload (a local copy, ssh) is scanned when someone asks (`progress`, its
 * walk shared for a few seconds by every asker: scan-cache.ts; `waitForQuiet`), by a directory
 * scan (upload-scan.ts).
 *
 * Times are change times (ctime), not mtimes: `rsync -t` sets each file's mtime to the source's,
 * so only ctime says when our disk last changed.
 */
import { watch, type FSWatcher } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { assertCapability } from './capability.js';
import { isErrno } from '../fs/errors.js';
import { silentLogger, type Logger } from '../logger.js';
import { ScanCache } from './scan-cache.js';
import { scanUpload, signatureOf, type UploadScan } from './upload-scan.js';
import type { DataLayout } from '../storage/layout.js';

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
   * progress; otherwise such a bag would never be quiet. Default 10 minutes; 0 when
   * `activeTransfers` knows every writer (our rsync's gate is closed): such a name is then just
   * a file, for validation to judge.
   */
  tempFileTimeoutMs?: number;
  /** Gives up after this long (resolving `timed-out`) however busy the upload still is. */
  timeoutMs?: number;
}

/** How a wait for quiet ended. */
export type QuietOutcome = 'quiet' | 'timed-out';

/**
 * How often `waitForQuiet` looks again while a transfer into the upload runs: every 10 ms for the
 * first quarter second (at complete our rsync is usually ending, its post-transfer hook still
 * running; a look is a readdir and a signal 0 to rsync), then every 50 ms.
 */
const ACTIVE_POLL_SOON_MS = 10;
const ACTIVE_POLL_SOON_FOR_MS = 250;
const ACTIVE_POLL_MS = 50;

export interface LandingWatcherOptions {
  logger?: Logger;
  /** Least time between two scans of an upload being received; default 1 s. */
  minScanIntervalMs?: number;
  /**
   * How long the walk of an upload nobody follows answers `progress`, whoever asks (longer for
   * a walk that took more than a quarter of it); default three times `minScanIntervalMs`.
   */
  progressMaxAgeMs?: number;
  /**
   * The uploads receiving data: the capabilities of the transfers our rsync daemon admitted and
   * that still run, and the folder where the gate records them (watched for prompt notice). Without
   * it (uploads over ssh) no upload is followed; each is scanned when asked.
   */
  transfers?: { dir: string; live: () => Promise<string[]>; pollMs?: number };
}

interface Followed {
  scan?: UploadScan;
  scannedAt: number;
  lastScanDurationMs: number;
  timer?: NodeJS.Timeout | undefined;
  scanning?: Promise<void> | undefined;
  /** False once its transfer ended: one more scan, then it is no longer followed. */
  live: boolean;
}

export class LandingWatcher {
  private readonly landing: string;
  private readonly logger: Logger;
  private readonly minScanIntervalMs: number;
  private readonly transfers: LandingWatcherOptions['transfers'];
  private readonly followed = new Map<string, Followed>();
  private readonly asked: ScanCache<UploadScan | undefined>;
  private walks = 0;
  private dirWatch: FSWatcher | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private polling: Promise<void> | undefined;
  private pollAgain = false;
  private started = false;

  /** Follows `layout.landing`, made by `DataLayout.ensure()`. */
  constructor(layout: Pick<DataLayout, 'landing'>, options: LandingWatcherOptions = {}) {
    this.landing = layout.landing;
    this.logger = options.logger ?? silentLogger;
    this.minScanIntervalMs = options.minScanIntervalMs ?? 1_000;
    this.transfers = options.transfers;
    this.asked = new ScanCache(
      (capability) => this.walkIfThere(capability),
      options.progressMaxAgeMs ?? 3 * this.minScanIntervalMs,
    );
  }

  /** Walks of upload folders made so far, for whatever reason (a metric). */
  get scans(): number {
    return this.walks;
  }

  private walk(capability: string): Promise<UploadScan> {
    this.walks += 1;
    return scanUpload(join(this.landing, capability));
  }

  private async walkIfThere(capability: string): Promise<UploadScan | undefined> {
    try {
      return await this.walk(capability);
    } catch (err) {
      if (isErrno(err, 'ENOENT') || isErrno(err, 'ENOTDIR')) return undefined;
      throw err;
    }
  }

  /** Starts following the uploads the rsync daemon is receiving; reads no landing folder. */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    const transfers = this.transfers;
    if (transfers === undefined) return;
    try {
      this.dirWatch = watch(transfers.dir, () => void this.poll());
      this.dirWatch.on('error', (err) =>
        this.logger.warn({ err }, 'transfer records: fs.watch failed; polling only'),
      );
    } catch (err) {
      this.logger.warn({ err }, 'transfer records: fs.watch unavailable; polling only');
    }
    this.pollTimer = setInterval(() => void this.poll(), transfers.pollMs ?? 1_000);
    this.pollTimer.unref();
    await this.poll();
  }

  async stop(): Promise<void> {
    this.started = false;
    clearInterval(this.pollTimer);
    this.pollTimer = undefined;
    this.dirWatch?.close();
    this.dirWatch = undefined;
    await this.polling;
    const scans: Promise<void>[] = [];
    for (const followed of this.followed.values()) {
      clearTimeout(followed.timer);
      if (followed.scanning) scans.push(followed.scanning);
    }
    await Promise.all(scans);
    this.followed.clear();
  }

  /** The uploads followed now (receiving data, or just finished): capabilities. */
  following(): string[] {
    return [...this.followed.keys()];
  }

  /**
   * The upload's numbers: a followed upload's latest scan, or a scan made now; undefined when
   * the capability has no folder. Throws at once for anything that is not a capability.
   */
  progress(capability: string): Promise<UploadProgress | undefined> {
    assertCapability(capability);
    return this.progressOf(capability);
  }

  private async progressOf(capability: string): Promise<UploadProgress | undefined> {
    const followed = this.followed.get(capability);
    let scan = followed?.scan;
    if (scan === undefined || Date.now() - (followed?.scannedAt ?? 0) > this.minScanIntervalMs) {
      scan = await this.asked.get(capability);
      if (scan === undefined) return undefined;
    }
    const { files, bytes, tempFiles, lastWriteMs } = scan;
    return { files, bytes, tempFiles, lastWriteAt: lastWriteMs };
  }

  /**
   * Resolves once a fresh scan shows no temp file, `activeTransfers()` is 0, and nothing has
   * changed for `quietMs` (by ctime, or by a difference between two scans),
   * or nothing has changed on disk since our rsync's last transfer into it ended.
   * Resolves at once if the folder does not exist (nothing can be written to it then: the
   * gate admits only existing folders), and with `timed-out` once `timeoutMs` has passed.
   * Rejects when `signal` aborts.
   */
  async waitForQuiet(capability: string, options: QuietOptions): Promise<QuietOutcome> {
    assertCapability(capability);
    const { quietMs, signal } = options;
    const pollMs = options.pollMs ?? Math.min(1_000, Math.max(50, quietMs / 4));
    const tempFileTimeoutMs = options.tempFileTimeoutMs ?? 600_000;
    const deadline = Date.now() + (options.timeoutMs ?? Infinity);
    const pause = (ms: number) =>
      sleep(Math.max(0, Math.min(ms, deadline - Date.now())), undefined, { signal });
    let signature: string | undefined;
    let changedAt = -Infinity;
    const began = Date.now();
    for (;;) {
      signal?.throwIfAborted();
      if (Date.now() >= deadline) return 'timed-out';
      // While rsync still writes (or runs its post-xfer hook), a scan says nothing new.
      if ((await options.activeTransfers()) > 0) {
        const soon = Date.now() - began < ACTIVE_POLL_SOON_FOR_MS;
        await pause(Math.min(pollMs, soon ? ACTIVE_POLL_SOON_MS : ACTIVE_POLL_MS));
        continue;
      }
      let scan: UploadScan;
      try {
        scan = await this.walk(capability);
      } catch (err) {
        if (isErrno(err, 'ENOENT')) return 'quiet';
        throw err;
      }
      // A transfer that began during the scan: wait for it as above.
      if ((await options.activeTransfers()) > 0) continue;
      const now = Date.now();
      const current = signatureOf(scan);
      if (signature !== undefined && current !== signature) changedAt = now;
      signature = current;
      // A change time in the future (clock stepped back) says nothing; scan differences still do.
      const lastWrite = Math.max(changedAt, scan.lastWriteMs <= now ? scan.lastWriteMs : -Infinity);
      const tempInProgress = scan.tempFiles > 0 && now - scan.lastTempWriteMs < tempFileTimeoutMs;
      if (!tempInProgress && now - lastWrite >= quietMs) return 'quiet';
      if (!tempInProgress && changedAt === -Infinity && options.lastTransferEndedAt) {
        // Only the disk's own change times count here: event and scan times are taken later.
        const endedAt = await options.lastTransferEndedAt();
        if (endedAt !== undefined && scan.lastWriteMs <= endedAt) return 'quiet';
      }
      await pause(pollMs);
    }
  }

  /** Looks at which transfers run: new ones are followed, ended ones get a last scan. Never rejects: a failure is logged. */
  private poll(): Promise<void> {
    if (this.polling) {
      this.pollAgain = true;
      return this.polling;
    }
    this.polling = (async () => {
      try {
        do {
          this.pollAgain = false;
          const live = new Set(await this.transfers!.live());
          if (!this.started) return;
          for (const capability of live) {
            const followed = this.followed.get(capability);
            if (followed === undefined) {
              this.asked.forget(capability);
              this.followed.set(capability, { scannedAt: 0, lastScanDurationMs: 0, live: true });
              this.scheduleScan(capability);
            } else followed.live = true;
          }
          for (const [capability, followed] of this.followed) {
            if (live.has(capability) || !followed.live) continue;
            followed.live = false;
            this.asked.forget(capability);
            this.scheduleScan(capability);
          }
        } while (this.pollAgain && this.started);
      } catch (err) {
        this.logger.warn({ err }, 'could not read the active transfers');
      } finally {
        this.polling = undefined;
      }
    })();
    return this.polling;
  }

  /** A scan soon, but not more often than the interval (longer if scans are slow). */
  private scheduleScan(capability: string): void {
    const followed = this.followed.get(capability);
    if (
      !this.started ||
      followed === undefined ||
      followed.timer !== undefined ||
      followed.scanning !== undefined
    )
      return;
    const interval = Math.max(this.minScanIntervalMs, 4 * followed.lastScanDurationMs);
    const delay = followed.live ? Math.max(0, followed.scannedAt + interval - Date.now()) : 0;
    followed.timer = setTimeout(() => {
      followed.timer = undefined;
      followed.scanning = this.scan(capability, followed).finally(() => {
        followed.scanning = undefined;
        // Followed while its transfer runs; after the last scan of an ended one, forgotten.
        if (followed.live) this.scheduleScan(capability);
        else if (this.followed.get(capability) === followed) this.followed.delete(capability);
      });
    }, delay);
  }

  private async scan(capability: string, followed: Followed): Promise<void> {
    const started = Date.now();
    try {
      followed.scan = await this.walk(capability);
    } catch (err) {
      if (isErrno(err, 'ENOENT') || isErrno(err, 'ENOTDIR')) followed.live = false;
      else this.logger.warn({ err, capability }, 'landing scan failed');
    } finally {
      followed.scannedAt = Date.now();
      followed.lastScanDurationMs = followed.scannedAt - started;
    }
  }
}
