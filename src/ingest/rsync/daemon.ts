/**
 * The rsync side of uploads: `preservd serve` listens on the rsync port (`front.ts`) and starts
 * one `rsync --daemon` in inetd mode per connection, with the configuration and hook scripts of
 * `config.ts` under `<dataDir>/rsyncd/`. There is no long-lived rsync daemon.
 *
 * - One module (default `preservd`) rooted at `<dataDir>/landing`, write-only, unlisted, no
 *   rsync users or passwords: the capability in the path is the secret.
 * - The pre-xfer hook is the gate: it admits a transfer only into an existing, open
 *   `landing/<capability>/` and records it in `rsyncd/active/<rsync's pid>`; the post-xfer hook
 *   turns that record into a transfer record in `rsyncd/transfers/`, which `TransferLog`
 *   delivers. A connection the gate has not admitted within 10 s is killed (`front.ts`).
 * - An rsync that dies takes only its own connection with it. `stop()` ends every one and the
 *   transfers they serve. Each holds none of preservd's descriptors and gets SIGTERM when
 *   preservd dies (`spawnIsolated`); rsyncs left by a preservd killed outright are ended at the
 *   next start (found by their command line, `--config=<our rsyncd.conf>`).
 *
 * What the folders mean is described in `../landing.ts`; watching uploads is `../watcher.ts`.
 */
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, readdir, rm } from 'node:fs/promises';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { commandLine, groupRunning, processState, signalGroup } from '../../process/groups.js';
import { childEnv, spawnIsolated } from '../../process/spawn.js';
import { writeAtomically } from '../../fs/atomic.js';
import { isErrno } from '../../fs/errors.js';
import { silentLogger, type Logger } from '../../logger.js';
import type { LandingLayout } from '../landing.js';
import { installHooks, LANDED_ENV, rsyncdConfig } from './config.js';
import { LandedLog } from './landed-log.js';
import { rsyncLink } from '../upload-link.js';
import { fileSize, logTail, rsyncGreeting } from './probe.js';
import { RsyncFront } from './front.js';
import { TransferLog, type TransferListener } from './transfer-log.js';
import type { RsyncDaemonOptions } from './options.js';

export type { RsyncDaemonOptions } from './options.js';

const MODULE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

export class RsyncDaemon {
  readonly host: string;
  readonly port: number;
  readonly module: string;
  readonly binary: string;
  readonly layout: LandingLayout;
  readonly transfers: TransferLog;
  /** The files each connection received, as its rsync logs them. */
  readonly landed: LandedLog;

  private readonly options: RsyncDaemonOptions;
  private readonly logger: Logger;
  private running = false;
  /** The listener on `port`; it starts an rsync per connection. */
  private readonly front: RsyncFront;

  constructor(options: RsyncDaemonOptions) {
    this.options = options;
    this.host = options.host ?? '127.0.0.1';
    this.port = options.port ?? 8873;
    this.module = options.module ?? 'preservd';
    this.binary = options.binary ?? 'rsync';
    this.logger = options.logger ?? silentLogger;
    this.layout = options.landing.layout;
    this.transfers = new TransferLog(this.layout.transfers, {
      pollMs: options.transferPollMs,
      logger: this.logger,
    });
    this.landed = new LandedLog(this.layout.landed, {
      pollMs: options.transferPollMs,
      logger: this.logger,
    });
    if (!MODULE_NAME.test(this.module)) {
      throw new Error(
        `rsync module name ${JSON.stringify(this.module)} must be letters, digits, ".", "_" or "-"`,
      );
    }
    if (!Number.isInteger(this.port) || this.port < 1 || this.port > 65535) {
      throw new Error(`rsync port ${this.port} is not a TCP port`);
    }
    if (!/^[^\s\/]+$/.test(this.host)) {
      throw new Error(`rsync listen address ${JSON.stringify(this.host)} is not a host name or address`);
    }
    this.front = new RsyncFront({
      host: this.host,
      port: this.port,
      logger: this.logger,
      serve: (socket) => this.serve(socket),
      admitted: (pid) => existsSync(join(this.layout.active, String(pid))),
      handshakeTimeoutMs: options.handshakeTimeoutMs,
    });
    for (const path of [this.layout.landing, this.layout.rsyncd]) {
      // Both end up verbatim in rsyncd.conf, which has no quoting and expands %VAR%.
      if (/[\n\r%]/.test(path) || path.trim() !== path) {
        throw new Error(`the data directory path must not contain "%", line breaks or edge spaces: ${path}`);
      }
    }
  }

