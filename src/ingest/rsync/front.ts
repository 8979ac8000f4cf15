/**
 * The listener on the rsync port. It reads nothing: each connection, still paused, is handed to
 * an rsync of its own started in inetd mode (the socket is its stdin), and our copy of the
 * socket is closed, so upload bytes go straight from the client into rsync.
 *
 * - A connection is pending until the gate (`pre-xfer.sh`) admits its transfer, which it
 *   records as `active/<pid of that rsync>`. A pending rsync is killed (its process group) after
 *   `handshakeTimeoutMs`; when too many are pending, in all or from one address, the oldest is
 *   killed. So idle connections cost a bounded number of short-lived rsync processes and never
 *   an upload slot, and a real client, which reaches the gate in a few round trips, gets in.
 * - rsync itself answers everything else: a wrong link, a download or too many uploads get the
 *   gate's message in rsync's own words.
 */
import type { ChildProcess } from 'node:child_process';
import net from 'node:net';
import { signalGroup } from '../../process/groups.js';
import type { Logger } from '../../logger.js';

export interface FrontOptions {
  host: string;
  port: number;
  logger: Logger;
  /** Starts the rsync that serves `socket` (as its stdin), leader of a process group of its own. */
  serve: (socket: net.Socket) => ChildProcess;
  /** Whether the gate has admitted the transfer of the rsync with this pid. */
  admitted: (pid: number) => boolean;
  /** How long a connection may take from connecting to being admitted. Default 10 s. */
  handshakeTimeoutMs?: number | undefined;
  /** Connections not yet admitted, in all and from one address. Default 256 and 32. */
  maxPending?: number;
  maxPendingPerAddress?: number;
}

interface Pending {
  pid: number;
  address: string;
  timer: NodeJS.Timeout;
}

export class RsyncFront {
  private readonly server: net.Server;
  /** Every rsync started and not yet exited, by pid (each leads its process group). */
  readonly children = new Map<number, ChildProcess>();
  private readonly pending = new Map<number, Pending>();
  private readonly pendingByAddress = new Map<string, Set<Pending>>();

  constructor(private readonly o: FrontOptions) {
    this.server = net.createServer({ pauseOnConnect: true }, (socket) => this.accept(socket));
  }

  /** Starts listening; rejects with a clear message when the port is taken. */
  listen(): Promise<void> {
    return new Promise((resolve, reject) => {
      const fail = (err: NodeJS.ErrnoException): void => {
        const why =
          err.code === 'EADDRINUSE' ? 'is already in use' : `cannot be listened on (${err.message})`;
        reject(new Error(`rsync port ${this.o.host}:${this.o.port} ${why}`));
      };
      this.server.once('error', fail);
      this.server.listen({ host: this.o.host, port: this.o.port }, () => {
        this.server.off('error', fail);
        this.server.on('error', (err) => this.o.logger.warn({ err }, 'rsync listener error'));
        resolve();
      });
    });
  }

  /** Stops accepting connections (the rsyncs already started are the caller's to end). */
  async close(): Promise<void> {
    if (!this.server.listening) return;
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(socket: net.Socket): void {
    const address = socket.remoteAddress ?? '';
    socket.on('error', () => undefined);
    let child: ChildProcess;
    try {
      child = this.o.serve(socket);
    } catch (err) {
      this.o.logger.error({ err }, 'rsync listener: could not start rsync for a connection');
      return;
    } finally {
      // rsync holds its own copy of the connection; closing ours neither ends nor resets it.
      socket.destroy();
    }
    const pid = child.pid;
    if (pid === undefined) {
      child.once('error', (err) =>
        this.o.logger.error({ err }, 'rsync listener: could not start rsync for a connection'),
      );
      return;
    }
    this.children.set(pid, child);
    child.on('error', (err) => this.o.logger.warn({ err, rsyncPid: pid }, 'rsync process error'));
    child.once('exit', () => {
      this.children.delete(pid);
      this.unpend(pid);
    });
    this.pend(pid, address);
  }

  private pend(pid: number, address: string): void {
    let mine = this.pendingByAddress.get(address);
    if (mine === undefined) this.pendingByAddress.set(address, (mine = new Set()));
    // Map and Set keep insertion order: the first is the one pending longest.
    this.makeRoom(mine.values(), this.o.maxPendingPerAddress ?? 32, () => mine.size);
    this.makeRoom(this.pending.values(), this.o.maxPending ?? 256, () => this.pending.size);
    const entry: Pending = {
      pid,
      address,
      timer: setTimeout(() => this.expire(pid), this.o.handshakeTimeoutMs ?? 10_000),
    };
    mine.add(entry);
    this.pending.set(pid, entry);
  }

  /** Ends the oldest pending connections until fewer than `max` remain; admitted ones just leave the list. */
  private makeRoom(oldestFirst: IterableIterator<Pending>, max: number, size: () => number): void {
    for (const entry of [...oldestFirst]) {
      if (size() < max) return;
      this.expire(entry.pid);
    }
  }

  /** A pending connection's time is up: kept if the gate admitted it meanwhile, killed if not. */
  private expire(pid: number): void {
    if (!this.pending.has(pid)) return;
    this.unpend(pid);
    if (!this.o.admitted(pid)) signalGroup(pid, 'SIGKILL');
  }

  private unpend(pid: number): void {
    const entry = this.pending.get(pid);
    if (entry === undefined) return;
    clearTimeout(entry.timer);
    this.pending.delete(pid);
    const mine = this.pendingByAddress.get(entry.address);
    mine?.delete(entry);
    if (mine?.size === 0) this.pendingByAddress.delete(entry.address);
  }
}
