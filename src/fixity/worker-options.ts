/**
 * How a fixity worker thread is started and how long it is kept: its module, its Node options
 * and heap limits, and the idle time after which the pool lets its workers go. Nothing here
 * starts a worker (pool.ts does).
 */
import type { WorkerOptions } from 'node:worker_threads';

export const WORKER_URL = new URL('./worker.js', import.meta.url);

/**
 * With nothing queued or running for this long, the pool ends its workers and starts them again
 * for the next job. An idle worker's V8 heap and code count in the daemon's RSS; starting one
 * again costs far less than a pause this long between jobs (docs/decisions.md, "Idle fixity
 * workers end"; the figures in docs/performance.md, "Replication").
 */
export const WORKER_IDLE_MS = 2000;

/**
 * A worker's garbage is short-lived (messages, digests) and its read buffers live outside the
 * heap: a small young generation keeps each worker's memory flat instead of letting V8 grow it
 * to 48 MiB before collecting, which mattered for the daemon's RSS target (bench/ingest).
 */
const WORKER_LIMITS = { maxYoungGenerationSizeMb: 8 };

/** The options a worker starts with, `workerData` aside. */
export function workerOptions(): Pick<WorkerOptions, 'execArgv' | 'resourceLimits'> {
  return { execArgv: workerExecArgv(), resourceLimits: WORKER_LIMITS };
}

/** Options that take their value as the next argument and that a worker must not get. */
const DROPPED_WITH_VALUE = new Set(['-e', '--eval', '-p', '--print', '--input-type']);
/**
 * Options (`--name=value`) a worker must not get: the evaluation ones, and V8's heap sizes, which
 * a worker refuses (ERR_WORKER_INVALID_EXEC_ARGV) and sets through `resourceLimits` instead.
 */
const DROPPED = ['--input-type=', '--eval=', '--print=', '--max-semi-space-size', '--max-old-space-size'];

/**
 * The process's Node options, less those that make no sense for (and break) a worker module:
 * `node --input-type=module -e …` would otherwise pass --input-type on, and the daemon's
 * `--max-semi-space-size` (its deployment's) would keep every worker from starting.
 */
export function workerExecArgv(): string[] {
  const args: string[] = [];
  for (let i = 0; i < process.execArgv.length; i++) {
    const arg = process.execArgv[i]!;
    if (DROPPED_WITH_VALUE.has(arg)) i++;
    else if (!DROPPED.some((prefix) => arg.startsWith(prefix))) args.push(arg);
  }
  return args;
}
