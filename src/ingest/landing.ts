/**
 * The landing zone: one folder per open request under `<dataDir>/landing/<capability>/`, where
 * the client's rsync writes the bag, plus the small files through which the rsync daemon's hook
 * scripts and this process talk (under `<dataDir>/rsyncd/`):
 *
 * - `closed/<capability>`: the request was completed; the pre-xfer gate refuses further uploads.
 * - `active/<rsync pid>`: a transfer the gate let through and that has not ended yet; holds the
 *   capability. Written by the pre-xfer hook, removed by the post-xfer hook.
 * - `transfers/<epoch ms>-<rsync pid>`: one record per ended transfer (see `TransferLog`).
 *
 * This file owns that layout and the operations the ingest needs on it (open, close, reopen,
 * count the transfers still writing). It does not run rsync (`rsync/`) or watch files
 * (`watcher.ts`), and it never moves an upload: staging is the ingest's job.
 */
import { mkdir, readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { writeAtomically } from '../fs/atomic.js';
import { isErrno } from '../fs/errors.js';
import { descendantsOf, processExists, processState, procfsAvailable } from '../process/groups.js';
import type { DataLayout } from '../storage/layout.js';
import { assertCapability, isCapability } from './capability.js';

/** The landing zone's and the rsync daemon's folders (see `DataLayout`). */
export type LandingLayout = Pick<
  DataLayout,
  'landing' | 'rsyncd' | 'closed' | 'active' | 'transfers' | 'landed' | 'uploadFolderMode'
>;

/** A transfer the pre-xfer gate admitted whose rsync process is still running. */
export interface ActiveTransfer {
  pid: number;
  capability: string;
}

export class LandingZone {
  /** Its folders, made by `DataLayout.ensure()` before the zone is used. */
  constructor(readonly layout: LandingLayout) {}

  /** The landing folder of a capability. Throws for anything that is not a capability. */
  path(capability: string): string {
    assertCapability(capability);
    return join(this.layout.landing, capability);
  }

  /** Creates the landing folder, so the gate accepts uploads to it. Safe to call again. */
  async open(capability: string): Promise<void> {
    try {
      await mkdir(this.path(capability), { mode: this.layout.uploadFolderMode });
    } catch (err) {
      if (!isErrno(err, 'EEXIST')) throw err;
    }
  }

  /**
   * Marks the capability closed: from now on the gate refuses every new transfer to it.
   * Transfers already admitted keep running; wait for `activeTransfers()` to reach 0.
   */
  async close(capability: string): Promise<void> {
    assertCapability(capability);
    await writeAtomically(join(this.layout.closed, capability), `closed_at=${Date.now()}\n`);
  }

  /** Lets uploads in again, e.g. when a failed ingest hands the upload back to the client. */
  async reopen(capability: string): Promise<void> {
    assertCapability(capability);
    await rm(join(this.layout.closed, capability), { force: true });
  }

  /** How many admitted transfers to this capability are still running. */
  async activeTransfers(capability: string): Promise<number> {
    assertCapability(capability);
    const live = await this.liveTransfers();
    return live.filter((t) => t.capability === capability).length;
  }

  /**
   * Every admitted transfer still running. Records whose rsync process is gone (killed before
   * its post-xfer hook ran, or left from before a reboot) are removed on the way.
   */
  async liveTransfers(): Promise<ActiveTransfer[]> {
    let names: string[];
    try {
      names = await readdir(this.layout.active);
    } catch (err) {
      if (isErrno(err, 'ENOENT')) return [];
      throw err;
    }
    const live: ActiveTransfer[] = [];
    for (const name of names) {
      // `.<pid>.tmp` is a record being written by the hook; `<pid>` a finished one.
      const match = /^(?:\.(\d+)\.tmp|(\d+))$/.exec(name);
      if (!match) continue;
      const pid = Number(match[1] ?? match[2]);
      const file = join(this.layout.active, name);
      if (!(await isRsyncProcess(pid))) {
        await rm(file, { force: true });
        continue;
      }
      if (match[1] !== undefined) continue;
      let capability: string;
      try {
        capability = (await readFile(file, 'utf8')).trim();
      } catch (err) {
        if (isErrno(err, 'ENOENT')) continue; // the post-xfer hook removed it just now
        throw err;
      }
      if (isCapability(capability)) live.push({ pid, capability });
    }
    return live;
  }

  /**
   * Ends every admitted transfer into the capability (a retired link, ingest/rotation.ts): its
   * rsync process and the receiver that process forked get SIGTERM (rsync then drops its
   * temporary file), SIGKILL after `graceMs`. Returns how many there were, once none runs; throws
   * if one outlives SIGKILL by `graceMs`. Close the capability first, so no new one is admitted.
   */
  async stopTransfers(capability: string, graceMs = 5_000): Promise<number> {
    assertCapability(capability);
    const live = (await this.liveTransfers()).filter((t) => t.capability === capability);
    if (live.length === 0) return 0;
    const pids: number[] = [];
    for (const t of live) pids.push(t.pid, ...(await descendantsOf(t.pid)));
    const signal = (name: NodeJS.Signals) => {
      for (const pid of pids) {
        try {
          process.kill(pid, name);
        } catch {
          // gone already, or not ours to signal: the wait below tells
        }
      }
    };
    signal('SIGTERM');
    const running = async () => (await Promise.all(pids.map(isRsyncProcess))).some(Boolean);
    for (const [deadline, then] of [
      [Date.now() + graceMs, 'SIGKILL'],
      [Date.now() + 2 * graceMs, undefined],
    ] as const) {
      while (await running()) {
        if (Date.now() > deadline) break;
        await sleep(25);
      }
      if (!(await running())) return live.length;
      if (then === undefined) break;
      signal(then);
    }
    throw new Error(`transfers into a retired upload link outlived SIGKILL (rsync pids ${pids.join(', ')})`);
  }
}

/**
 * Whether `pid` is a running rsync process. The pid in an active record may have been reused
 * by an unrelated process after a crash, so on Linux the command name is checked too.
 */
export async function isRsyncProcess(pid: number): Promise<boolean> {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  const proc = await processState(pid);
  if (proc === undefined) return (await procfsAvailable()) ? false : processExists(pid); // no procfs: the best we can do
  return proc.state !== 'Z' && proc.state !== 'X' && proc.comm.includes('rsync');
}
