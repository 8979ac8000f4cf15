/**
 * The listener on the rsync port, in front of the real rsync daemon (which listens on an
 * internal loopback port). It answers rsync's daemon handshake itself (greeting, module name,
 * arguments up to the destination) and only then connects the client to rsync:
 *
 * - A connection still in its handshake costs a socket here, not an rsync process and not an
 *   rsync slot. It is dropped after `handshakeTimeoutMs`; when too many are waiting, in all or
 *   from one address, the oldest is dropped, so idle connections cannot keep uploads out.
 * - A handshake naming an open upload link is passed to rsync to run its course (the gate,
 *   `pre-xfer.sh`, checks it again and takes an upload slot). Any other is passed to rsync only
 *   for `refusalMs`, and only `maxRefusing` at once, so that its gate can tell the client why:
 *   a refusal travels in rsync's binary protocol, which this file does not speak.
 */
import net from 'node:net';
import type { Logger } from '../../logger.js';

export interface FrontOptions {
  host: string;
  port: number;
  module: string;
  /** Where rsync listens now and the greeting it sends; undefined while it restarts. */
  backend: () => { port: number; greeting: string } | undefined;
  /** Whether `capability` names an open upload. */
  isOpen: (capability: string) => Promise<boolean>;
  logger: Logger;
  /** How long a client may take from connecting to its last argument. Default 10 s. */
  handshakeTimeoutMs?: number;
  /** Connections in their handshake, in all and from one address. Default 1024 and 32. */
  maxWaiting?: number;
  maxWaitingPerAddress?: number;
  /** Connections refused by the gate at once, and how long each may take. Default 8, 10 s. */
  maxRefusing?: number;
  refusalMs?: number;
}

/** Ends `socket` once it has written what it holds; destroys it if that takes too long. */
function finish(socket: net.Socket): void {
  socket.end();
  setTimeout(() => socket.destroy(), 30_000).unref();
}

/** A handshake longer than this is not an rsync client's. */
const MAX_HANDSHAKE_BYTES = 64 * 1024;
const CAPABILITY = /^[0-9a-f]{32}$/;

interface Waiting {
  socket: net.Socket;
  address: string;
  timer: NodeJS.Timeout;
}

export class RsyncFront {
  private readonly server: net.Server;
  private readonly waiting = new Set<Waiting>();
  private readonly waitingByAddress = new Map<string, Set<Waiting>>();
  private readonly refusing = new Set<net.Socket>();
  private readonly sockets = new Set<net.Socket>();

  constructor(private readonly o: FrontOptions) {
    this.server = net.createServer((socket) => this.accept(socket));
  }

