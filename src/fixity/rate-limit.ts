/**
 * The audit read-rate limit, shared by every worker through a SharedArrayBuffer: a token bucket
 * kept as one "theoretical arrival time" (GCRA). A worker charges the bytes it just read and
 * must not read again before the returned time, so the total audit rate over all workers stays
 * at or below the limit, give or take one chunk per worker and SLACK. SLACK credits back a late
 * wake-up (a sleeping thread wakes late on a busy host, and that loss would otherwise
 * accumulate over every chunk); idle time beyond it earns no burst.
 */

const TAT = 0; // hrtime (ns) from which the next read is allowed
const RATE = 1; // bytes per second; 0 = unlimited
const GENERATION = 2; // bumped on every rate change, so sleeping workers re-check
const SLACK_NS = 50_000_000n;

export class AuditRateLimit {
  private readonly cells: BigInt64Array;

  /** `shared` must hold at least 3 BigInt64 cells at the start, zeroed or set up by another instance. */
  constructor(shared: SharedArrayBuffer) {
    this.cells = new BigInt64Array(shared);
  }

  setRate(bytesPerSec: number): void {
    if (!Number.isFinite(bytesPerSec) || bytesPerSec < 0) {
      throw new RangeError(`audit rate limit must be a finite number ≥ 0, got ${bytesPerSec}`);
    }
    Atomics.store(this.cells, RATE, BigInt(Math.floor(bytesPerSec)));
    // Forget debts run up at the old rate.
    Atomics.store(this.cells, TAT, process.hrtime.bigint());
    Atomics.add(this.cells, GENERATION, 1n);
  }

  generation(): bigint {
    return Atomics.load(this.cells, GENERATION);
  }

  /** Charges `bytes` just read; returns the hrtime (ns) before which the caller must not read again, or 0n. */
  charge(bytes: number): bigint {
    const rate = Atomics.load(this.cells, RATE);
    if (rate === 0n || bytes <= 0) return 0n;
    const cost = (BigInt(bytes) * 1_000_000_000n) / rate;
    for (;;) {
      const old = Atomics.load(this.cells, TAT);
      const now = process.hrtime.bigint();
      const floor = now - SLACK_NS;
      const next = (old > floor ? old : floor) + cost;
      if (Atomics.compareExchange(this.cells, TAT, old, next) === old) return next;
    }
  }
}
