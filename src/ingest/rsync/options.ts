/** How the rsync daemon is set up, and what it tells its listeners. */
import type { Logger } from '../../logger.js';
import type { LandingZone } from '../landing.js';

export interface RsyncDaemonOptions {
  /** The landing zone rsync writes into; its layout names rsync's own folders too. */
  landing: LandingZone;
  /** Address rsync listens on. Default `127.0.0.1`. */
  host?: string;
  /** Default 8873. */
  port?: number;
  /** The rsync module name, the first path component of every upload link. Default `preservd`. */
  module?: string;
  /** The rsync executable. Default `rsync` (looked up in PATH). */
  binary?: string;
  /** Simultaneous uploads (admitted by the gate); more are told to try again later. Default 20. */
  maxConnections?: number;
  /** rsync's I/O timeout: a client silent this long is dropped. Default 600 s. */
  timeoutSeconds?: number;
  /** How long `start()` waits for rsync to answer on its port. Default 10 s. */
  startTimeoutMs?: number;
  /** How long `stop()` waits after SIGTERM before SIGKILL. Default 5 s. */
  stopTimeoutMs?: number;
  /** Delay before the first restart, doubled on each further one. Default 250 ms. */
  restartDelayMs?: number;
  /** Longest delay between restarts. Default 30 s. */
  maxRestartDelayMs?: number;
  /** How often transfer records are looked for besides fs.watch. Default 2 s. */
  transferPollMs?: number;
  logger?: Logger;
}


export interface RestartInfo {
  /** Restarts so far, this one included. */
  restarts: number;
  /** Pid of the new rsync. */
  pid: number;
  /** How the previous rsync ended. */
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  delayMs: number;
}

export interface RsyncDaemonEvents {
  /** rsync answers on its port (after start and after each restart). */
  ready: [{ pid: number }];
  /** An rsync daemon process ended, for whatever reason. */
  exit: [{ pid: number; exitCode: number | null; signal: NodeJS.Signals | null }];
  /** rsync died unexpectedly and was started again. */
  restart: [RestartInfo];
}
