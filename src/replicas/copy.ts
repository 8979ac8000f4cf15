/**
 * Copying one stored package to one replica: every file (tag files too) streamed from the
 * primary to the target, then read back and compared with the catalog's size and sha256. The
 * package's objects are listed once first, so a file not there yet is written without asking
 * about it again. Files run in a few lanes, each writing a file and then reading it back, so one
 * lane's read-back overlaps another's upload; at most BIG_AT_ONCE of them hold a large file (its
 * upload has parts of its own in flight, and in memory), the others take the small ones.
 *
 * It does not decide when to copy or record the outcome: it reports verified files through
 * `onVerified` as it goes (the replicator keeps them in the catalog, so a restart skips them) and
 * returns the first problem found, or throws ReplicaDown when the replica is unavailable.
 */
import { constants } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import type { FileRecord } from '../catalog/types.js';
import { errorCode } from '../fs/errors.js';
import { Storage } from '../storage/storage.js';
import { objectKey, packagePrefix } from './keys.js';
import type { ReplicationProblem } from './problems.js';
import { ReplicaDown, SourceChanged, type ReplicaTarget } from './target.js';

export interface CopyOptions {
  /** Paths already verified by an earlier attempt. */
  skip: ReadonlySet<string>;
  /** Paths whose wrong object this daemon wrote itself: they may be replaced. */
  replaceable: ReadonlySet<string>;
  /** How many files at once, asked before each file (fewer while ingests run). */
  lanes: () => number;
  onVerified: (path: string, bytes: number) => void;
  signal: AbortSignal;
}

export type CopyOutcome = { kind: 'verified'; files: number; bytes: number; written: number } | { kind: 'failed'; problem: ReplicationProblem };

/** A file at least this large is a large one (S3 uploads it in parts). */
const LARGE_BYTES = 64 * 1024 * 1024;
/** Large files copied at once. */
const BIG_AT_ONCE = 4;

export async function copyPackage(target: ReplicaTarget, bagId: string, dir: string, files: readonly FileRecord[], opts: CopyOptions): Promise<CopyOutcome> {
  const todo = files.filter((f) => !opts.skip.has(f.path)).sort((a, b) => b.size - a.size);
  const large = todo.filter((f) => f.size >= LARGE_BYTES);
  const small = todo.filter((f) => f.size < LARGE_BYTES);
  const present = new Set<string>();
  if (todo.length > 0) for await (const object of target.list(packagePrefix(bagId), opts.signal)) present.add(object.key);
  let written = 0;
  let problem: ReplicationProblem | undefined;
  let down: unknown;
  let running = 0;
  let bigRunning = 0;
  const lane = async (): Promise<void> => {
    while (problem === undefined && down === undefined && !opts.signal.aborted) {
      // Fewer lanes asked for (an ingest started): the extra ones stop after their file.
      if (running > opts.lanes()) return;
      const big = bigRunning < BIG_AT_ONCE ? large.shift() : undefined;
      const file = big ?? small.shift();
      if (file === undefined) return;
      if (big !== undefined) bigRunning++;
      try {
        const result = await copyFile(target, bagId, dir, file, !present.has(objectKey(bagId, file.path)), opts);
        if ('problem' in result) problem ??= result.problem;
        else {
          if (result.written) written++;
          opts.onVerified(file.path, file.size);
        }
      } catch (err) {
        down ??= err;
      } finally {
        if (big !== undefined) bigRunning--;
      }
    }
  };
  const lanes: Array<Promise<void>> = [];
  const width = Math.max(1, Math.min(opts.lanes(), todo.length));
  for (let i = 0; i < width; i++) {
    running++;
    lanes.push(lane().finally(() => running--));
  }
  await Promise.all(lanes);
  opts.signal.throwIfAborted();
  if (down !== undefined) throw down;
  if (problem !== undefined) return { kind: 'failed', problem };
  return { kind: 'verified', files: files.length, bytes: files.reduce((n, f) => n + f.size, 0), written };
}

/** One file: written unless already there, then read back. Throws ReplicaDown (and aborts). */
async function copyFile(target: ReplicaTarget, bagId: string, dir: string, file: FileRecord, absent: boolean, opts: CopyOptions): Promise<{ written: boolean } | { problem: ReplicationProblem }> {
  const replica = target.name;
  const path = file.path;
  const sha256 = file.digests.sha256;
  if (sha256 === undefined) return { problem: { code: 'primary-changed', replica, path, detail: 'the catalog holds no sha256 for it' } };
  const expected = { size: file.size, sha256 };
  const key = objectKey(bagId, path);
  let source: FileHandle;
  try {
    source = await open(Storage.resolveInside(dir, path), constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (err) {
    return { problem: { code: 'primary-unreadable', replica, path, detail: errorCode(err) } };
  }
  let outcome: 'written' | 'exists';
  try {
    outcome = await target.write(key, source, expected, { replace: opts.replaceable.has(path), absent, signal: opts.signal });
  } catch (err) {
    if (err instanceof SourceChanged) return { problem: { code: 'primary-changed', replica, path, detail: `read ${err.size} bytes, sha256 ${err.sha256}` } };
    if (err instanceof ReplicaDown || opts.signal.aborted) throw err;
    if (isPrimaryReadError(err)) return { problem: { code: 'primary-unreadable', replica, path, detail: errorCode(err) } };
    return { problem: { code: 'write-refused', replica, path, detail: (err as Error).message } };
  } finally {
    await source.close().catch(() => undefined);
  }
  const back = await target.readBack(key, expected, { signal: opts.signal });
  switch (back.kind) {
    case 'match':
      return { written: outcome === 'written' };
    case 'unreadable':
      return { problem: { code: 'copy-unreadable', replica, path, detail: back.reason } };
    case 'missing':
      return { problem: { code: 'copy-differs', replica, path, detail: 'missing right after it was written' } };
    case 'differs':
      return {
        problem: { code: outcome === 'written' ? 'copy-differs' : 'object-in-the-way', replica, path, detail: `${back.size} bytes, sha256 ${back.sha256}` },
      };
  }
}

/** An error from reading the primary file (the stream's), not from the replica. */
function isPrimaryReadError(err: unknown): boolean {
  const e = err as { syscall?: string } | null;
  return e?.syscall === 'read';
}
