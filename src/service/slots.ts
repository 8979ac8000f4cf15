/**
 * Work side by side in a bounded number of slots, with p-limit: the one mechanism of an audit's
 * packages (audit/runner.ts), a replica copy's files (replicas/copy.ts) and a package check's
 * hashing batches (audit/verify.ts). `inSlot` waits until its work has a slot and hands back the
 * work's end, so a producer makes its next piece of work only once a slot is free: what waits
 * stays bounded instead of being queued by the thousand.
 */
import type { LimitFunction } from 'p-limit';

export async function inSlot<T>(limit: LimitFunction, work: () => Promise<T>): Promise<{ done: Promise<T> }> {
  let started!: () => void;
  const slot = new Promise<void>((resolve) => (started = resolve));
  const done = limit(() => {
    started();
    return work();
  });
  done.catch(() => undefined); // the caller hears it through `done`
  await slot;
  return { done };
}
