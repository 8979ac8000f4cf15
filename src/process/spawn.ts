/**
 * Starting a child process that holds nothing of ours: every child preservd starts (the rsync
 * for each upload connection, and through it the hooks; external validators) goes through
 * `spawnIsolated`.
 *
 * - **No inherited descriptors.** Node opens its own files close-on-exec, but native modules
 *   need not: LMDB's `data.mdb` handle would otherwise reach rsync and everything it forks, a
 *   network-facing process able to write the catalog. Node has no `closefrom`, so the child is
 *   started through bash, which closes every descriptor above stderr and then execs the
 *   command (same pid, so signals and exit codes are the command's own).
 * - **Nothing secret in its environment.** A child gets `childEnv()`, an allow-list (PATH, the
 *   locale, TMPDIR, HOME), never preservd's own: S3 keys in `AWS_*` must not reach a validator
 *   parsing untrusted bags, nor the network-facing rsync and its hooks.
 * - **No child outlives a killed daemon.** Through util-linux `setpriv --pdeathsig`, the kernel
 *   sends the child SIGTERM when preservd dies, even by SIGKILL. Under systemd the unit's
 *   control group does the same for every process, grandchildren included.
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

/** Closes descriptors 3 and up (bash, unlike dash, takes multi-digit ones), then execs "$@". */
const CLOSE_AND_EXEC =
  'for fd in /proc/self/fd/*; do fd=${fd##*/}; [ "$fd" -gt 2 ] && eval "exec $fd>&-"; done; exec "$@"';

/** What a child may see of preservd's environment: what programs need to run, nothing else. */
const PASSED_ON = /^(PATH|HOME|TMPDIR|TZ|LANG|LANGUAGE|LC_[A-Z_]+)$/;

/** The allow-listed environment for a child, plus what that child needs explicitly. */
export function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => PASSED_ON.test(k))), ...extra };
}

export interface IsolatedSpawnOptions extends Omit<SpawnOptions, 'shell' | 'argv0' | 'env'> {
  /** Signal the kernel sends the child when preservd dies. Default SIGTERM. */
  parentDeathSignal?: NodeJS.Signals;
  /** The child's environment. Default `childEnv()`. */
  env?: NodeJS.ProcessEnv;
  /** The child's umask (Node's applies to the whole process, so it is set in the child). */
  umask?: number;
}

/**
 * `spawn(command, args, options)`, isolated as described above. `command` is looked up in PATH
 * first, so that a missing program fails with ENOENT like a plain spawn.
 */
export function spawnIsolated(
  command: string,
  args: readonly string[],
  options: IsolatedSpawnOptions = {},
): ChildProcess {
  const { parentDeathSignal = 'SIGTERM', umask, env = childEnv(), ...rest } = options;
  const spawnOptions: SpawnOptions = { ...rest, env };
  const executable = findExecutable(command, env.PATH);
  if (executable === undefined) return spawn(command, [...args], spawnOptions); // fails with ENOENT, as callers expect
  const setpriv = findExecutable('setpriv');
  const bash = findExecutable('bash');
  if (setpriv === undefined || bash === undefined) {
    // Not the command's fault: say what is missing rather than report the command as absent.
    throw new Error(
      "starting a child process needs util-linux's setpriv and bash (Debian: apt-get install util-linux bash)",
    );
  }
  return spawn(
    setpriv,
    [
      `--pdeathsig=${parentDeathSignal.replace(/^SIG/, '')}`,
      '--',
      bash,
      // With stdin a socket (an rsync connection), bash would take itself for a remote shell
      // and run ~/.bashrc, reading from the client: no start-up files, ever.
      '--norc',
      '--noprofile',
      '-c',
      umask === undefined ? CLOSE_AND_EXEC : `umask ${umask.toString(8).padStart(3, '0')}; ${CLOSE_AND_EXEC}`,
      'preservd-child',
      executable,
      ...args,
    ],
    spawnOptions,
  );
}

/** The path of an executable `command` (with a slash: itself), or undefined. */
function findExecutable(command: string, path = process.env.PATH ?? ''): string | undefined {
  const candidates = command.includes('/')
    ? [command]
    : path
        .split(delimiter)
        .filter(Boolean)
        .map((dir) => join(dir, command));
  for (const candidate of candidates) {
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}
