/**
 * The main-thread side of resumable jobs: the ResumeStore lives here, the hashing in a worker.
 * Before a resumable file job goes out, its checkpoint is loaded and sent with it; a checkpoint
 * the worker sends is saved, and the worker told when it may go on; once the file is hashed,
 * the checkpoint is cleared before the job resolves; the store hears where hashing started.
 *
 * It does not read or write checkpoints itself (that is the store, and checkpoint.ts in the
 * worker), nor choose workers or settle jobs: it asks its RelayHost.
 */
import { fileJobMessage, type FileJob, type WorkerSlot } from './jobs.js';
import type { ToWorker } from './protocol.js';
import type { ResumeStore } from './types.js';

const DEFAULT_CHECKPOINT_BYTES = 256 * 1024 * 1024;

/** What the relay needs of the pool. */
export interface RelayHost {
  post(slot: WorkerSlot, message: ToWorker): void;
  /** Rejects the job (its store failed), unless it is settled already. */
  fail(job: FileJob, err: unknown): void;
  /** The job's checkpoint would not load: it never reached its worker, and fails. */
  loadFailed(slot: WorkerSlot, job: FileJob, err: unknown): void;
}

export class ResumeRelay {
  constructor(private readonly host: RelayHost) {}

  /** Loads the job's checkpoint, then posts the job with it to the worker it was handed to. */
  send(job: FileJob, store: ResumeStore, slot: WorkerSlot): void {
    const message = fileJobMessage(job);
    const everyBytes = store.everyBytes ?? DEFAULT_CHECKPOINT_BYTES;
    store.load().then(
      (checkpoint) => {
        if (job.settled || slot.jobs.get(job.id) !== job) return;
        job.posted = true;
        const resume = checkpoint ? { checkpoint, everyBytes } : { everyBytes };
        this.host.post(slot, { t: 'jobs', jobs: [{ ...message, resume }] });
      },
      (err: unknown) => {
        if (slot.jobs.get(job.id) !== job) return;
        this.host.loadFailed(slot, job, err);
      },
    );
  }

  /** The store's business (a log line, say); its failure must not touch the job. */
  started(job: FileJob, offset: number, refused: boolean): void {
    try {
      job.resume?.started?.({ offset, refused });
    } catch {
      // ignored: hashing goes on either way
    }
  }

  /** Saves a checkpoint the worker sent; the worker waits for 'saved', or is cancelled if it fails. */
  save(slot: WorkerSlot, job: FileJob, state: Uint8Array): void {
    if (job.settled || !job.resume) return;
    job.resume.save(state).then(
      () => {
        if (!job.settled) this.host.post(slot, { t: 'saved', id: job.id });
      },
      (err: unknown) => {
        if (job.settled) return;
        this.host.fail(job, err);
        this.host.post(slot, { t: 'cancel', id: job.id });
      },
    );
  }

  /** Calls `finish` once the finished file's checkpoint is cleared (at once if there is none to clear). */
  clear(job: FileJob, finish: () => void): void {
    // A finished file's checkpoint must not let a later run skip re-reading it.
    if (job.resume?.clear) job.resume.clear().then(finish, (err: unknown) => this.host.fail(job, err));
    else finish();
  }
}
