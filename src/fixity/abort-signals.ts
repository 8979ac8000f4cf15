/**
 * One 'abort' listener per signal, however many jobs share it: a caller may pass one signal for
 * 10^5 files, and a listener each would trip Node's listener-leak warning and cost memory.
 */
export class AbortSignals<J> {
  private readonly watched = new Map<AbortSignal, { jobs: Set<J>; listener: () => void }>();

  constructor(private readonly onAbort: (job: J, reason: unknown) => void) {}

  watch(signal: AbortSignal, job: J): void {
    let entry = this.watched.get(signal);
    if (!entry) {
      const jobs = new Set<J>();
      const listener = (): void => {
        this.watched.delete(signal);
        for (const j of jobs) this.onAbort(j, signal.reason);
      };
      entry = { jobs, listener };
      this.watched.set(signal, entry);
      signal.addEventListener('abort', listener, { once: true });
    }
    entry.jobs.add(job);
  }

  unwatch(signal: AbortSignal, job: J): void {
    const entry = this.watched.get(signal);
    if (!entry) return;
    entry.jobs.delete(job);
    if (entry.jobs.size === 0) {
      this.watched.delete(signal);
      signal.removeEventListener('abort', entry.listener);
    }
  }
}
