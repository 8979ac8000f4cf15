/**
 * The rsync daemon that receives uploads: `preservd serve` runs `rsync --daemon` as a child
 * process, with a configuration and two hook scripts generated here under `<dataDir>/rsyncd/`.
 *
 * - One module (default `preservd`) rooted at `<dataDir>/landing`, write-only, unlisted, no
 *   rsync users or passwords: the capability in the path is the secret.
 * - The pre-xfer hook is the gate: it admits a transfer only into an existing, open
 *   `landing/<capability>/` and records it in `rsyncd/active/`; the post-xfer hook turns that
 *   record into a transfer record in `rsyncd/transfers/`, which `TransferLog` delivers.
 * - If rsync dies it is started again, with a growing delay; `stop()` ends it and every
 *   transfer it is serving.
 *
 * What the folders mean is described in `landing.ts`; watching uploads is `watcher.ts`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { watch, type FSWatcher } from 'node:fs';
import { mkdir, open, readdir, readFile, rm, stat, unlink } from 'node:fs/promises';
import net from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { assertCapability, isCapability } from './capability.js';
import {
  isErrno,
  LandingZone,
  landingLayout,
  silentLogger,
  writeAtomically,
  type LandingLayout,
  type Logger,
} from './landing.js';

export interface RsyncDaemonOptions {
  dataDir: string;
  /** Address rsync listens on. Default `127.0.0.1`. */
  host?: string;
  /** Default 8873. */
  port?: number;
  /** The rsync module name, the first path component of every upload link. Default `preservd`. */
  module?: string;
  /** The rsync executable. Default `rsync` (looked up in PATH). */
  binary?: string;
  /** Simultaneous connections; more are told to try again later. Default 20. */
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

/** One ended rsync transfer into a landing folder, as the post-xfer hook recorded it. */
export interface Transfer {
  capability: string;
  /** rsync's exit status: 0 complete; 23/24 partial; 12, 20, 30, 35 broken off, etc. */
  exitStatus: number;
  /** Epoch milliseconds. */
  endedAt: number;
  /** The client's address, when rsync told us. */
  hostAddr?: string;
}

