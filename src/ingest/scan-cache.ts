/**
 * The last walk of each upload someone asked about (a request's show), reused whoever asks while
 * it is younger than `maxAgeMs` (or four times the walk's own duration, for a huge upload), with
 * one walk at a time per upload: parallel GETs of an open request cost one walk, not one each.
 */

interface Entry<T> {
  result: Promise<T>;
  /** When the walk ended; undefined while it runs. */
  settledAt: number | undefined;
  durationMs: number;
}

/** Entries kept at most; beyond it the stale, then the oldest, are dropped. */
const MAX_ENTRIES = 2048;

export class ScanCache<T> {
  /** In insertion order, which is the order of their walks' starts. */
  private readonly entries = new Map<string, Entry<T>>();

  constructor(
    private readonly walk: (key: string) => Promise<T>,
    private readonly maxAgeMs: number,
  ) {}

  get(key: string): Promise<T> {
    const now = Date.now();
    const entry = this.entries.get(key);
    if (
      entry !== undefined &&
      (entry.settledAt === undefined ||
        now - entry.settledAt <= Math.max(this.maxAgeMs, 4 * entry.durationMs))
    )
      return entry.result;
    const fresh: Entry<T> = { result: Promise.resolve(undefined as T), settledAt: undefined, durationMs: 0 };
    fresh.result = this.walk(key).then(
      (value) => {
        fresh.settledAt = Date.now();
        fresh.durationMs = fresh.settledAt - now;
        return value;
      },
      (err: unknown) => {
        // A failed walk is not kept: the next ask tries again.
        if (this.entries.get(key) === fresh) this.entries.delete(key);
        throw err;
      },
    );
    this.entries.delete(key);
    this.entries.set(key, fresh);
    this.prune(now);
    return fresh.result;
  }

  /** Forgets an upload known to have changed (a transfer into it began or ended). */
  forget(key: string): void {
    this.entries.delete(key);
  }

  private prune(now: number): void {
    if (this.entries.size <= MAX_ENTRIES) return;
    for (const [key, entry] of this.entries) {
      if (entry.settledAt !== undefined && now - entry.settledAt > this.maxAgeMs) this.entries.delete(key);
    }
    for (const key of this.entries.keys()) {
      if (this.entries.size <= MAX_ENTRIES) break;
      this.entries.delete(key);
    }
  }
}
