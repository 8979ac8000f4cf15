/**
 * The rsync daemon that receives uploads: `preservd serve` runs `rsync --daemon` as a child
 * process, with the configuration and hook scripts of `config.ts` under `<dataDir>/rsyncd/`.
 *
 * - One module (default `preservd`) rooted at `<dataDir>/landing`, write-only, unlisted, no
 *   rsync users or passwords: the capability in the path is the secret.
 * - rsync listens on a free loopback port; the rsync port itself is `front.ts`, which answers
 *   the handshake and connects only finished handshakes to rsync (idle ones cost no process).
 * - The pre-xfer hook is the gate: it admits a transfer only into an existing, open
 *   `landing/<capability>/` and records it in `rsyncd/active/`; the post-xfer hook turns that
 *   record into a transfer record in `rsyncd/transfers/`, which `TransferLog` delivers.
 * - If rsync dies it is started again, with a growing delay; `stop()` ends it and every
 *   transfer it is serving. rsync holds none of preservd's descriptors and gets SIGTERM when
 *   preservd dies (`spawnIsolated`); an rsync left by a preservd killed outright is ended at
 *   the next start (pid file plus command line).
 *
 * What the folders mean is described in `../landing.ts`; watching uploads is `../watcher.ts`.
 */
import type { ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { chmod, readFile, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { commandLine, groupExists, groupRunning, signalGroup } from '../../process/groups.js';
import { childEnv, spawnIsolated } from '../../process/spawn.js';
import { writeAtomically } from '../../fs/atomic.js';
import { isErrno } from '../../fs/errors.js';
import { silentLogger, type Logger } from '../../logger.js';
import type { LandingLayout } from '../landing.js';
import { installHooks, rsyncdConfig } from './config.js';
import { rsyncLink } from '../upload-link.js';
import { fileSize, freeLoopbackPort, logTail, rsyncGreeting } from './probe.js';
import { RsyncFront } from './front.js';
import { TransferLog, type TransferListener } from './transfer-log.js';
import type { RestartInfo, RsyncDaemonEvents, RsyncDaemonOptions } from './options.js';

export type { RestartInfo, RsyncDaemonEvents, RsyncDaemonOptions } from './options.js';

const MODULE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
/** A run this long counts as healthy: the next restart starts from the shortest delay again. */
const STABLE_RUN_MS = 30_000;

export class RsyncDaemon extends EventEmitter<RsyncDaemonEvents> {
  readonly host: string;
  readonly port: number;
  readonly module: string;
  readonly binary: string;
  readonly layout: LandingLayout;
  readonly transfers: TransferLog;

  private readonly options: RsyncDaemonOptions;
  private readonly logger: Logger;
  private child: ChildProcess | undefined;
  private childReady = false;
  private spawnedAt = 0;
  private consecutiveFailures = 0;
  private restartCount = 0;
  private running = false;
  private restartTimer: NodeJS.Timeout | undefined;
  private readonly orphanGroups = new Set<number>();
  /** Size of rsyncd.log when the current rsync was started, to quote what it logged since. */
  private logOffset = 0;
  /** The listener on `port`; rsync itself listens on `backendPort`, on loopback only. */
  private readonly front: RsyncFront;
  private backendPort = 0;
  private greeting: string | undefined;

  constructor(options: RsyncDaemonOptions) {
    super();
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
    if (!MODULE_NAME.test(this.module)) {
      throw new Error(`rsync module name ${JSON.stringify(this.module)} must be letters, digits, ".", "_" or "-"`);
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
      module: this.module,
      logger: this.logger,
      backend: () => (this.childReady && this.greeting !== undefined ? { port: this.backendPort, greeting: this.greeting } : undefined),
      isOpen: (capability) => this.isOpen(capability),
    });
    for (const path of [this.layout.landing, this.layout.rsyncd]) {
      // Both end up verbatim in rsyncd.conf, which has no quoting and expands %VAR%.
      if (/[\n\r%]/.test(path) || path.trim() !== path) {
        throw new Error(`the data directory path must not contain "%", line breaks or edge spaces: ${path}`);
      }
    }
  }

  /** How many times rsync was restarted after dying. */
  get restarts(): number {
    return this.restartCount;
  }

  /** Pid of the running rsync daemon, if any. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** True while rsync is running and has answered on its port. */
  get ready(): boolean {
    return this.childReady;
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
   * Writes the configuration and hooks, starts rsync and resolves once it answers on its port.
   * Rejects if rsync is not installed or exits before answering (port taken, bad address).
   */
  async start(): Promise<void> {
    if (this.running) return;
    await this.endLeftoverDaemon();
    const live = await this.options.landing.liveTransfers(); // removes the stale records
    this.logger.debug({ liveTransfers: live.length }, 'rsync: stale active-transfer records removed');
    this.running = true;
    this.consecutiveFailures = 0;
    try {
      const child = await this.launch();
      await this.waitUntilAnswering(child);
      await this.front.listen();
    } catch (err) {
      this.running = false;
      await this.terminate();
      throw err;
    }
    this.transfers.start();
  }

  /** Stops rsync and every transfer it serves: SIGTERM, then SIGKILL after the deadline. */
  async stop(): Promise<void> {
    this.running = false;
    clearTimeout(this.restartTimer);
    this.restartTimer = undefined;
    await this.front.close();
    await this.transfers.stop();
    await this.terminate();
  }

  /** Writes config and hooks, spawns rsync; resolves once the process exists. */
  private async launch(): Promise<ChildProcess> {
    for (const g of this.orphanGroups) if (!groupExists(g)) this.orphanGroups.delete(g);
    await this.writeFiles();
    this.logOffset = await fileSize(this.logFile);
    this.backendPort = await freeLoopbackPort();
    const child = spawnIsolated(
      this.binary,
      ['--daemon', '--no-detach', `--config=${this.configFile}`, `--port=${this.backendPort}`, '--address=127.0.0.1'],
      // Its own process group, so stop() can end the per-connection children and hooks too.
      // umask 077: folders made by `--mkpath` and the log stay private like the landing zone.
      { cwd: this.layout.rsyncd, env: childEnv(), umask: 0o077, detached: true, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
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
    const pid = child.pid as number;
    this.child = child;
    this.childReady = false;
    this.spawnedAt = Date.now();
    for (const stream of [child.stdout, child.stderr]) {
      stream?.setEncoding('utf8');
      stream?.on('data', (text: string) => {
        for (const line of text.split('\n').filter(Boolean)) this.logger.warn({ rsyncPid: pid }, `rsync: ${line}`);
      });
    }
    child.once('exit', (exitCode, signal) => this.onExit(child, pid, exitCode, signal));
    child.on('error', (err) => this.logger.warn({ err, rsyncPid: pid }, 'rsync process error'));
    await writeAtomically(this.pidFile, `${pid}\n`);
    this.logger.info({ rsyncPid: pid, host: this.host, port: this.port, backendPort: this.backendPort, module: this.module }, 'rsync daemon started');
    return child;
  }

  /** Probes the port until rsync greets us; rejects if the child exits first or time runs out. */
  private async waitUntilAnswering(child: ChildProcess): Promise<void> {
    const deadline = Date.now() + (this.options.startTimeoutMs ?? 10_000);
    const exited = (): boolean => child.exitCode !== null || child.signalCode !== null;
    while (!exited()) {
      const greeting = await rsyncGreeting('127.0.0.1', this.backendPort);
      if (greeting !== undefined) {
        // Another rsync on the same port would greet too: make sure ours is still alive.
        await sleep(50);
        if (exited()) break;
        if (this.child === child) {
          this.greeting = greeting;
          this.childReady = true;
          this.emit('ready', { pid: child.pid as number });
        }
        return;
      }
      if (Date.now() > deadline) {
        throw new Error(`rsync did not answer on 127.0.0.1:${this.backendPort} within ${this.options.startTimeoutMs ?? 10_000} ms`);
      }
      await sleep(100);
    }
    const tail = await logTail(this.logFile, this.logOffset);
    throw new Error(
      `rsync exited (code ${child.exitCode ?? child.signalCode}) before answering on 127.0.0.1:${this.backendPort}` +
        (tail ? `: ${tail}` : ''),
    );
  }

  private onExit(child: ChildProcess, pid: number, exitCode: number | null, signal: NodeJS.Signals | null): void {
    this.emit('exit', { pid, exitCode, signal });
    // Transfers it was serving run on in its process group; stop() must still end them.
    if (this.running && groupExists(pid)) this.orphanGroups.add(pid);
    if (this.child !== child) return;
    this.child = undefined;
    this.childReady = false;
    if (!this.running) return;
    if (Date.now() - this.spawnedAt > STABLE_RUN_MS) this.consecutiveFailures = 0;
    this.scheduleRestart(exitCode, signal);
  }

  private scheduleRestart(exitCode: number | null, signal: NodeJS.Signals | null): void {
    const initial = this.options.restartDelayMs ?? 250;
    const max = this.options.maxRestartDelayMs ?? 30_000;
    const delayMs = Math.min(max, initial * 2 ** this.consecutiveFailures);
    this.consecutiveFailures += 1;
    this.logger.warn({ exitCode, signal, delayMs }, 'rsync daemon died; restarting');
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      this.restart(exitCode, signal, delayMs).catch((err: unknown) => this.logger.error({ err }, 'rsync daemon restart failed'));
    }, delayMs);
  }

  private async restart(exitCode: number | null, signal: NodeJS.Signals | null, delayMs: number): Promise<void> {
    if (!this.running) return;
    let child: ChildProcess;
    try {
      child = await this.launch();
    } catch (err) {
      this.logger.error({ err }, 'rsync daemon could not be restarted');
      if (this.running) this.scheduleRestart(exitCode, signal);
      return;
    }
    if (!this.running) {
      await this.terminate();
      return;
    }
    this.restartCount += 1;
    const info: RestartInfo = { restarts: this.restartCount, pid: child.pid as number, exitCode, signal, delayMs };
    this.logger.warn({ restarts: info.restarts, rsyncPid: info.pid, exitCode, signal, delayMs }, 'rsync daemon restarted');
    this.emit('restart', info);
    try {
      await this.waitUntilAnswering(child);
    } catch (err) {
      // If it exited, onExit has scheduled the next attempt; if it hangs, end it to get one.
      this.logger.error({ err }, 'restarted rsync daemon does not answer');
      if (this.child === child) child.kill('SIGKILL');
    }
  }

  /**
   * Ends the current rsync and its process group, and the groups of earlier rsyncs that died
   * while serving transfers (their per-connection processes outlive them).
   */
  private async terminate(): Promise<void> {
    const child = this.child;
    const groups = new Set([...this.orphanGroups].filter(groupExists));
    this.orphanGroups.clear();
    if (child?.pid !== undefined) groups.add(child.pid);
    if (groups.size === 0) return;
    await this.endGroups(groups, () => !child || child.exitCode !== null || child.signalCode !== null);
    if (this.child === child) this.child = undefined;
    this.childReady = false;
    await rm(this.pidFile, { force: true });
    this.logger.info({ groups: [...groups] }, 'rsync daemon stopped');
  }

  /** SIGTERM to each group; SIGKILL to what still runs after the deadline. */
  private async endGroups(groups: Set<number>, leaderExited: () => boolean): Promise<void> {
    const gone = async (): Promise<boolean> => {
      if (!leaderExited()) return false;
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
   * If preservd died without stopping rsync (SIGKILL, OOM; systemd would have ended it), that
   * rsync still holds the port: end it, but only if it is ours, running our configuration.
   */
  private async endLeftoverDaemon(): Promise<void> {
    let pid: number;
    try {
      pid = Number((await readFile(this.pidFile, 'utf8')).trim());
    } catch {
      return;
    }
    // Gone, or no procfs to make sure it is ours (undefined): leave it alone.
    const args = Number.isSafeInteger(pid) && pid > 0 ? await commandLine(pid) : undefined;
    if (args?.includes(`--config=${this.configFile}`)) {
      this.logger.warn({ rsyncPid: pid }, 'stopping the rsync daemon left running by an earlier preservd');
      await this.endGroups(new Set([pid]), () => true);
    }
    await rm(this.pidFile, { force: true });
  }

  private get logFile(): string {
    return join(this.layout.rsyncd, 'rsyncd.log');
  }

  private get configFile(): string {
    return join(this.layout.rsyncd, 'rsyncd.conf');
  }

  /** Our record of the running rsync's pid (not rsync's own `pid file`, which a crash leaves). */
  private get pidFile(): string {
    return join(this.layout.rsyncd, 'daemon.pid');
  }

  /** An open upload: its landing folder exists and it is not closed (the gate checks again). */
  private async isOpen(capability: string): Promise<boolean> {
    const folder = await stat(join(this.layout.landing, capability)).catch(() => undefined);
    if (folder?.isDirectory() !== true) return false;
    return (await stat(join(this.layout.closed, capability)).catch(() => undefined)) === undefined;
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
