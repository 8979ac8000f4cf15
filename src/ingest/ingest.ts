/**
 * The ingest worker: takes PENDING queue items, oldest first, a few at a time, and drives each
 * through its stages (stages.ts) to DONE or FAILED. The stage reached is recorded in the catalog,
 * so after a crash start-up resumes every PENDING item where it was; nothing stays PENDING.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { QueueItem } from '../catalog/types.js';
import type { IngestDeps } from './deps.js';
import { IngestStages } from './stages.js';

export type { IngestDeps } from './deps.js';


export class IngestWorker {
  private readonly running = new Map<number, Promise<void>>();
  private readonly stages: IngestStages;
  private readonly abort = new AbortController();
  private stopped = false;
  private retryTimer: NodeJS.Timeout | undefined;

  constructor(private readonly deps: IngestDeps) {
    this.stages = new IngestStages(deps, this.abort.signal);
  }

  /** Starts working: resumes every PENDING item, crashed ones included. */
  start(): void {
    this.wake();
  }

  /** Looks for PENDING items not yet being worked on. */
  wake(): void {
    if (this.stopped) return;
    const limit = this.deps.config.ingest.concurrency;
    for (const item of this.deps.catalog.queue.pending()) {
      if (this.running.size >= limit) break;
      if (this.running.has(item.id)) continue;
      const run = this.run(item).finally(() => {
        this.running.delete(item.id);
        this.wake();
      });
      this.running.set(item.id, run);
    }
  }

  /** Items being worked on now. */
  get active(): number {
    return this.running.size;
  }

  private async run(item: QueueItem): Promise<void> {
    try {
      await this.stages.ingest(item);
    } catch (err) {
      if (this.stopped) return; // parked: resumed at next start from its recorded stage
      // The item could not even be failed (e.g. the catalog refused a write): try again later.
      this.deps.logger.error({ err, queueItem: item.id, bagId: item.bagId }, 'ingest could not record its outcome; retrying in 30 s');
      clearTimeout(this.retryTimer);
      this.retryTimer = setTimeout(() => this.wake(), 30_000);
      this.retryTimer.unref();
      // The item stays "running" meanwhile, so wake() does not pick it again at once; a stop
      // ends the wait (a graceful shutdown must not hang on it).
      await sleep(30_000, undefined, { signal: this.abort.signal, ref: false }).catch(() => undefined);
    }
  }

  /** Stops taking work and parks what is in flight (it resumes at the next start). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    this.abort.abort();
    await Promise.allSettled([...this.running.values()]);
  }
}