export type TransferListener = (transfer: Transfer) => void | Promise<void>;

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

  constructor(options: RsyncDaemonOptions) {
    super();
    this.options = options;
    this.host = options.host ?? '127.0.0.1';
    this.port = options.port ?? 8873;
    this.module = options.module ?? 'preservd';
    this.binary = options.binary ?? 'rsync';
    this.logger = options.logger ?? silentLogger;
    this.layout = landingLayout(options.dataDir);
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
    assertCapability(capability);
    let host = advertisedHost ?? this.host;
    if (host.includes(':') && !host.startsWith('[')) host = `[${host}]`; // IPv6 literal
    return `rsync://${host}:${this.port}/${this.module}/${capability}/`;
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
    const l = this.layout;
    for (const dir of [l.landing, l.rsyncd, l.closed, l.active, l.transfers]) {
      await mkdir(dir, { recursive: true, mode: 0o700 });
    }
    await this.endLeftoverDaemon();
    const live = await new LandingZone(this.options.dataDir).cleanStaleTransfers();
    this.logger.debug({ liveTransfers: live }, 'rsync: stale active-transfer records removed');
    this.running = true;
    this.consecutiveFailures = 0;
    try {
      const child = await this.launch();
      await this.waitUntilAnswering(child);
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
    await this.transfers.stop();
    await this.terminate();
  }

  /** Writes config and hooks, spawns rsync; resolves once the process exists. */
  private async launch(): Promise<ChildProcess> {
    for (const g of this.orphanGroups) if (!groupExists(g)) this.orphanGroups.delete(g);
    await this.writeFiles();
    this.logOffset = await fileSize(this.logFile);
    const env = { ...process.env };
    delete env.RSYNC_NO_XFER_EXEC; // it would silently switch the gate off
    const child = spawn(
      this.binary,
      [
        '--daemon',
        '--no-detach',
        `--config=${this.configFile}`,
        `--port=${this.port}`,
        `--address=${this.host}`,
      ],
      // Its own process group, so stop() can end the per-connection children and hooks too.
      { cwd: this.layout.rsyncd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] },
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
          reject(new Error(`could not start rsync ("${this.binary}"): ${(err as Error).message}`));
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
    this.logger.info({ rsyncPid: pid, host: this.host, port: this.port, module: this.module }, 'rsync daemon started');
    return child;
  }

  /** Probes the port until rsync greets us; rejects if the child exits first or time runs out. */
  private async waitUntilAnswering(child: ChildProcess): Promise<void> {
    const deadline = Date.now() + (this.options.startTimeoutMs ?? 10_000);
    const exited = (): boolean => child.exitCode !== null || child.signalCode !== null;
    while (!exited()) {
      if (await rsyncGreets(this.host, this.port)) {
        // Another rsync on the same port would greet too: make sure ours is still alive.
        await sleep(50);
        if (exited()) break;
        if (this.child === child) {
          this.childReady = true;
          this.emit('ready', { pid: child.pid as number });
        }
        return;
      }
      if (Date.now() > deadline) {
        throw new Error(`rsync did not answer on ${this.host}:${this.port} within ${this.options.startTimeoutMs ?? 10_000} ms`);
      }
      await sleep(100);
    }
    const tail = await logTail(this.logFile, this.logOffset);
    throw new Error(
      `rsync exited (code ${child.exitCode ?? child.signalCode}) before answering on ${this.host}:${this.port}` +
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
      void this.restart(exitCode, signal, delayMs);
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
    let args: string[] = [];
    try {
      args = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0');
    } catch {
      // gone, or no procfs to make sure it is ours: leave it alone
    }
    if (Number.isSafeInteger(pid) && pid > 0 && args.includes(`--config=${this.configFile}`)) {
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

  private async writeFiles(): Promise<void> {
    const dir = this.layout.rsyncd;
    await mkdir(dir, { recursive: true, mode: 0o700 });
    await writeAtomically(join(dir, 'pre-xfer.sh'), preXferScript(this.layout, this.module), 0o700);
    await writeAtomically(join(dir, 'post-xfer.sh'), postXferScript(this.layout), 0o700);
    await writeAtomically(
      this.configFile,
      rsyncdConfig({
        layout: this.layout,
        module: this.module,
        maxConnections: this.options.maxConnections ?? 20,
        timeoutSeconds: this.options.timeoutSeconds ?? 600,
      }),
    );
  }
}

/** The generated rsyncd.conf. rsync re-reads it on every connection. */
export function rsyncdConfig(o: {
  layout: LandingLayout;
  module: string;
  maxConnections: number;
  timeoutSeconds: number;
}): string {
  const { layout, module } = o;
  const lines = [
    '# Generated by preservd at start-up (src/ingest/rsyncd.ts); edits are overwritten.',
    `log file = ${join(layout.rsyncd, 'rsyncd.log')}`,
    `lock file = ${join(layout.rsyncd, 'rsyncd.lock')}`,
    'use chroot = no',
    'reverse lookup = no',
    '',
    `[${module}]`,
    `  path = ${layout.landing}`,
    '  read only = no',
    '  write only = yes',
    '  list = no',
    '  munge symlinks = yes',
    `  max connections = ${o.maxConnections}`,
    `  timeout = ${o.timeoutSeconds}`,
    // Whatever modes the client sends, the daemon's user can read and write what arrives.
    '  incoming chmod = Du=rwx,Fu+rw,go=',
    // Options that would read or write outside the capability's folder (a relative DIR may
    // point at "../<other>"); --delete stays allowed, the client relies on it.
    '  refuse options = temp-dir partial-dir backup-dir link-dest copy-dest compare-dest',
    `  pre-xfer exec = /bin/sh ${shellQuote(join(layout.rsyncd, 'pre-xfer.sh'))}`,
    `  post-xfer exec = /bin/sh ${shellQuote(join(layout.rsyncd, 'post-xfer.sh'))}`,
  ];
  const uid = process.getuid?.();
  if (uid === 0) {
    // As root, rsync would drop to "nobody" for the transfer; keep our own identity instead.
    lines.push(`  uid = ${uid}`, `  gid = ${process.getgid?.() ?? 0}`);
  }
  return lines.join('\n') + '\n';
}

/**
 * The gate. rsync runs it once per connection before any byte is written, with the request as
 * the client typed it in RSYNC_REQUEST (`MODULE/<capability>/…`, not sanitized) and the server
 * arguments in RSYNC_ARG0..N, of which the last, after ".", is the destination rsync will
 * really use (sanitized: `<cap>/../x/` arrives as `x/`). Both must name the same open
 * capability. Exit 1 refuses; rsync shows the client our stdout line.
 */
export function preXferScript(layout: LandingLayout, module: string): string {
  return `#!/bin/sh
# preservd's upload gate, generated at start-up by src/ingest/rsyncd.ts; edits are overwritten.
landing=${shellQuote(layout.landing)}
closed=${shellQuote(layout.closed)}
active=${shellQuote(layout.active)}
module=${shellQuote(module)}

refuse() {
  echo "preservd: $1"
  exit 1
}

case \${RSYNC_PID-} in ''|*[!0-9]*) refuse 'internal error: no transfer id' ;; esac

i=0
prev=
last=
while eval "[ -n \\"\\\${RSYNC_ARG$i+x}\\" ]"; do
  eval "arg=\\\$RSYNC_ARG$i"
  if [ "$arg" = --sender ]; then
    refuse 'upload links are write-only: nothing can be downloaded from them'
  fi
  prev=$last
  last=$arg
  i=$((i + 1))
done

request=\${RSYNC_REQUEST-}
cap=\${last%%/*}
case $cap in
  ''|.|*[!0-9a-f]*) refuse "upload into your request's upload_link (rsync://HOST:PORT/$module/<capability>/)" ;;
esac
[ "$prev" = . ] || refuse 'give exactly one destination: the upload_link'
[ \${#cap} -eq 32 ] || refuse 'unknown upload link'
case $request in
  "$module/$cap"|"$module/$cap/"*) ;;
  *) refuse 'unknown upload link' ;;
esac
case "/$request/" in
  */../*) refuse 'an upload link must not contain ".."' ;;
esac
[ -d "$landing/$cap" ] || refuse 'unknown upload link, or its upload is finished'

# Record first, then look for the closed marker: LandingZone.close() writes the marker first
# and then counts records, so a transfer is either refused here or counted there.
tmp="$active/.$RSYNC_PID.tmp"
if ! { printf '%s\\n' "$cap" > "$tmp" && mv -f "$tmp" "$active/$RSYNC_PID"; }; then
  rm -f "$tmp"
  refuse 'the server cannot record this transfer; try again later'
fi
if [ -e "$closed/$cap" ]; then
  rm -f "$active/$RSYNC_PID"
  refuse 'this upload is complete: no more changes are accepted'
fi
exit 0
`;
}

/**
 * Runs when a transfer has ended (after the client is gone, so it cannot tell the client
 * anything). Turns the gate's active record into a transfer record; a refused transfer has no
 * active record and leaves nothing.
 */
export function postXferScript(layout: LandingLayout): string {
  return `#!/bin/sh
# preservd's transfer recorder, generated at start-up by src/ingest/rsyncd.ts; edits are overwritten.
active=${shellQuote(layout.active)}
transfers=${shellQuote(layout.transfers)}

case \${RSYNC_PID-} in ''|*[!0-9]*) exit 0 ;; esac
record="$active/$RSYNC_PID"
[ -f "$record" ] || exit 0
cap=$(cat "$record")
ended=$(date +%s%3N 2>/dev/null)
case $ended in ''|*[!0-9]*) ended=$(date +%s)000 ;; esac
tmp="$transfers/.$RSYNC_PID.tmp"
{
  printf 'capability=%s\\n' "$cap"
  printf 'exit_status=%s\\n' "\${RSYNC_EXIT_STATUS-}"
  printf 'raw_status=%s\\n' "\${RSYNC_RAW_STATUS-}"
  printf 'ended_at=%s\\n' "$ended"
  printf 'host_addr=%s\\n' "\${RSYNC_HOST_ADDR-}"
  printf 'pid=%s\\n' "$RSYNC_PID"
} > "$tmp" && mv -f "$tmp" "$transfers/$ended-$RSYNC_PID" && rm -f "$record"
exit 0
`;
}

/**
 * Delivers the post-xfer hook's transfer records to listeners, oldest first, and removes each
 * record only after every listener has resolved: a crash re-delivers, so listeners must be
 * idempotent. A record whose delivery failed is retried later.
 */
export class TransferLog {
  private readonly dir: string;
  private readonly pollMs: number;
  private readonly retryMs: number;
  private readonly logger: Logger;
  private readonly listeners = new Set<TransferListener>();
  private readonly failedAt = new Map<string, number>();
  private watcher: FSWatcher | undefined;
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> | undefined;
  private sweepAgain = false;
  private started = false;

  constructor(dir: string, options: { pollMs?: number; retryMs?: number; logger?: Logger } = {}) {
    this.dir = dir;
    this.pollMs = options.pollMs ?? 2_000;
    this.retryMs = options.retryMs ?? 30_000;
    this.logger = options.logger ?? silentLogger;
  }

  onTransfer(listener: TransferListener): () => void {
    this.listeners.add(listener);
    if (this.started) void this.sweep();
    return () => this.listeners.delete(listener);
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    try {
      this.watcher = watch(this.dir, () => void this.sweep());
      this.watcher.on('error', (err) => this.logger.warn({ err }, 'transfer records: fs.watch failed; polling only'));
    } catch (err) {
      this.logger.warn({ err }, 'transfer records: fs.watch unavailable; polling only');
    }
    this.timer = setInterval(() => void this.sweep(), this.pollMs);
    this.timer.unref();
    void this.sweep();
  }

  /** Stops looking for records and waits for a delivery in progress. */
  async stop(): Promise<void> {
    this.started = false;
    this.watcher?.close();
    this.watcher = undefined;
    clearInterval(this.timer);
    this.timer = undefined;
    await this.sweeping;
  }

  /** Delivers every pending record now; concurrent calls share one pass (plus one more). */
  sweep(): Promise<void> {
    if (this.sweeping) {
      this.sweepAgain = true;
      return this.sweeping;
    }
    this.sweeping = (async () => {
      try {
        do {
          this.sweepAgain = false;
          await this.deliverPending();
        } while (this.sweepAgain && this.listeners.size > 0);
      } catch (err) {
        this.logger.error({ err }, 'transfer records could not be read');
      } finally {
        this.sweeping = undefined;
      }
    })();
    return this.sweeping;
  }

  private async deliverPending(): Promise<void> {
    if (this.listeners.size === 0) return;
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch (err) {
      if (isErrno(err, 'ENOENT')) return;
      throw err;
    }
    for (const name of names.filter((n) => /^\d+-\d+$/.test(n)).sort()) {
      const failed = this.failedAt.get(name);
      if (failed !== undefined && Date.now() - failed < this.retryMs) continue;
      const file = join(this.dir, name);
      let text: string;
      try {
        text = await readFile(file, 'utf8');
      } catch (err) {
        if (isErrno(err, 'ENOENT')) continue;
        throw err;
      }
      const transfer = parseTransferRecord(text);
      if (!transfer) {
        this.logger.warn({ record: name, text }, 'transfer record is malformed; dropped');
        await unlink(file).catch(() => {});
        continue;
      }
      try {
        for (const listener of [...this.listeners]) await listener(transfer);
      } catch (err) {
        this.failedAt.set(name, Date.now());
        this.logger.error({ err, record: name, capability: transfer.capability }, 'transfer listener failed; will retry');
        continue;
      }
      this.failedAt.delete(name);
      await unlink(file).catch((err: unknown) => {
        if (!isErrno(err, 'ENOENT')) throw err;
      });
    }
  }
}

/** Parses the post-xfer hook's `key=value` lines; undefined if a required key is missing. */
export function parseTransferRecord(text: string): Transfer | undefined {
  const fields = new Map<string, string>();
  for (const line of text.split('\n')) {
    const eq = line.indexOf('=');
    if (eq > 0) fields.set(line.slice(0, eq), line.slice(eq + 1).trim());
  }
  const capability = fields.get('capability');
  const exitStatus = Number(fields.get('exit_status') || NaN);
  const endedAt = Number(fields.get('ended_at') || NaN);
  if (!isCapability(capability) || !Number.isInteger(exitStatus) || !Number.isInteger(endedAt)) return undefined;
  const hostAddr = fields.get('host_addr');
  return hostAddr ? { capability, exitStatus, endedAt, hostAddr } : { capability, exitStatus, endedAt };
}

/** Single-quotes `s` for POSIX sh. */
export function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** Connects and waits for rsync's `@RSYNCD:` greeting, then hangs up (the log shows a connect). */
export function rsyncGreets(host: string, port: number, timeoutMs = 1_000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    let received = '';
    const finish = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => finish(false));
    socket.on('error', () => finish(false));
    socket.on('close', () => finish(received.startsWith('@RSYNCD:')));
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      received += chunk;
      if (received.includes('\n')) {
        socket.end();
        finish(received.startsWith('@RSYNCD:'));
      }
    });
  });
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch (err) {
    if (!isErrno(err, 'ESRCH')) throw err;
  }
}

