/**
 * A FileHasher for a process that has nothing else to do while it hashes (`preservd validate`):
 * the pool's workers and the calling thread take files from one queue. On two cores the command
 * starts one worker instead of two, and its main thread, which used to wait through the whole
 * run, hashes beside it: a worker's start costs ~0.2 s of CPU before its first file, as much as
 * the command's own start (docs/performance.md, "Tenth session"). Not for the daemon, whose
 * thread must stay free to answer.
 *
 * The results are the pool's: the same read (`hashFileNative`, the workers' code), and a failure
 * becomes the same FixityError the pool would have rejected with.
 */
import type { Algorithm } from './algorithms.js';
import { AbortError, deserializeError, serializeError } from './errors.js';
import { hashFileNative, type ChunkHooks } from './hash-file.js';
import type { FixityPool } from './pool.js';
import type { FileDigests, HashOptions } from './types.js';

type Files = ReadonlyArray<{ path: string; algorithms: Algorithm[] }>;
type Options = Omit<HashOptions, 'resume'>;

interface Request {
  files: Files;
  /** A `hashFile` call: its one failure rejects, as the pool's hashFile does. */
  single: boolean;
  opts: Options;
  resolve: (results: Array<FileDigests | Error>) => void;
  reject: (err: unknown) => void;
}

const READ_SIZE = 1024 * 1024;
const NO_HOOKS: ChunkHooks = { beforeRead: () => undefined, afterRead: () => undefined };

export class HelpingHasher {
  private readonly queue: Request[] = [];
  private inPool = 0;
  private helping = false;
  private readonly buffer = Buffer.allocUnsafe(READ_SIZE);

  constructor(
    private readonly pool: FixityPool,
    /**
     * Calls the pool has at once: enough that a worker never waits while this thread reads a
     * large file, few enough that the last ones do not leave this thread idle at the end.
     */
    private readonly poolDepth = 2 * pool.workers,
  ) {}

  async hashFile(path: string, algorithms: Algorithm[], opts: Options = {}): Promise<FileDigests> {
    const [result] = await this.submit([{ path, algorithms }], true, opts);
    if (result instanceof Error) throw result;
    return result!;
  }

  hashFiles(files: Files, opts: Options = {}): Promise<Array<FileDigests | Error>> {
    return this.submit(files, false, opts);
  }

  private submit(files: Files, single: boolean, opts: Options): Promise<Array<FileDigests | Error>> {
    return new Promise((resolve, reject) => {
      this.queue.push({ files, single, opts, resolve, reject });
      this.pump();
    });
  }

  /** Gives the pool what it may take; this thread takes the rest, one call a turn. */
  private pump(): void {
    while (this.inPool < this.poolDepth && this.queue.length > 0) this.toPool(this.queue.shift()!);
    if (this.queue.length > 0 && !this.helping) {
      this.helping = true;
      setImmediate(() => this.help());
    }
  }

  private toPool(r: Request): void {
    this.inPool++;
    const { path, algorithms } = r.files[0]!;
    const done = r.single
      ? this.pool.hashFile(path, algorithms, r.opts).then((digests) => [digests])
      : this.pool.hashFiles(r.files, r.opts);
    done.then(r.resolve, r.reject).finally(() => {
      this.inPool--;
      this.pump();
    });
  }

  /** One queued call, read on this thread; then a turn for the workers' answers before the next. */
  private help(): void {
    const r = this.queue.shift();
    if (r === undefined) {
      this.helping = false;
      return;
    }
    if (r.opts.signal?.aborted === true) r.reject(new AbortError(r.files[0]!.path, r.opts.signal.reason));
    else {
      const results = r.files.map(({ path, algorithms }) => this.read(path, algorithms, r.opts));
      if (r.single && results[0] instanceof Error) r.reject(results[0]);
      else r.resolve(results);
    }
    setImmediate(() => this.help());
  }

  private read(path: string, algorithms: Algorithm[], opts: Options): FileDigests | Error {
    try {
      return hashFileNative(path, algorithms, opts.crc32 === true, this.buffer, NO_HOOKS);
    } catch (err) {
      return deserializeError(serializeError(err), path);
    }
  }
}
