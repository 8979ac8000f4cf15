/**
 * One lifecycle for the daemon's pieces: the registry releases in reverse order of starting,
 * the same walk for stop() and for a start that fails part-way, each service's signal aborted at
 * its turn; the daemon's own failed start leaves nothing running; and the service loop (single
 * flight, wake, back-off timer, held work) behaves the same after stop-then-start.
 */
import { createServer, type Server } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import t from 'tap';
import { defaults } from '../../src/config/config.js';
import { Daemon } from '../../src/daemon.js';
import { Lifecycle } from '../../src/service/lifecycle.js';
import { ServiceLoop, type Service } from '../../src/service/service.js';
import { freePort } from '../helpers/daemon.js';

/** A service that writes what happens to it into `log`; its start fails when `fails`. */
function recorded(name: string, log: string[], fails = false): Service {
  let signal: AbortSignal | undefined;
  return {
    start(s) {
      signal = s;
      log.push(`start ${name}`);
      if (fails) throw new Error(`${name} could not start`);
    },
    async stop() {
      log.push(`stop ${name}${signal?.aborted === true ? ' (signal aborted)' : ''}`);
    },
  };
}

async function startAll(lifecycle: Lifecycle, log: string[], failAt?: string): Promise<void> {
  lifecycle.onStop('catalog', () => log.push('close catalog'));
  for (const name of ['replicator', 'ingest', 'audits'])
    await lifecycle.start(name, recorded(name, log, name === failAt));
}

t.test('stop() and a failed start release the services in the same reverse order', async (t) => {
  const stopped: string[] = [];
  const running = new Lifecycle();
  await startAll(running, stopped);
  await running.stop();

  const failed: string[] = [];
  const failing = new Lifecycle();
  await t.rejects(startAll(failing, failed, 'audits'), /audits could not start/);
  await failing.stop(); // what Daemon.start does with a start that threw

  const releases = (log: string[]) => log.filter((l) => !l.startsWith('start'));
  t.same(
    releases(stopped),
    [
      'stop audits (signal aborted)',
      'stop ingest (signal aborted)',
      'stop replicator (signal aborted)',
      'close catalog',
    ],
    'stop(): the reverse of the start, each signal aborted before its stop',
  );
  t.same(
    releases(failed),
    releases(stopped),
    'a start that failed at the last service stops every earlier one (and itself), in the same order',
  );
  await running.stop();
  t.same(releases(stopped).length, 4, 'released once: a second stop() has nothing left to release');
});

t.test('a release that fails does not keep the others from being released', async (t) => {
  const log: string[] = [];
  const lifecycle = new Lifecycle();
  lifecycle.onStop('catalog', () => log.push('close catalog'));
  lifecycle.onStop('pool', () => Promise.reject(new Error('worker stuck')));
  await lifecycle.start('ingest', recorded('ingest', log));
  await t.rejects(lifecycle.stop(), /stopping pool failed: worker stuck/);
  t.same(log, ['start ingest', 'stop ingest (signal aborted)', 'close catalog']);
});

/** Holds a port until closed. */
async function holdPort(): Promise<{ port: number; server: Server }> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (typeof address !== 'object' || address === null) throw new Error('no port');
  return { port: address.port, server };
}

/** Whether something still listens on the port (the rsync daemon of a start not undone). */
async function portTaken(port: number): Promise<boolean> {
  const server = createServer();
  const taken = await new Promise<boolean>((resolve) => {
    server.once('error', () => resolve(true));
    server.listen(port, '127.0.0.1', () => resolve(false));
  });
  if (!taken) await new Promise<void>((resolve) => server.close(() => resolve()));
  return taken;
}

t.test(
  'the daemon: a start that fails at its last step (the API port taken) leaves nothing running',
  async (t) => {
    const dataDir = await mkdtemp(join(tmpdir(), 'preservd-lifecycle-'));
    t.teardown(() => rm(dataDir, { recursive: true, force: true }));
    const taken = await holdPort();
    t.teardown(() => new Promise<void>((resolve) => taken.server.close(() => resolve())));
    const config = defaults();
    config.dataDir = dataDir;
    config.http.port = taken.port;
    config.upload.rsync.port = await freePort();
    config.fixity.workers = 1;
    const logger = pino({ level: 'silent' });

    await t.rejects(Daemon.start(config, { logger }), /EADDRINUSE/);
    t.notOk(await portTaken(config.upload.rsync.port), 'the rsync daemon started before it was stopped');

    // Everything released: the same data directory and rsync port start again, and stop.
    config.http.port = 0;
    const daemon = await Daemon.start(config, { logger });
    t.ok(await portTaken(config.upload.rsync.port), 'the second start runs rsync');
    await daemon.stop();
    t.notOk(await portTaken(config.upload.rsync.port), 'stop() ends it too');
  },
);

t.test(
  'the service loop: one pass at a time, a wake during one runs one more, and stop-then-start works the same',
  async (t) => {
    const signals: AbortSignal[] = [];
    let passes = 0;
    let release!: () => void;
    const loop = new ServiceLoop(
      'a test service',
      async (signal) => {
        passes++;
        signals.push(signal);
        await new Promise<void>((resolve) => (release = resolve));
      },
      (err) => t.fail(String(err)),
    );
    loop.wake();
    t.equal(passes, 0, 'no pass before start()');
    loop.start();
    t.equal(passes, 1, 'start() runs the first pass');
    loop.wake();
    loop.wake();
    t.equal(passes, 1, 'one pass at a time');
    release();
    await sleep(10);
    t.equal(passes, 2, 'the wakes during a pass run one more pass after it, not two');
    const held = loop.hold(sleep(50).then(() => 'done'));
    const stopping = loop.stop();
    t.ok(signals[1]!.aborted, "stop() aborts the run's signal at once");
    let stoppedEarly = false;
    void stopping.then(() => (stoppedEarly = true));
    await sleep(10);
    t.notOk(stoppedEarly, 'stop() waits for the pass under way and the work held');
    release();
    await stopping;
    t.equal(await held, 'done');
    loop.wake();
    t.equal(passes, 2, 'a stopped loop runs no pass');

    loop.start();
    t.equal(passes, 3, 'start() after stop() begins a new run');
    t.notOk(signals[2]!.aborted, 'with a signal of its own');
    release();
    loop.wakeIn(20);
    await sleep(200);
    t.equal(passes, 4, 'wakeIn() wakes it later');
    const stoppingAgain = loop.stop();
    release();
    await stoppingAgain;
    const outer = new AbortController();
    loop.start(outer.signal);
    outer.abort();
    t.ok(signals.at(-1)!.aborted, 'the signal start() was given aborts the run too');
    t.notOk(loop.running);
    release();
    await loop.stop();
  },
);
