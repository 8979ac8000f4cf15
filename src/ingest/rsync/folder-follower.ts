/**
 * Following a folder that rsync's hooks write records into: an `fs.watch` on it plus a poll (a
 * watch alone misses events), each change running one pass over the folder; concurrent calls
 * share the pass under way plus one more. What a pass reads is its owner's (transfer-log.ts,
 * landed-log.ts).
 */
import { watch, type FSWatcher } from 'node:fs';
import type { Logger } from '../../logger.js';

export interface FolderFollowerOptions {
  dir: string;
  pollMs: number;
  logger: Logger;
  /** What the folder holds, for log lines ("transfer records"). */
  what: string;
  /** One pass over the folder. */
  pass: () => Promise<void>;
  /** Whether another pass asked for meanwhile is still wanted (default: while started). */
  wanted?: () => boolean;
}

export class FolderFollower {
  private watcher: FSWatcher | undefined;
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> | undefined;
  private sweepAgain = false;
  private started = false;

  constructor(private readonly o: FolderFollowerOptions) {}

  get running(): boolean {
    return this.started;
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    const { logger, what } = this.o;
    try {
      this.watcher = watch(this.o.dir, () => void this.sweep());
      this.watcher.on('error', (err) => logger.warn({ err }, `${what}: fs.watch failed; polling only`));
    } catch (err) {
      logger.warn({ err }, `${what}: fs.watch unavailable; polling only`);
    }
    this.timer = setInterval(() => void this.sweep(), this.o.pollMs);
    this.timer.unref();
    void this.sweep();
  }

  /** Stops following and waits for a pass in progress. */
  async stop(): Promise<void> {
    this.started = false;
    this.watcher?.close();
    this.watcher = undefined;
    clearInterval(this.timer);
    this.timer = undefined;
    await this.sweeping;
  }

  /** Runs a pass now; concurrent calls share one pass (plus one more). */
  sweep(): Promise<void> {
    if (this.sweeping) {
      this.sweepAgain = true;
      return this.sweeping;
    }
    const wanted = this.o.wanted ?? (() => this.started);
    this.sweeping = (async () => {
      try {
        do {
          this.sweepAgain = false;
          await this.o.pass();
        } while (this.sweepAgain && wanted());
      } catch (err) {
        this.o.logger.error({ err }, `${this.o.what} could not be read`);
      } finally {
        this.sweeping = undefined;
      }
    })();
    return this.sweeping;
  }
}
