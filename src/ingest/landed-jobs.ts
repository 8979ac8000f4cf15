/**
 * The landed hasher's queue (landed-hasher.ts): a job per reported file, by key, and for each
 * file the keys of its jobs (two while a newer copy waits for a read under way), so that a claim
 * at complete finds a file's jobs without looking through the others.
 */

export interface Job {
  bagId: string;
  capability: string;
  path: string;
  size: number;
  due: number;
  tries: number;
  started: boolean;
  /**
   * Complete has come for its upload (a claim waits for it, or the upload was taken over): if
   * its read under way does not record it, it is given up at once, not tried again later.
   */
  claimed: boolean;
  done: Promise<void>;
  resolve: () => void;
}

export class LandedJobs {
  private readonly jobs = new Map<string, Job>();
  private readonly byFile = new Map<string, string[]>();

  /** The key of a file's first job. */
  static keyOf(bagId: string, path: string): string {
    return `${bagId}\0${path}`;
  }

  get size(): number {
    return this.jobs.size;
  }

  get(key: string): Job | undefined {
    return this.jobs.get(key);
  }

  [Symbol.iterator](): IterableIterator<[string, Job]> {
    return this.jobs.entries();
  }

  /** The file's jobs, oldest first. */
  ofFile(bagId: string, path: string): Array<[string, Job]> {
    const keys = this.byFile.get(LandedJobs.keyOf(bagId, path)) ?? [];
    return keys.flatMap((key) => {
      const job = this.jobs.get(key);
      return job === undefined ? [] : [[key, job] as [string, Job]];
    });
  }

  add(key: string, job: Job): void {
    this.jobs.set(key, job);
    const fileKey = LandedJobs.keyOf(job.bagId, job.path);
    const keys = this.byFile.get(fileKey);
    if (keys === undefined) this.byFile.set(fileKey, [key]);
    else keys.push(key);
  }

  /** Takes the job out (if it is still the one under `key`) and ends its wait. */
  finish(key: string, job: Job): void {
    if (this.jobs.get(key) === job) {
      this.jobs.delete(key);
      const fileKey = LandedJobs.keyOf(job.bagId, job.path);
      const keys = this.byFile.get(fileKey)?.filter((k) => k !== key) ?? [];
      if (keys.length > 0) this.byFile.set(fileKey, keys);
      else this.byFile.delete(fileKey);
    }
    job.resolve();
  }
}
