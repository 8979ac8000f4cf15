/**
 * Ended rsync transfers, as the post-xfer hook (`post-xfer.sh`) records them in
 * `<dataDir>/rsyncd/transfers/`: `TransferLog` delivers each record to the listeners and removes
 * it only once they have all taken it.
 */
import { readdir, readFile, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { isCapability } from '../capability.js';
import { isErrno } from '../../fs/errors.js';
import { silentLogger, type Logger } from '../../logger.js';
import { FolderFollower } from './folder-follower.js';

/** One ended rsync transfer into a landing folder, as the post-xfer hook recorded it. */
export interface Transfer {
  capability: string;
  /** rsync's exit status: 0 complete; 23/24 partial; 12, 20, 30, 35 broken off, etc. */
  exitStatus: number;
  /** Epoch milliseconds. */
  endedAt: number;
  /** The client's address, when rsync told us. */
  hostAddr?: string;
}

export type TransferListener = (transfer: Transfer) => void | Promise<void>;

/**
 * Delivers the post-xfer hook's transfer records to listeners, oldest first, and removes each
 * record only after every listener has resolved: a crash re-delivers, so listeners must be
 * idempotent. A record whose delivery failed is retried later.
 */
export class TransferLog {
  private readonly dir: string;
  private readonly pollMs: number;
  private readonly retryMs: number;
  private readonly logger: Logger;
  private readonly listeners = new Set<TransferListener>();
  private readonly failedAt = new Map<string, number>();
  private readonly follower: FolderFollower;

  constructor(
    dir: string,
    options: { pollMs?: number | undefined; retryMs?: number | undefined; logger?: Logger | undefined } = {},
  ) {
    this.dir = dir;
    this.pollMs = options.pollMs ?? 2_000;
    this.retryMs = options.retryMs ?? 30_000;
    this.logger = options.logger ?? silentLogger;
    this.follower = new FolderFollower({
      dir,
      pollMs: this.pollMs,
      logger: this.logger,
      what: 'transfer records',
      pass: () => this.deliverPending(),
      wanted: () => this.listeners.size > 0,
    });
  }

  onTransfer(listener: TransferListener): () => void {
    this.listeners.add(listener);
    if (this.follower.running) void this.sweep();
    return () => this.listeners.delete(listener);
  }

  start(): void {
    this.follower.start();
  }

  /** Stops following and waits for a pass in progress. */
  stop(): Promise<void> {
    return this.follower.stop();
  }

  /** Reads the folder now; concurrent calls share one pass (plus one more). */
  sweep(): Promise<void> {
    return this.follower.sweep();
  }

  private async deliverPending(): Promise<void> {
    if (this.listeners.size === 0) return;
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch (err) {
      if (isErrno(err, 'ENOENT')) return;
      throw err;
    }
    for (const name of names.filter((n) => /^\d+-\d+$/.test(n)).sort()) {
      const failed = this.failedAt.get(name);
      if (failed !== undefined && Date.now() - failed < this.retryMs) continue;
      const file = join(this.dir, name);
      let text: string;
      try {
        text = await readFile(file, 'utf8');
      } catch (err) {
        if (isErrno(err, 'ENOENT')) continue;
        throw err;
      }
      const transfer = parseTransferRecord(text);
      if (!transfer) {
        this.logger.warn({ record: name, text }, 'transfer record is malformed; dropped');
        await unlink(file).catch(() => {});
        continue;
      }
      try {
        for (const listener of [...this.listeners]) await listener(transfer);
      } catch (err) {
        this.failedAt.set(name, Date.now());
        this.logger.error(
          { err, record: name, capability: transfer.capability },
          'transfer listener failed; will retry',
        );
        continue;
      }
      this.failedAt.delete(name);
      await unlink(file).catch((err: unknown) => {
        if (!isErrno(err, 'ENOENT')) throw err;
      });
    }
  }
}

/**
 * When the latest transfer into `capability` ended, among the records in `dir` not yet
 * delivered; undefined when there is none.
 */
export async function latestPendingTransfer(dir: string, capability: string): Promise<number | undefined> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (err) {
    if (isErrno(err, 'ENOENT')) return undefined;
    throw err;
  }
  let latest: number | undefined;
  for (const name of names.filter((n) => /^\d+-\d+$/.test(n))) {
    const transfer = parseTransferRecord(await readFile(join(dir, name), 'utf8').catch(() => ''));
    if (transfer?.capability === capability) latest = Math.max(latest ?? 0, transfer.endedAt);
  }
  return latest;
}

/** Parses the post-xfer hook's `key=value` lines; undefined if a required key is missing. */
export function parseTransferRecord(text: string): Transfer | undefined {
  const fields = new Map<string, string>();
  for (const line of text.split('\n')) {
    const eq = line.indexOf('=');
    if (eq > 0) fields.set(line.slice(0, eq), line.slice(eq + 1).trim());
  }
  const capability = fields.get('capability');
  const exitStatus = Number(fields.get('exit_status') || NaN);
  const endedAt = Number(fields.get('ended_at') || NaN);
  if (!isCapability(capability) || !Number.isInteger(exitStatus) || !Number.isInteger(endedAt))
    return undefined;
  const hostAddr = fields.get('host_addr');
  return hostAddr ? { capability, exitStatus, endedAt, hostAddr } : { capability, exitStatus, endedAt };
}
