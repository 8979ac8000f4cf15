/**
 * Running a program we do not control, within bounds: an argument vector (never a shell), its
 * own process group (so a time-out ends everything it started: SIGTERM, then SIGKILL after a
 * grace period), at most `outputLimit` bytes of each output kept, and no wait beyond the kill
 * for a grandchild that holds the pipes open. Started through `spawnIsolated`.
 */
import { signalGroup } from './groups.js';
import { childEnv, spawnIsolated } from './spawn.js';

export type BoundedRun =
  | {
      outcome: 'exited';
      exitCode: number | null;
      signal: NodeJS.Signals | null;
      stdout: string;
      stderr: string;
    }
  | { outcome: 'timed-out' }
  | { outcome: 'unavailable'; detail: string };

export interface BoundedRunOptions {
  timeoutMs: number;
  /** After SIGTERM, how long before SIGKILL; and as long again before we stop waiting. Default 2 s. */
  killGraceMs?: number | undefined;
  /** Bytes kept of stdout and of stderr each. Default 64 KiB. */
  outputLimit?: number | undefined;
  env?: NodeJS.ProcessEnv | undefined;
  /** Aborting kills the group at once and rejects with the signal's reason. */
  signal?: AbortSignal | undefined;
}

/** The first `limit` bytes of a stream, however much is written. */
class BoundedOutput {
  private chunks: Buffer[] = [];
  private bytes = 0;
  constructor(private readonly limit: number) {}
  push(chunk: Buffer): void {
    if (this.bytes >= this.limit) return;
    this.chunks.push(chunk.subarray(0, this.limit - this.bytes));
    this.bytes += Math.min(chunk.length, this.limit - this.bytes);
  }
  text(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }
}

export function runBounded(
  argv: readonly [string, ...string[]],
  options: BoundedRunOptions,
): Promise<BoundedRun> {
  const { timeoutMs, signal } = options;
  const graceMs = options.killGraceMs ?? 2_000;
  signal?.throwIfAborted();
  const [command, ...args] = argv;
  return new Promise<BoundedRun>((resolve, reject) => {
    const child = spawnIsolated(command, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
      env: options.env ?? childEnv(),
    });
    const stderr = new BoundedOutput(options.outputLimit ?? 64 * 1024);
    const stdout = new BoundedOutput(options.outputLimit ?? 64 * 1024);
    child.stderr?.on('data', (c: Buffer) => stderr.push(c));
    child.stdout?.on('data', (c: Buffer) => stdout.push(c));
    let settled = false;
    let timedOut = false;
    let killTimer: NodeJS.Timeout | undefined;
    let giveUpTimer: NodeJS.Timeout | undefined;

    const killGroup = (sig: NodeJS.Signals): void => {
      if (child.pid === undefined) return; // never started: 'error' settles it
      try {
        signalGroup(child.pid, sig);
      } catch {
        child.kill(sig); // no group to signal (EPERM): at least the child itself
      }
    };
    const finish = (settle: () => void): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearTimeout(killTimer);
      clearTimeout(giveUpTimer);
      signal?.removeEventListener('abort', onAbort);
      settle();
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup('SIGTERM');
      killTimer = setTimeout(() => killGroup('SIGKILL'), graceMs);
      // A grandchild holding our pipes open must not keep us waiting: stop after the kill.
      giveUpTimer = setTimeout(() => {
        child.stdout?.destroy();
        child.stderr?.destroy();
        finish(() => resolve({ outcome: 'timed-out' }));
      }, graceMs * 2);
    }, timeoutMs);
    const onAbort = (): void => {
      killGroup('SIGKILL');
      finish(() => reject(signal?.reason));
    };
    signal?.addEventListener('abort', onAbort, { once: true });

    child.on('error', (err: NodeJS.ErrnoException) => {
      finish(() =>
        resolve({ outcome: 'unavailable', detail: typeof err.code === 'string' ? err.code : err.message }),
      );
    });
    child.on('close', (exitCode: number | null, exitSignal: NodeJS.Signals | null) => {
      finish(() =>
        resolve(
          timedOut
            ? { outcome: 'timed-out' }
            : {
                outcome: 'exited',
                exitCode,
                signal: exitSignal,
                stdout: stdout.text(),
                stderr: stderr.text(),
              },
        ),
      );
    });
  });
}
