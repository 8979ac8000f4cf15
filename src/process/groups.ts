/**
 * Process groups: signalling one, and asking whether any of its processes still runs. Children
 * that may fork (rsync and its per-connection processes, an external validator's pipeline) are
 * started in a group of their own, so that ending the group ends all of them.
 */
import { readdir, readFile } from 'node:fs/promises';
import { isErrno } from '../fs/errors.js';

/** Sends `signal` to every process of group `pgid`; a group that is gone is not an error. */
export function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch (err) {
    if (!isErrno(err, 'ESRCH')) throw err;
  }
}

/** Whether group `pgid` has any process, zombies included. */
function groupExists(pgid: number): boolean {
  return processExists(-pgid);
}

/**
 * Whether any process of the group is still running. Unlike `groupExists`, zombies do not
 * count: rsync's per-connection processes are orphaned when the listener dies, and where
 * PID 1 does not reap orphans (some containers) they would otherwise hold up a stop forever.
 */
export async function groupRunning(pgid: number): Promise<boolean> {
  if (!groupExists(pgid)) return false;
  let names: string[];
  try {
    names = await readdir('/proc');
  } catch {
    return true; // no procfs: trust kill(0)
  }
  const states = await Promise.all(names.filter((n) => /^\d+$/.test(n)).map((n) => processState(Number(n))));
  return states.some((s) => s !== undefined && s.pgrp === pgid && s.state !== 'Z' && s.state !== 'X');
}

export interface ProcessState {
  /** The command name (at most 15 bytes). */
  comm: string;
  /** R, S, D, Z (zombie), X (dead), ... */
  state: string;
  ppid: number;
  pgrp: number;
}

/** A process's name, state, parent and group from `/proc/<pid>/stat`; undefined when it is gone. */
export async function processState(pid: number): Promise<ProcessState | undefined> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    // "<pid> (<comm>) <state> <ppid> <pgrp> ...": comm may hold spaces and parentheses.
    const close = stat.lastIndexOf(')');
    const [state = '', ppid, pgrp] = stat.slice(close + 2).split(' ');
    return { comm: stat.slice(stat.indexOf('(') + 1, close), state, ppid: Number(ppid), pgrp: Number(pgrp) };
  } catch {
    return undefined;
  }
}

/** Whether this system has procfs (Linux): without it, processState knows nothing. */
export async function procfsAvailable(): Promise<boolean> {
  return (await processState(process.pid)) !== undefined;
}

/** Whether a process with this pid exists (zombies included), by signal 0 (a negative pid: a group). */
export function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return isErrno(err, 'EPERM');
  }
}

/** A process's command line from `/proc/<pid>/cmdline`; undefined when it is gone or hidden. */
export async function commandLine(pid: number): Promise<string[] | undefined> {
  try {
    const text = await readFile(`/proc/${pid}/cmdline`, 'utf8');
    return text.split('\0').slice(0, -1);
  } catch {
    return undefined;
  }
}

/** Every descendant of `pid` (children, their children, ...) that procfs shows; [] without procfs. */
export async function descendantsOf(pid: number): Promise<number[]> {
  let names: string[];
  try {
    names = await readdir('/proc');
  } catch {
    return [];
  }
  const pids = names.filter((n) => /^\d+$/.test(n)).map(Number);
  const states = await Promise.all(pids.map((p) => processState(p)));
  const children = new Map<number, number[]>();
  states.forEach((s, i) => {
    if (s !== undefined) children.set(s.ppid, [...(children.get(s.ppid) ?? []), pids[i]!]);
  });
  const found: number[] = [];
  for (let next = [pid]; next.length > 0;) {
    next = next.flatMap((p) => children.get(p) ?? []).filter((p) => !found.includes(p));
    found.push(...next);
  }
  return found;
}
