/**
 * Hashing one file, synchronously, in the calling thread (a pool worker): open it without
 * following a symbolic link or blocking on a FIFO, refuse anything but a regular file, then read
 * it once in large chunks into the caller's reused buffer and feed every digest from each chunk.
 */
import { closeSync, constants, fstatSync, openSync, readSync, type BigIntStats, type Stats } from 'node:fs';
import type { Algorithm } from './algorithms.js';
import { checkpointFits, decodeCheckpoint, encodeCheckpoint, fileIdentity } from './checkpoint.js';
import { NativeDigester, ResumableDigester, type WasmHasherSet } from './digesters.js';
import { FixityError, NOT_REGULAR_FILE } from './errors.js';
import type { FileDigests } from './types.js';

// O_NOFOLLOW: a symlink as the last component fails with ELOOP instead of being followed.
// O_NONBLOCK: opening a FIFO returns at once (fstat then refuses it); no effect on regular files.
const OPEN_FLAGS = constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0) | (constants.O_NONBLOCK ?? 0);

/** What the worker does between and after chunks: polling for cancels, throttling, counting. */
export interface ChunkHooks {
  /** Before every read; `first` for the job's first read. Throws to stop the job. */
  beforeRead(first: boolean): void;
  /** After every non-empty read. */
  afterRead(bytes: number): void;
}

export interface ResumableHooks extends ChunkHooks {
  /** Where hashing starts: a checkpoint's offset or 0; `refused` when a checkpoint did not fit. */
  started(offset: number, refused: boolean): void;
  /** Hands a checkpoint to the job's store; returns once it is saved (throws if the job stops). */
  checkpoint(state: Uint8Array): void;
}

function describeType(stat: Stats | BigIntStats): string {
  if (stat.isFIFO()) return 'a FIFO';
  if (stat.isSocket()) return 'a socket';
  if (stat.isCharacterDevice()) return 'a character device';
  if (stat.isBlockDevice()) return 'a block device';
  return 'not a regular file';
}

function openRegularFile<B extends boolean>(
  path: string,
  bigint: B,
): { fd: number; stat: B extends true ? BigIntStats : Stats } {
  let fd: number;
  try {
    fd = openSync(path, OPEN_FLAGS);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ELOOP') {
      throw new FixityError('ELOOP', `${path} is a symbolic link; it is not followed`, {
        path,
        syscall: 'open',
      });
    }
    throw err;
  }
  try {
    const stat = fstatSync(fd, { bigint }) as B extends true ? BigIntStats : Stats;
    if (stat.isDirectory()) {
      throw new FixityError('EISDIR', `${path} is a directory`, { path, syscall: 'fstat' });
    }
    if (!stat.isFile()) {
      throw new FixityError(NOT_REGULAR_FILE, `${path} is ${describeType(stat)}, not a regular file`, {
        path,
        syscall: 'fstat',
      });
    }
    return { fd, stat };
  } catch (err) {
    closeSync(fd);
    throw err;
  }
}

/**
 * Reads from `offset` to the end of the file (wherever it is now, not where fstat put it);
 * returns the offset reached. A short read of a regular file means end of file, which saves a
 * second read() per small file.
 */
function readToEnd(
  fd: number,
  buffer: Buffer,
  offset: number,
  digester: { update(chunk: Uint8Array): void },
  hooks: ChunkHooks,
  afterChunk?: (position: number) => void,
): number {
  let position = offset;
  for (;;) {
    hooks.beforeRead(position === offset);
    const n = readSync(fd, buffer, 0, buffer.length, position);
    if (n === 0) return position;
    digester.update(buffer.subarray(0, n));
    position += n;
    hooks.afterRead(n);
    afterChunk?.(position);
    if (n < buffer.length) return position;
  }
}

/** One read of the file feeding node:crypto hashes. */
export function hashFileNative(
  path: string,
  algorithms: readonly Algorithm[],
  withCrc32: boolean,
  buffer: Buffer,
  hooks: ChunkHooks,
): FileDigests {
  const { fd } = openRegularFile(path, false);
  try {
    const digester = new NativeDigester(algorithms, withCrc32);
    const size = readToEnd(fd, buffer, 0, digester, hooks);
    return { size, ...digester.finish() };
  } finally {
    closeSync(fd);
  }
}

/**
 * The same with hash-wasm hashers, checkpointing every `everyBytes` and continuing from
 * `checkpoint` when it was taken on this unchanged file (same size, mtime, inode, device).
 */
export function hashFileResumable(
  path: string,
  algorithms: readonly Algorithm[],
  withCrc32: boolean,
  buffer: Buffer,
  hashers: WasmHasherSet,
  resume: { checkpoint?: Uint8Array; everyBytes: number },
  hooks: ResumableHooks,
): FileDigests {
  const { fd, stat } = openRegularFile(path, true);
  try {
    const identity = fileIdentity(stat);
    const digester = new ResumableDigester(hashers, algorithms, withCrc32);
    let start = 0;
    const saved = decodeCheckpoint(resume.checkpoint);
    if (saved && checkpointFits(saved, identity, algorithms, withCrc32)) {
      try {
        digester.load(saved);
        start = saved.offset;
      } catch {
        digester.reset();
      }
    }
    hooks.started(start, resume.checkpoint !== undefined && start === 0);
    let lastCheckpoint = start;
    const size = readToEnd(fd, buffer, start, digester, hooks, (position) => {
      if (position - lastCheckpoint < resume.everyBytes) return;
      hooks.checkpoint(
        encodeCheckpoint({ ...identity, offset: position, algorithms: [...algorithms], ...digester.save() }),
      );
      lastCheckpoint = position;
    });
    return { size, ...digester.finish() };
  } finally {
    closeSync(fd);
  }
}
