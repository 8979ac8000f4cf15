/** How the rsync side is set up. */
import type { Logger } from '../../logger.js';
import type { LandingZone } from '../landing.js';

export interface RsyncDaemonOptions {
  /** The landing zone rsync writes into; its layout names rsync's own folders too. */
  landing: LandingZone;
  /** Address the rsync port listens on. Default `127.0.0.1`. */
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
  /** How long `start()` waits for rsync to answer on the port. Default 10 s. */
  startTimeoutMs?: number;
  /** How long `stop()` waits after SIGTERM before SIGKILL. Default 5 s. */
  stopTimeoutMs?: number;
  /** How long a connection may take to be admitted by the gate before its rsync is killed. Default 10 s. */
  handshakeTimeoutMs?: number;
  /** How often transfer records are looked for besides fs.watch. Default 2 s. */
  transferPollMs?: number;
  logger?: Logger;
}
