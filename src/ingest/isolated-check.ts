/**
 * Checking an upload in a worker thread of its own (check-worker.ts). What the validator builds
 * for a bag of 200,000 files, and the garbage it leaves, lives in that thread's heap and goes
 * when the thread ends; run on the daemon's thread, V8 kept the heap it grew for the daemon's
 * whole life (docs/decisions.md, "Uploads are checked in a worker thread").
 *
 * The worker hashes nothing: its files come back here and go to the caller's hasher (the
 * daemon's pool, resumable for huge files), so ingest and audits still share one pool, its
 * priorities and its rate limit. After the verdict the files follow in batches, as the caller
 * writes them, so the daemon never holds them all. A stop ends the thread at once.
 *
 * The thread may be started ahead (`prepareCheck`, when complete is accepted), so that its start
 * and module loading overlap the wait for a quiet upload; idle, it does not keep the process alive.
 */
import { Worker } from 'node:worker_threads';
import type { BagFile, FileHasher } from '../bagit/index.js';
import type { StoredProblem } from '../catalog/types.js';
import { serializeError, workerExecArgv } from '../fixity/index.js';
import type {
  CheckWorkerData,
  CrossingDigests,
  FromCheckWorker,
  ReportSummary,
  ToCheckWorker,
} from './check-protocol.js';
import type { UploadCheckOptions } from './check-upload.js';

const CHECK_WORKER_URL = new URL('./check-worker.js', import.meta.url);

/** Files per message from the worker. */
const FILES_PER_MESSAGE = 5_000;

/** The verdict on an upload, its files still in the worker until asked for. */
export interface CheckedUpload {
  report: ReportSummary;
  problems: StoredProblem[];
  /** No problem is an error. */
  valid: boolean;
  /** The checked files, sorted by path, a batch at a time (once). */
  files(): AsyncGenerator<BagFile[]>;
  /** Ends the worker; call it whatever happened. */
  close(): Promise<void>;
}

type Reply = Extract<FromCheckWorker, { kind: 'verdict' | 'files' }>;

/** A check worker started ahead of its upload: give it to `checkUploadIsolated`, or close it. */
export interface PreparedCheck {
  close(): Promise<void>;
}

/** Starts a check worker now, to be given its upload later. */
export function prepareCheck(): PreparedCheck {
  return new CheckWorker();
}

/**
 * `checkUpload` in a worker thread (`prepared`, if it is still there, else a new one): resolves
 * with the verdict, rejects if the worker fails or `signal` stops it.
 */
export async function checkUploadIsolated(
  dir: string,
  options: UploadCheckOptions,
  prepared?: PreparedCheck,
): Promise<CheckedUpload> {
  let check = prepared instanceof CheckWorker && prepared.usable ? prepared : undefined;
  if (check === undefined) {
    await prepared?.close();
    check = new CheckWorker();
  }
  check.start(dir, options);
  try {
    const verdict = await check.reply('verdict');
    return {
      report: verdict.report,
      problems: verdict.problems,
      valid: verdict.valid,
      files: () => check.files(),
      close: () => check.close(),
    };
  } catch (err) {
    await check.close();
    throw err;
  }
}

class CheckWorker implements PreparedCheck {
  private readonly worker: Worker;
  private hasher: FileHasher | undefined;
  private signal: AbortSignal | undefined;
  private expecting: { resolve: (reply: Reply) => void; reject: (err: unknown) => void } | undefined;
  /** Why the worker can answer no more, once it cannot. */
  private ended: unknown;

  constructor() {
    this.worker = new Worker(CHECK_WORKER_URL, { execArgv: workerExecArgv() });
    this.worker.on('message', (message: FromCheckWorker) => this.receive(message));
    this.worker.on('error', (err) => this.end(err));
    this.worker.on('exit', (code) =>
      this.end(new Error(`the upload check ended unexpectedly (exit code ${code})`)),
    );
    this.worker.unref(); // until it has an upload to check (after the listeners: they ref it)
  }

  /** Not started on an upload yet, and not ended. */
  get usable(): boolean {
    return this.hasher === undefined && this.ended === undefined;
  }

  /** Sends the worker its upload (once). */
  start(dir: string, options: UploadCheckOptions): void {
    this.hasher = options.hasher;
    this.signal = options.signal;
    this.worker.ref();
    const upload: CheckWorkerData = {
      dir,
      request: options.request,
      rules: options.rules,
      batches: this.hasher.hashFiles !== undefined,
    };
    this.post({ kind: 'check', ...upload });
    if (this.signal?.aborted === true) this.stop();
    else this.signal?.addEventListener('abort', this.stop, { once: true });
  }

  /** The worker's next reply, which must be of this kind. */
  reply<K extends Reply['kind']>(kind: K): Promise<Extract<Reply, { kind: K }>> {
    if (this.ended !== undefined) return Promise.reject(this.ended);
    return new Promise((resolve, reject) => {
      this.expecting = {
        resolve: (reply) =>
          reply.kind === kind
            ? resolve(reply as Extract<Reply, { kind: K }>)
            : reject(new Error(`the upload check sent ${reply.kind}, not ${kind}`)),
        reject,
      };
    });
  }

  async *files(): AsyncGenerator<BagFile[]> {
    for (;;) {
      const next = this.reply('files');
      this.post({ kind: 'files', count: FILES_PER_MESSAGE });
      const { files, done } = await next;
      if (files.length > 0) yield files;
      if (done) return;
    }
  }

  async close(): Promise<void> {
    this.signal?.removeEventListener('abort', this.stop);
    this.end(new Error('the upload check was closed'));
    await this.worker.terminate();
  }

  private readonly stop = (): void => {
    this.end(this.signal?.reason ?? new Error('the upload check was stopped'));
    void this.worker.terminate();
  };

  private end(reason: unknown): void {
    if (this.ended !== undefined) return;
    this.ended = reason;
    this.expecting?.reject(reason);
    this.expecting = undefined;
  }

  private receive(message: FromCheckWorker): void {
    switch (message.kind) {
      case 'hashFile':
        this.hasher!.hashFile(message.path, message.algorithms, {
          ...message.opts,
          ...(this.signal === undefined ? {} : { signal: this.signal }),
        }).then(
          (digests) => this.post({ kind: 'hashed', id: message.id, digests }),
          (err: unknown) => this.post({ kind: 'hashFailed', id: message.id, error: serializeError(err) }),
        );
        return;
      case 'hashFiles':
        this.hashFiles(message.files, message.opts).then(
          (results) => this.post({ kind: 'hashedAll', id: message.id, results }),
          (err: unknown) => this.post({ kind: 'hashFailed', id: message.id, error: serializeError(err) }),
        );
        return;
      case 'verdict':
      case 'files': {
        const expecting = this.expecting;
        this.expecting = undefined;
        if (expecting === undefined) this.end(new Error(`the upload check sent ${message.kind} unasked`));
        else expecting.resolve(message);
      }
    }
  }

  /** Only asked for when the hasher takes batches (the worker offers them only then). */
  private async hashFiles(
    files: Extract<FromCheckWorker, { kind: 'hashFiles' }>['files'],
    opts: Extract<FromCheckWorker, { kind: 'hashFiles' }>['opts'],
  ): Promise<CrossingDigests[]> {
    const results = await this.hasher!.hashFiles!(files, {
      ...opts,
      ...(this.signal === undefined ? {} : { signal: this.signal }),
    });
    return results.map((r) => (r instanceof Error ? { error: serializeError(r) } : { ok: r }));
  }

  private post(message: ToCheckWorker): void {
    if (this.ended === undefined) this.worker.postMessage(message);
  }
}