  /**
   * Restarts of a long-lived rsync daemon: there is none any more (one rsync per connection),
   * so always 0; kept for the `preservd_rsync_restarts_total` metric.
   */
  get restarts(): number {
    return 0;
  }

  /** Pids of the rsyncs serving connections now (pending or admitted). */
  get connections(): number[] {
    return [...this.front.children.keys()];
  }

  /** `rsync://HOST:PORT/MODULE/<capability>/`; HOST is `advertisedHost` or the listen address. */
  uploadLink(capability: string, advertisedHost?: string): string {
    return rsyncLink(advertisedHost ?? this.host, this.port, this.module, capability);
  }

  /** Calls `listener` for every ended transfer; returns a function that unsubscribes. */
  onTransfer(listener: TransferListener): () => void {
    return this.transfers.onTransfer(listener);
  }

  /**
   * Writes the configuration and hooks, listens on the port, and resolves once a connection
   * to it is greeted by rsync. Rejects if rsync is not installed, the port is taken, or rsync
   * does not answer.
   */
  async start(): Promise<void> {
    if (this.running) return;
    const l = this.layout;
    await this.endLeftoverRsyncs();
    await rm(join(l.rsyncd, 'daemon.pid'), { force: true }); // the long-lived rsync's, before issue 23
    const live = await this.options.landing.liveTransfers(); // removes the stale records
    this.logger.debug({ liveTransfers: live.length }, 'rsync: stale active-transfer records removed');
    await this.writeFiles();
    this.running = true;
    try {
      await this.checkBinary();
      await this.front.listen();
      await this.waitUntilAnswering();
    } catch (err) {
      await this.stop();
      throw err;
    }
    this.transfers.start();
    this.landed.start();
    this.logger.info({ host: this.host, port: this.port, module: this.module }, 'rsync listener started');
  }

  /** Stops listening and ends every rsync and the transfers they serve: SIGTERM, then SIGKILL. */
  async stop(): Promise<void> {
    this.running = false;
    await this.front.close();
    await this.transfers.stop();
    await this.landed.stop();
    const groups = new Set(this.front.children.keys());
    if (groups.size === 0) return;
    const exited = [...this.front.children.values()].map(
      (child) => new Promise((resolve) => child.once('exit', resolve)),
    );
    await this.endGroups(groups);
    // Their exit events (which clear the listener's records) follow the reaping.
    await Promise.race([Promise.all(exited), sleep(1_000)]);
    this.logger.info({ groups: [...groups] }, 'rsync stopped');
  }

