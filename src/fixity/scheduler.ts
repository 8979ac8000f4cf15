/**
 * Which worker runs which job, and when. Jobs wait in two FIFO queues, ingest before audit, and
 * go to the least-loaded worker, up to PREFETCH per worker: a small file hashes faster than a
 * message crosses threads, so a worker must have the next jobs at hand. When a worker runs dry
 * while others still hold jobs they have not started, those are taken back and shared out again
 * (all of them from a worker on a long file, which then gets no more until it finishes it; half
 * from one working through small files). Ingest jobs have their own budget per worker: a worker
 * runs them before its waiting audit jobs, and inside a running one, between two of its chunks.
 *
 * It keeps the queues and each worker's share; it posts no messages (the pool posts what it
 * decides), starts no workers and settles no jobs.
 */
import { JobQueue } from './job-queue.js';
import type { Job, WorkerSlot } from './jobs.js';
import type { Priority } from './types.js';

/**
 * Jobs per worker, running and waiting in its local queue: a small file hashes in less time than
 * a message takes to cross threads, so a worker needs many at hand to stay busy (the figures:
 * docs/performance.md, "Fixity").
 */
const PREFETCH = 64;

export class Scheduler {
  private readonly ingestQueue = new JobQueue<Job>();
  private readonly auditQueue = new JobQueue<Job>();
  /** Jobs waiting for a worker (an aborted one stops counting at once, though hand skips it later). */
  queued = 0;
  /** Jobs handed to a worker and not released yet. */
  outstanding = 0;

  /**
   * @param slots the pool's workers; the pool replaces and removes them as they exit.
   * @param preemption whether an ingest job may run nested in an audit job (see pickWorker).
   */
  constructor(
    private readonly slots: readonly WorkerSlot[],
    private readonly preemption: boolean,
  ) {}

  enqueue(job: Job): void {
    this.queueOf(job.priority).push(job);
    this.queued++;
  }

  /** A queued job was settled (aborted); it stays in its queue until hand skips it. */
  settledWhileQueued(): void {
    this.queued--;
  }

  /** Empties both queues (the pool is closing or broken), ingest first. */
  takeAllQueued(): Job[] {
    const all = [...this.ingestQueue.takeAll(), ...this.auditQueue.takeAll()];
    this.queued = 0;
    return all;
  }

  /** Hands queued jobs to workers with room, ingest first; returns each worker's new jobs, in order. */
  hand(): Map<WorkerSlot, Job[]> {
    const handed = new Map<WorkerSlot, Job[]>();
    for (const priority of ['ingest', 'audit'] as const) {
      const queue = this.queueOf(priority);
      while (queue.length > 0) {
        const slot = this.pickWorker(priority);
        if (!slot) break;
        const job = queue.shift()!;
        if (job.settled) continue;
        this.assign(job, slot);
        const jobs = handed.get(slot);
        if (jobs) jobs.push(job);
        else handed.set(slot, [job]);
      }
    }
    return handed;
  }

  /** The worker no longer holds the job. */
  release(slot: WorkerSlot, job: Job): void {
    if (!slot.jobs.delete(job.id)) return;
    this.outstanding--;
    if (job.priority === 'ingest') slot.ingestJobs--;
  }

  /**
   * Nothing is queued but a worker is idle: the workers holding jobs they have not started yet,
   * to be asked for them back (marked as asked, so each is asked once until it answers).
   */
  rebalance(): WorkerSlot[] {
    if (this.queued > 0 || !this.slots.some((slot) => slot.jobs.size === 0)) return [];
    const asked: WorkerSlot[] = [];
    for (const slot of this.slots) {
      if (slot.jobs.size > 1 && !slot.askedBack) {
        slot.askedBack = true;
        asked.push(slot);
      }
    }
    return asked;
  }

  /** Jobs a worker handed back go to the front of their queues, in their old order. */
  takeBack(slot: WorkerSlot, ids: number[], onLongJob: boolean): void {
    slot.askedBack = false;
    slot.onLongJob = onLongJob;
    for (let i = ids.length - 1; i >= 0; i--) {
      const job = slot.jobs.get(ids[i]!);
      if (!job) continue;
      this.release(slot, job);
      if (job.settled) continue;
      delete job.slot;
      job.posted = false;
      this.queueOf(job.priority).unshift(job);
      this.queued++;
    }
  }

  private queueOf(priority: Priority): JobQueue<Job> {
    return priority === 'ingest' ? this.ingestQueue : this.auditQueue;
  }

  private assign(job: Job, slot: WorkerSlot): void {
    this.queued--;
    this.outstanding++;
    job.slot = slot;
    slot.jobs.set(job.id, job);
    if (job.priority === 'ingest') slot.ingestJobs++;
  }

  /**
   * Audit: the least-loaded worker with room. Ingest: the same, except that when preemption is on
   * ingest jobs have a budget of their own per worker (they run before, or inside, its audit jobs).
   */
  private pickWorker(priority: Priority): WorkerSlot | undefined {
    let best: WorkerSlot | undefined;
    let bestRank = Infinity;
    for (const slot of this.slots) {
      const load = slot.jobs.size;
      if (load === 0) return slot;
      let rank: number;
      if (priority === 'ingest' && this.preemption) {
        if (slot.ingestJobs >= PREFETCH) continue;
        rank = (slot.onLongJob ? 2 * PREFETCH : 0) + slot.ingestJobs + load / (4 * PREFETCH);
      } else {
        if (load >= PREFETCH || slot.onLongJob) continue;
        rank = load;
      }
      if (rank < bestRank) {
        best = slot;
        bestRank = rank;
      }
    }
    return best;
  }
}