  /** Starts listening; rejects with a clear message when the port is taken. */
  listen(): Promise<void> {
    return new Promise((resolve, reject) => {
      const fail = (err: NodeJS.ErrnoException): void => {
        const why = err.code === 'EADDRINUSE' ? 'is already in use' : `cannot be listened on (${err.message})`;
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

  /** Stops listening and drops every connection, in its handshake or passed to rsync. */
  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    if (this.server.listening) await closed;
  }

  private accept(client: net.Socket): void {
    this.track(client);
    const backend = this.o.backend();
    if (backend === undefined) {
      client.end('@ERROR: the upload service is restarting; try again in a few seconds\n');
      return;
    }
    client.setNoDelay(true);
    client.write(backend.greeting);
    const entry = this.wait(client);
    const handshake = new Handshake(this.o.module);
    const onData = (chunk: Buffer): void => {
      const step = handshake.add(chunk);
      if (step.reply !== undefined) client.write(step.reply);
      if (step.end !== undefined) {
        this.unwait(entry);
        client.end(step.end);
      } else if (step.done) {
        this.unwait(entry);
        client.off('data', onData);
        client.pause();
        void this.pass(client, handshake);
      }
    };
    client.on('data', onData);
  }

  /** Connects a finished handshake to rsync and replays it there. */
  private async pass(client: net.Socket, handshake: Handshake): Promise<void> {
    const capability = handshake.capability();
    const admitted = capability !== undefined && (await this.o.isOpen(capability).catch(() => false));
    const backend = this.o.backend();
    if (client.destroyed) return;
    if (backend === undefined) {
      client.destroy(); // past the text stage: rsync's client reports the closed connection
      return;
    }
    if (!admitted) this.refuseLater(client);
    const upstream = net.connect({ host: '127.0.0.1', port: backend.port });
    this.track(upstream);
    upstream.setNoDelay(true);
    // One side gone: let the other flush what it still holds (rsync's last messages), then go.
    client.once('close', () => finish(upstream));
    upstream.once('close', () => finish(client));
    upstream.on('error', (err) => this.o.logger.warn({ err }, 'rsync listener: the rsync daemon is unreachable'));
    upstream.once('connect', () => upstream.write(handshake.received()));
    // rsync answers the replayed greeting and module; the client saw ours already.
    let answer = '';
    const onAnswer = (chunk: Buffer): void => {
      answer += chunk.toString('latin1');
      for (;;) {
        const nl = answer.indexOf('\n');
        if (nl < 0) {
          if (answer.length > 4096) upstream.destroy();
          return;
        }
        const line = answer.slice(0, nl);
        answer = answer.slice(nl + 1);
        if (line.startsWith('@ERROR')) {
          this.o.logger.warn({ line }, 'rsync listener: rsync refused a replayed handshake');
          upstream.destroy();
          return;
        }
        if (line === '@RSYNCD: OK') break;
      }
      upstream.off('data', onAnswer);
      if (answer !== '') client.write(Buffer.from(answer, 'latin1'));
      upstream.pipe(client);
      client.pipe(upstream);
    };
    upstream.on('data', onAnswer);
  }

  /** A connection rsync will refuse: bounded in time and in number (the oldest goes first). */
  private refuseLater(client: net.Socket): void {
    const max = this.o.maxRefusing ?? 8;
    for (const old of this.refusing) {
      if (this.refusing.size < max) break;
      old.destroy();
      this.refusing.delete(old);
    }
    this.refusing.add(client);
    const timer = setTimeout(() => client.destroy(), this.o.refusalMs ?? 10_000);
    client.once('close', () => {
      clearTimeout(timer);
      this.refusing.delete(client);
    });
  }

  private wait(socket: net.Socket): Waiting {
    const address = socket.remoteAddress ?? '';
    const entry: Waiting = { socket, address, timer: setTimeout(() => socket.destroy(), this.o.handshakeTimeoutMs ?? 10_000) };
    let mine = this.waitingByAddress.get(address);
    if (mine === undefined) this.waitingByAddress.set(address, (mine = new Set()));
    // Sets keep insertion order: the first is the one waiting longest.
    if (mine.size >= (this.o.maxWaitingPerAddress ?? 32)) this.drop(mine.values().next().value!);
    if (this.waiting.size >= (this.o.maxWaiting ?? 1024)) this.drop(this.waiting.values().next().value!);
    mine.add(entry);
    this.waiting.add(entry);
    socket.once('close', () => this.unwait(entry));
    return entry;
  }

  private drop(entry: Waiting): void {
    this.unwait(entry);
    entry.socket.destroy();
  }

  private unwait(entry: Waiting): void {
    clearTimeout(entry.timer);
    this.waiting.delete(entry);
    const mine = this.waitingByAddress.get(entry.address);
    mine?.delete(entry);
    if (mine?.size === 0) this.waitingByAddress.delete(entry.address);
  }

  private track(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.on('error', () => socket.destroy());
    socket.once('close', () => this.sockets.delete(socket));
  }
}

/**
 * rsync's daemon handshake as the client sends it: a greeting line, the module line, then the
 * arguments (lines before protocol 30, NUL-terminated since), ended by an empty one. With
 * `--secluded-args` the first list stops before "." and a second NUL-terminated list follows.
 */
class Handshake {
  private buffer = Buffer.alloc(0);
  private at = 0;
  private stage: 'greeting' | 'module' | 'args' | 'secluded' | 'done' = 'greeting';
  private separator: number | undefined;
  private args: string[] = [];
  private paths: string[] = [];

  constructor(private readonly module: string) {}

  /** Everything the client sent so far, to replay to rsync. */
  received(): Buffer {
    return this.buffer;
  }

  /** The capability the first destination names, if it has that form. */
  capability(): string | undefined {
    const [path] = this.paths;
    const [module, capability] = (path ?? '').split('/');
    return module === this.module && capability !== undefined && CAPABILITY.test(capability) ? capability : undefined;
  }

  add(chunk: Buffer): { reply?: string; end?: string; done?: boolean } {
    if (this.stage === 'done') return {};
    this.buffer = Buffer.concat([this.buffer, chunk]);
    if (this.buffer.length > MAX_HANDSHAKE_BYTES) return { end: '' };
    let reply = '';
    for (;;) {
      const terminator = this.stage === 'greeting' || this.stage === 'module' ? 0x0a : this.stage === 'secluded' ? 0 : this.separatorAt();
      if (terminator === undefined) return { reply };
      const end = this.buffer.indexOf(terminator, this.at);
      if (end < 0) return { reply };
      const item = this.buffer.subarray(this.at, end).toString('utf8').replace(/\r$/, '');
      this.at = end + 1;
      switch (this.stage) {
        case 'greeting':
          if (!item.startsWith('@RSYNCD: ')) return { reply, end: '@ERROR: protocol startup error\n' };
          this.stage = 'module';
          break;
        case 'module':
          if (item === '' || item === '#list') return { reply, end: '@RSYNCD: EXIT\n' }; // nothing is listed
          if (item.startsWith('#')) return { reply, end: `@ERROR: Unknown command '${item.slice(0, 40)}'\n` };
          if (item !== this.module) return { reply, end: `@ERROR: Unknown module '${item.slice(0, 80)}'\n` };
          reply += '@RSYNCD: OK\n';
          this.stage = 'args';
          break;
        case 'args':
        case 'secluded':
          if (item !== '') {
            this.args.push(item);
            break;
          }
          if (this.args.includes('.')) {
            this.paths = this.args.slice(this.args.indexOf('.') + 1);
            this.stage = 'done';
            return { reply, done: true };
          }
          if (this.stage === 'secluded') return { reply, end: '' };
          this.stage = 'secluded'; // the real arguments follow, NUL-terminated
          this.args = [];
          break;
      }
    }
  }

  /** Arguments end in NUL or newline by protocol; the first one ("--server") shows which. */
  private separatorAt(): number | undefined {
    if (this.separator !== undefined) return this.separator;
    for (let i = this.at; i < this.buffer.length; i++) {
      const byte = this.buffer[i];
      if (byte === 0 || byte === 0x0a) return (this.separator = byte);
    }
    return undefined;
  }
}
