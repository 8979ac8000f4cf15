/**
 * The files rsync received, as each connection's rsync logs them (`transfer logging` in
 * rsyncd.conf, one log per connection under `<dataDir>/rsyncd/landed/`): `LandedLog` reads the
 * logs as they grow and hands each received file to the listener, which resolves once it has
 * dealt with it (hashed and recorded it, or given up). A log goes only when its rsync has ended,
 * every line was read and every delivery resolved: after a crash the logs left are read again
 * from the start, so the listener must be idempotent.
 *
 * rsync writes a file's line when its data is in, just before it renames the temporary file into
 * place: the listener must not expect the file to be there at once.
 */
import { open, readdir, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { isCapability } from '../capability.js';
import { isErrno } from '../../fs/errors.js';
import { silentLogger, type Logger } from '../../logger.js';
import { FolderFollower } from './folder-follower.js';

/** A file an rsync received into an upload. */
export interface LandedFile {
  capability: string;
  /** Its path in the upload, '/'-separated. */
  path: string;
  /** Its length as rsync received it. */
  size: number;
}

export type LandedListener = (files: LandedFile[]) => Promise<void>;

/** Bytes read from a log at a time. */
const READ_BYTES = 256 * 1024;

interface LogState {
  offset: number;
  /** Deliveries not yet resolved. */
  pending: Set<Promise<void>>;
  /** A delivery failed: the log stays for the next start to read again. */
  keep: boolean;
}

export class LandedLog {
  private readonly pollMs: number;
  private readonly logger: Logger;
  private readonly logs = new Map<string, LogState>();
  /** Logs whose rsync still runs (started by this process). */
  private readonly writing = new Set<string>();
  private listener: LandedListener | undefined;
  private serial = 0;
  private readonly follower: FolderFollower;

  constructor(
    private readonly dir: string,
    options: { pollMs?: number | undefined; logger?: Logger | undefined } = {},
  ) {
    this.pollMs = Math.min(options.pollMs ?? 500, 500);
    this.logger = options.logger ?? silentLogger;
    this.follower = new FolderFollower({
      dir,
      pollMs: this.pollMs,
      logger: this.logger,
      what: 'landed-file logs',
      pass: () => this.readAll(),
    });
  }

  /** The one listener (the landed hasher); without one, logs are kept unread. */
  onLanded(listener: LandedListener): void {
    this.listener = listener;
    if (this.follower.running) void this.sweep();
  }

  /** A name for the log of a connection about to start; call `ended` when its rsync exits. */
  open(): string {
    const name = `${Date.now()}-${process.pid}-${++this.serial}`;
    this.writing.add(name);
    return name;
  }

  /** The connection's rsync has exited: its log is complete. */
  ended(name: string): void {
    if (this.writing.delete(name)) void this.sweep();
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

  private async readAll(): Promise<void> {
    const listener = this.listener;
    if (listener === undefined || !this.follower.running) return;
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch (err) {
      if (isErrno(err, 'ENOENT')) return;
      throw err;
    }
    for (const name of names.filter((n) => /^\d+-\d+-\d+$/.test(n)).sort()) {
      let state = this.logs.get(name);
      if (state === undefined) this.logs.set(name, (state = { offset: 0, pending: new Set(), keep: false }));
      // Whether its rsync had ended before this read: then the read sees its last line.
      const complete = !this.writing.has(name);
      const files = await this.readFrom(join(this.dir, name), state);
      if (files.length > 0) {
        const delivery = listener(files).catch((err: unknown) => {
          state.keep = true;
          this.logger.warn(
            { err, log: name },
            'landed files were not all hashed; the rest are hashed at complete',
          );
        });
        state.pending.add(delivery);
        void delivery.then(() => state.pending.delete(delivery));
      }
      if (complete && state.pending.size === 0 && !state.keep) {
        await unlink(join(this.dir, name)).catch(() => undefined);
        this.logs.delete(name);
      } else if (complete && !state.keep) {
        void Promise.all(state.pending).then(() => this.sweep());
      }
    }
  }

  /** The received files in the complete lines after `state.offset`; moves the offset past them. */
  private async readFrom(file: string, state: LogState): Promise<LandedFile[]> {
    let handle;
    try {
      handle = await open(file, 'r');
    } catch (err) {
      if (isErrno(err, 'ENOENT')) return [];
      throw err;
    }
    const files: LandedFile[] = [];
    try {
      const buffer = Buffer.allocUnsafe(READ_BYTES);
      let carry = Buffer.alloc(0);
      for (;;) {
        const { bytesRead } = await handle.read(buffer, 0, buffer.length, state.offset + carry.length);
        if (bytesRead === 0) break;
        const chunk = Buffer.concat([carry, buffer.subarray(0, bytesRead)]);
        const end = chunk.lastIndexOf(0x0a);
        if (end < 0) {
          carry = chunk;
          continue;
        }
        for (const line of chunk.subarray(0, end).toString('latin1').split('\n')) {
          const landed = parseLandedLine(line);
          if (landed !== undefined) files.push(landed);
        }
        state.offset += end + 1;
        carry = Buffer.from(chunk.subarray(end + 1));
      }
    } finally {
      await handle.close();
    }
    return files;
  }
}

/**
 * One line of a connection's log (read as latin1, one char per byte), in the format of
 * config.ts's LANDED_FORMAT after rsync's "date time [pid] " prefix; undefined unless it reports
 * a regular file whose data was received. rsync writes a byte it will not print as `\#ooo`.
 */
export function parseLandedLine(line: string): LandedFile | undefined {
  const match = /^\S+ \S+ \[\d+\] landed\|([^|]*)\|(\d+)\|(.+)$/.exec(line);
  if (!match || !match[1]!.startsWith('>f')) return undefined;
  const raw = match[3]!.replace(/\\#([0-7]{3})/g, (_, octal: string) =>
    String.fromCharCode(parseInt(octal, 8)),
  );
  const full = Buffer.from(raw, 'latin1').toString('utf8');
  const slash = full.indexOf('/');
  if (slash <= 0) return undefined;
  const capability = full.slice(0, slash);
  const path = full.slice(slash + 1);
  if (
    !isCapability(capability) ||
    path === '' ||
    path.split('/').some((s) => s === '' || s === '.' || s === '..')
  )
    return undefined;
  return { capability, path, size: Number(match[2]) };
}
