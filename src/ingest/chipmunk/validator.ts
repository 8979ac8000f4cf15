/**
 * The content type's external validator: run over the bag as an argument vector with the
 * placeholders `{external_id}` and `{bag}` replaced inside each argument, within a time limit
 * (`process/run-bounded.ts`), its words kept in the problem without the server's path.
 */
import { basename, resolve } from 'node:path';
import type { StoredProblem } from '../../catalog/types.js';
import { runBounded } from '../../process/run-bounded.js';
import { childEnv } from '../../process/spawn.js';
import { chipmunkProblem } from './problems.js';

/** Output kept in a problem: enough to see what went wrong, not a log file in the catalog. */
export const VALIDATOR_OUTPUT_LIMIT = 2000;
export const DEFAULT_VALIDATOR_TIMEOUT_MS = 10 * 60 * 1000;

/** Trim a validator's output for a problem: no server path, at most VALIDATOR_OUTPUT_LIMIT characters. */
function presentOutput(raw: string, bagDir: string): string {
  const withoutPath = raw.split(bagDir).join('<bag>').trim();
  return withoutPath.length <= VALIDATOR_OUTPUT_LIMIT
    ? withoutPath
    : `${withoutPath.slice(0, VALIDATOR_OUTPUT_LIMIT)}… (truncated)`;
}

/** Runs the validator over the bag: undefined when it accepts it, else the problem. */
export async function runValidator(
  argv: readonly string[],
  bagDir: string,
  externalId: string,
  contentType: string,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<StoredProblem | undefined> {
  signal?.throwIfAborted();
  const absBag = resolve(bagDir);
  const [command, ...args] = argv.map((a) =>
    a.replaceAll('{external_id}', externalId).replaceAll('{bag}', absBag),
  );
  if (command === undefined || command === '') {
    return chipmunkProblem({
      code: 'validator-unavailable',
      contentType,
      command: '(empty)',
      detail: 'no command configured',
    });
  }
  const run = await runBounded([command, ...args], { timeoutMs, env: childEnv(), signal });
  switch (run.outcome) {
    case 'unavailable':
      return chipmunkProblem({
        code: 'validator-unavailable',
        contentType,
        command: basename(command),
        detail: run.detail,
      });
    case 'timed-out':
      return chipmunkProblem({ code: 'validator-timeout', contentType, timeoutMs });
    case 'exited': {
      if (run.exitCode === 0) return undefined;
      // chipmunk's validators write to stderr; fall back to stdout for those that do not.
      const output = presentOutput(run.stderr.trim() !== '' ? run.stderr : run.stdout, absBag);
      return chipmunkProblem({
        code: 'validator-failed',
        contentType,
        exitCode: run.exitCode,
        signal: run.signal,
        output,
      });
    }
  }
}
