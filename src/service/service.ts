/**
 * The one lifecycle of the daemon's background services (ingest, replicator, repairs, audits,
 * continuous audits): the `Service` shape, and `ServiceLoop`, the single-flight loop with a wake,
 * a timer for a later wake (a back-off, or the next thing due) and the work it started held until
 * it ends. Every run has its own AbortSignal, threaded down into the work: stop() aborts it and
 * resolves once nothing of the run is left, and start() after stop() begins a new run, the same
 * for every service.
 *
 * It knows nothing of what a service does; the daemon's registry (lifecycle.ts) starts and
 * stops the services in order.
 */

/** A background service: works from start() until stop() (or until the signal it was given aborts). */
export interface Service {
  start(signal: AbortSignal): void | Promise<void>;
  /** Stops: work in flight is aborted; resolves once none is left. start() may follow. */
  stop(): Promise<void>;
}

export class ServiceLoop<Result = void> implements Service {
  /** Live from construction until stop(), so a pass or held work may run before start() (tests, on-demand repairs). */
  private controller = new AbortController();
  private runSignal: AbortSignal = this.controller.signal;
  private started = false;
  private pass: Promise<Result> | undefined;
  private again = false;
  private timer: NodeJS.Timeout | undefined;
  private readonly held = new Set<Promise<unknown>>();

  /**
   * `name` says who stops (the abort's reason); `work` is one pass; `onError` hears a pass that
   * rejected when it ran from wake().
   */
  constructor(
    private readonly name: string,
    private readonly work: (signal: AbortSignal) => Promise<Result>,
    private readonly onError: (err: unknown) => void,
  ) {}

  /** This run's signal: aborted by stop(), or when the signal start() was given aborts. */
  get signal(): AbortSignal {
    return this.runSignal;
  }

  /** Started, and neither stopped nor aborted since. */
  get running(): boolean {
    return this.started && !this.runSignal.aborted;
  }

  /** Starts a run (nothing when one is going) and its first pass. */
  start(signal?: AbortSignal): void {
    if (this.running) return;
    if (this.controller.signal.aborted) this.controller = new AbortController();
    this.runSignal =
      signal === undefined ? this.controller.signal : AbortSignal.any([signal, this.controller.signal]);
    this.started = true;
    this.wake();
  }

  /** A pass now; during a pass, one more after it. Nothing when not running. */
  wake(): void {
    if (!this.running) return;
    if (this.pass !== undefined) {
      this.again = true;
      return;
    }
    this.runPass().catch(this.onError);
  }

  /** One pass now, or the one under way (single flight), whether or not started. */
  runPass(): Promise<Result> {
    if (this.pass !== undefined) return this.pass;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.again = false;
    this.pass = this.work(this.runSignal).finally(() => {
      this.pass = undefined;
      if (this.again) this.wake();
    });
    return this.pass;
  }

  /** A wake in `ms` (replacing one set before), unless the run stops first. */
  wakeIn(ms: number): void {
    if (!this.running) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.wake(), ms);
    this.timer.unref();
  }

  /** Work of this run that stop() and idle() wait for; settled, it is let go. Its failure is the caller's to hear. */
  hold<T>(work: Promise<T>): Promise<T> {
    const held: Promise<T> = work.finally(() => this.held.delete(held));
    held.catch(() => undefined); // stop() waits for it whatever its outcome
    this.held.add(held);
    return held;
  }

  async stop(): Promise<void> {
    this.started = false;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.controller.abort(new Error(`${this.name} is stopping`));
    await this.idle();
  }

  /** Resolves once no pass runs and nothing is held. */
  async idle(): Promise<void> {
    while (this.pass !== undefined || this.held.size > 0) await Promise.allSettled([this.pass, ...this.held]);
  }
}
