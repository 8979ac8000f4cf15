/** What /proc says about processes the tests start: their children and their open files. */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/** Pids whose parent is `pid`. */
export function childrenOf(pid: number): number[] {
  return readdirSync('/proc')
    .filter((n) => /^\d+$/.test(n))
    .map(Number)
    .filter((p) => {
      try {
        const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid;
      } catch {
        return false;
      }
    });
}

/** Where each open descriptor of `pid` points, by number. */
export function openFiles(pid: number): Map<number, string> {
  const files = new Map<number, string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      files.set(Number(fd), readlinkSync(`/proc/${pid}/fd/${fd}`));
    } catch {
      // closed while we looked
    }
  }
  return files;
}

/** The running rsyncs `pid` started (preservd starts one per connection on the rsync port); killed ones not yet reaped do not count. */
export function rsyncsOf(pid: number): number[] {
  return childrenOf(pid).filter((p) => {
    try {
      const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
      return (
        stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')) === 'rsync' &&
        !'ZX'.includes(stat[stat.lastIndexOf(')') + 2]!)
      );
    } catch {
      return false;
    }
  });
}
