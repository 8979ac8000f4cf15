/**
 * The daemon's registry of what it has started: each piece registers its release as it starts
 * (as a fastify plugin declares a resource and its `onClose` hook together), and stop() releases
 * them in reverse. A start that fails part-way and a graceful stop are the same walk, so there is
 * one order to keep.
 */
import type { Service } from './service.js';

interface Started {
  name: string;
  release: () => unknown;
}

export class Lifecycle {
  private readonly started: Started[] = [];

  /** Registers how to release something just opened; released after everything opened later. */
  onStop(name: string, release: () => unknown): void {
    this.started.push({ name, release });
  }

  /**
   * Starts a service with a signal of its own, its stop registered first: a start that throws is
   * stopped too. At its turn the signal aborts and its stop() is awaited.
   */
  async start<S extends Service>(name: string, service: S): Promise<S> {
    const controller = new AbortController();
    this.onStop(name, () => {
      controller.abort(new Error(`${name} is stopping`));
      return service.stop();
    });
    await service.start(controller.signal);
    return service;
  }

  /**
   * Releases everything in reverse order of starting, each awaited; one that fails does not keep
   * the others (the catalog last of all) from being released. Rejects with the first failure.
   */
  async stop(): Promise<void> {
    let failure: { err: unknown } | undefined;
    for (let next = this.started.pop(); next !== undefined; next = this.started.pop()) {
      try {
        await next.release();
      } catch (err) {
        failure ??= {
          err: new Error(`stopping ${next.name} failed: ${(err as Error).message}`, { cause: err }),
        };
      }
    }
    if (failure !== undefined) throw failure.err;
  }
}