  /** Starts the rsync that serves one connection: inetd mode, the connection as its stdin. */
  private serve(socket: Socket): ChildProcess {
    const landedLog = this.landed.open();
    const child = spawnIsolated(
      this.binary,
      ['--daemon', `--config=${this.configFile}`],
      // Its own process group, so that its forks and hooks are ended with it.
      // umask 077: folders made by `--mkpath` stay private like the landing zone.
      // rsync itself points stdout and stderr at /dev/null; ours catches what setpriv or bash say.
      {
        cwd: this.layout.rsyncd,
        env: childEnv({ [LANDED_ENV]: landedLog }),
        umask: 0o077,
        detached: true,
        stdio: [socket, 'ignore', 'pipe'],
      },
    );
    const pid = child.pid;
    child.once('exit', () => this.landed.ended(landedLog));
    child.once('error', () => this.landed.ended(landedLog));
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (text: string) => {
      for (const line of text.split('\n').filter(Boolean))
        this.logger.warn({ rsyncPid: pid }, `rsync: ${line}`);
    });
    return child;
  }

  /** Runs `rsync --version`: a missing or broken rsync is reported at start, not per connection. */
  private async checkBinary(): Promise<void> {
    const child = spawnIsolated(this.binary, ['--version'], { stdio: 'ignore' });
    const code = await new Promise<number | null>((resolve, reject) => {
      child.once('exit', (exitCode) => resolve(exitCode));
      child.once('error', (err) => {
        if (isErrno(err, 'ENOENT')) {
          reject(
            new Error(
              `rsync is not installed: could not run "${this.binary}". Install it ` +
                '(Debian/Ubuntu: `apt-get install rsync`) or set the rsync binary option to its path.',
            ),
          );
        } else {
          reject(new Error(`could not start rsync ("${this.binary}"): ${err.message}`));
        }
      });
    });
    if (code !== 0) throw new Error(`"${this.binary} --version" exited with code ${code}: is it rsync?`);
  }

  /** Connects to our own port until rsync greets; rejects with what rsync logged if it never does. */
  private async waitUntilAnswering(): Promise<void> {
    const timeoutMs = this.options.startTimeoutMs ?? 10_000;
    const deadline = Date.now() + timeoutMs;
    const logOffset = await fileSize(this.logFile);
    const host = this.host === '0.0.0.0' || this.host === '::' ? 'localhost' : this.host;
    for (;;) {
      if ((await rsyncGreeting(host, this.port)) !== undefined) return;
      if (Date.now() > deadline) {
        const tail = await logTail(this.logFile, logOffset);
        throw new Error(
          `rsync did not answer on ${this.host}:${this.port} within ${timeoutMs} ms` +
            (tail ? `: ${tail}` : ''),
        );
      }
      await sleep(100);
    }
  }

  /** SIGTERM to each group; SIGKILL to what still runs after the deadline. */
  private async endGroups(groups: Set<number>): Promise<void> {
    const gone = async (): Promise<boolean> => {
      for (const g of groups) if (await groupRunning(g)) return false;
      return true;
    };
    for (const g of groups) signalGroup(g, 'SIGTERM');
    // rsync lingers 1.5–2 s after SIGTERM, a receiver in mid-transfer longer: that is normal.
    const deadline = Date.now() + (this.options.stopTimeoutMs ?? 5_000);
    while (!(await gone()) && Date.now() < deadline) await sleep(50);
    if (!(await gone())) {
      this.logger.warn({ groups: [...groups] }, 'rsync did not stop on SIGTERM; sending SIGKILL');
      for (const g of groups) signalGroup(g, 'SIGKILL');
      const killDeadline = Date.now() + 2_000;
      while (!(await gone()) && Date.now() < killDeadline) await sleep(50);
    }
  }

  /**
   * If preservd died without ending its rsyncs (SIGKILL, OOM; systemd would have ended them),
   * they may still be serving transfers: end the process groups of every process running our
   * configuration (an rsync daemon of an older preservd too). Without procfs, nothing is found.
   */
  private async endLeftoverRsyncs(): Promise<void> {
    const names = await readdir('/proc').catch(() => [] as string[]);
    const ours = (await processState(process.pid))?.pgrp;
    const groups = new Set<number>();
    for (const name of names) {
      if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
      const args = await commandLine(Number(name));
      if (args?.[0]?.endsWith('rsync') !== true || !args.includes(`--config=${this.configFile}`)) continue;
      const state = await processState(Number(name));
      if (state !== undefined && state.state !== 'Z' && state.pgrp !== ours) groups.add(state.pgrp);
    }
    if (groups.size === 0) return;
    this.logger.warn({ groups: [...groups] }, 'stopping rsync processes left running by an earlier preservd');
    await this.endGroups(groups);
  }

  private get logFile(): string {
    return join(this.layout.rsyncd, 'rsyncd.log');
  }

  private get configFile(): string {
    return join(this.layout.rsyncd, 'rsyncd.conf');
  }

  private async writeFiles(): Promise<void> {
    await installHooks(this.layout, this.module);
    await chmod(this.logFile, 0o600).catch(() => undefined); // earlier versions made it 0644
    await writeAtomically(
      this.configFile,
      rsyncdConfig({
        layout: this.layout,
        module: this.module,
        maxConnections: this.options.maxConnections ?? 20,
        fakeSuper: process.getuid?.() === 0,
        timeoutSeconds: this.options.timeoutSeconds ?? 600,
      }),
    );
  }
}
