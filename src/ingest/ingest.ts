/**
 * The ingest worker: takes PENDING queue items, oldest first, and drives each through its stages
 * (stages.ts) to DONE or FAILED. The stage reached is recorded in the catalog, so after a crash
 * start-up resumes every PENDING item where it was; nothing stays PENDING.
 *
 * Waiting for a quiet upload holds no ingest slot: an upload still being written delays only its
 * own item (and the wait has a deadline). Each depositor may have `ingest.concurrency` items
 * waiting at once; the slots (`ingest.concurrency`) go to quiet items, the depositor with the
 * fewest items in a slot first, so one depositor's many bags do not shut out another's.
 *
 * While an upload of many files is made quiet, the thread that will check it starts
 * (`prepareCheck`), at most as many at once as there are slots: its start overlaps the wait
 * instead of following it. A small upload is checked on this thread (check-here.ts).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { QueueItem } from '../catalog/types.js';
import { ServiceLoop, type Service } from '../service/service.js';
import { CHECKED_HERE_MAX_ENTRIES, holdsAtMost } from './check-here.js';
import type { IngestDeps } from './deps.js';
import { prepareCheck, type PreparedCheck } from './isolated-check.js';
import { IngestStages } from './stages.js';

export type { IngestDeps } from './deps.js';

/** An item the worker holds, with the depositor who completed it. */
interface Held {
  user: string;
}

export class IngestWorker implements Service {
  /** Items in an ingest slot: staging, validating, storing. */
  private readonly running = new Map<number, Held>();
  /** Items waiting for their upload to be quiet (no slot). */
  private readonly waiting = new Map<number, Held>();
  /** Items whose upload is quiet (or that are past that stage), waiting for a slot. */
  private readonly ready = new Map<number, QueueItem>();
  /** Check workers started for items not in a slot yet, by item. */
  private readonly prepared = new Map<number, PreparedCheck>();
  private readonly loop: ServiceLoop;

  constructor(private readonly deps: IngestDeps) {
    this.loop = new ServiceLoop(
      'the ingest worker',
      async (signal) => this.fillSlots(signal),
      (err: unknown) => deps.logger.error({ err }, 'the ingest worker could not look for work'),
    );
  }

  /** Starts working: resumes every PENDING item, crashed ones included. */
  start(signal?: AbortSignal): void {
    this.loop.start(signal);
  }

  /** Looks for PENDING items not yet being worked on. */
  wake(): void {
    this.loop.wake();
  }

  private fillSlots(signal: AbortSignal): void {
    const stages = new IngestStages(this.deps, signal);
    const limit = this.deps.config.ingest.concurrency;
    for (const item of this.deps.catalog.queue.pending()) {
      if (this.ready.size >= limit) break; // enough to fill the slots; the rest at a later wake
      if (this.running.has(item.id) || this.waiting.has(item.id) || this.ready.has(item.id)) continue;
      if (item.stage !== 'waiting') this.ready.set(item.id, item);
      else if (heldBy(this.waiting, item.user) < limit)
        this.hold(this.waiting, item, this.awaitQuiet(stages, item));
    }
    while (this.running.size < limit) {
      const next = this.nextReady();
      if (next === undefined) break;
      this.ready.delete(next.id);
      this.hold(this.running, next, this.run(stages, next));
    }
    this.tellRunning(this.running.size);
  }

  /** Background work that yields to ingests (replica copies, hashing of landed files) hears how many run. */
  private tellRunning(count: number): void {
    this.deps.replication?.ingestsRunning(count);
    this.deps.landed?.ingestsRunning(count);
  }

  private hold(where: Map<number, Held>, item: QueueItem, work: Promise<void>): void {
    void this.loop.hold(
      work.finally(() => {
        where.delete(item.id);
        this.wake();
      }),
    );
    where.set(item.id, { user: item.user });
  }

  /** The oldest ready item of the depositor with the fewest items in a slot. */
  private nextReady(): QueueItem | undefined {
    let best: QueueItem | undefined;
    let bestLoad = Infinity;
    for (const item of this.ready.values()) {
      const load = heldBy(this.running, item.user);
      if (load < bestLoad || (load === bestLoad && best !== undefined && item.id < best.id)) {
        best = item;
        bestLoad = load;
      }
    }
    return best;
  }

  private async awaitQuiet(stages: IngestStages, item: QueueItem): Promise<void> {
    if (this.prepared.size < this.deps.config.ingest.concurrency && this.checkedInWorker(item))
      this.prepared.set(item.id, prepareCheck());
    let quiet = false;
    try {
      quiet = await stages.awaitQuiet(item);
      if (quiet) this.ready.set(item.id, item);
    } catch (err) {
      if (stages.signal.aborted) return; // resumed at the next start, where it waits again
      await this.retryLater(stages.signal, item, err);
    } finally {
      if (!quiet) this.dropPrepared(item.id);
    }
  }

  private async run(stages: IngestStages, item: QueueItem): Promise<void> {
    const prepared = this.prepared.get(item.id);
    this.prepared.delete(item.id);
    try {
      await stages.ingest(item, prepared);
    } catch (err) {
      if (stages.signal.aborted) return; // parked: resumed at next start from its recorded stage
      await this.retryLater(stages.signal, item, err);
    } finally {
      await prepared?.close();
    }
  }

  /** Whether the item's upload looks large enough now to be checked in a worker (check-here.ts). */
  private checkedInWorker(item: QueueItem): boolean {
    const pkg = this.deps.catalog.packages.get(item.bagId);
    if (pkg === undefined) return false;
    return !holdsAtMost(this.deps.landing.path(pkg.capability), CHECKED_HERE_MAX_ENTRIES);
  }

  private dropPrepared(id: number): void {
    const prepared = this.prepared.get(id);
    this.prepared.delete(id);
    void prepared?.close();
  }

  /**
   * The item could not even be failed (e.g. the catalog refused a write): try again later. It
   * stays held meanwhile, so wake() does not pick it again at once; a stop ends the wait (a
   * graceful shutdown must not hang on it).
   */
  private async retryLater(signal: AbortSignal, item: QueueItem, err: unknown): Promise<void> {
    this.deps.logger.error(
      { err, queueItem: item.id, bagId: item.bagId },
      'ingest could not record its outcome; retrying in 30 s',
    );
    this.loop.wakeIn(30_000);
    await sleep(30_000, undefined, { signal, ref: false }).catch(() => undefined);
  }

  /** Stops taking work and parks what is in flight (it resumes at the next start). */
  async stop(): Promise<void> {
    await this.loop.stop();
    for (const id of [...this.prepared.keys()]) this.dropPrepared(id);
    this.tellRunning(0);
  }
}

function heldBy(held: Map<number, Held>, user: string): number {
  let n = 0;
  for (const h of held.values()) if (h.user === user) n += 1;
  return n;
}