function groupExists(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (err) {
    return isErrno(err, 'EPERM');
  }
}

/**
 * Whether any process of the group is still running. Unlike `groupExists`, zombies do not
 * count: rsync's per-connection processes are orphaned when the listener dies, and where
 * PID 1 does not reap orphans (some containers) they would otherwise hold up stop() forever.
 */
async function groupRunning(pgid: number): Promise<boolean> {
  if (!groupExists(pgid)) return false;
  let names: string[];
  try {
    names = await readdir('/proc');
  } catch {
    return true; // no procfs: trust kill(0)
  }
  const states = await Promise.all(
    names
      .filter((n) => /^\d+$/.test(n))
      .map(async (n) => {
        try {
          const stat = await readFile(`/proc/${n}/stat`, 'utf8');
          // "<pid> (<comm>) <state> <ppid> <pgrp> ..."
          const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
          return Number(pgrp) === pgid && state !== 'Z' && state !== 'X';
        } catch {
          return false;
        }
      }),
  );
  return states.some(Boolean);
}

async function fileSize(file: string): Promise<number> {
  try {
    return (await stat(file)).size;
  } catch {
    return 0;
  }
}

/** The last few lines rsync logged since `from`, on one line, for a start-up error. */
async function logTail(file: string, from: number): Promise<string> {
  try {
    const handle = await open(file, 'r');
    try {
      const { size } = await handle.stat();
      const length = Math.min(size - from, 4096);
      if (length <= 0) return '';
      const { buffer, bytesRead } = await handle.read(Buffer.alloc(length), 0, length, size - length);
      const lines = buffer.subarray(0, bytesRead).toString('utf8').split('\n').filter(Boolean);
      return lines
        .slice(-3)
        .map((l) => l.replace(/^\S+ \S+ \[\d+\] /, ''))
        .join('; ');
    } finally {
      await handle.close();
    }
  } catch {
    return '';
  }
}
