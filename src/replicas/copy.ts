/**
 * Copying one stored package to one replica: every file (tag files too) streamed from the
 * primary to the target, then read back and compared with the catalog's size and sha256. The
 * package's objects are listed once first, so a file not there yet is written without asking
 * about it again. Files run in a few lanes; each lane reads a file back while it writes its next
 * one (so at most one write and one read-back per lane; none while an ingest keeps replication
 * to one lane, which then does one file at a time). At most BIG_AT_ONCE lanes write a large file
 * at once (its upload has parts of its own in flight, and in memory), the others take the small
 * ones. A file counts as verified only once it was read back and matched.
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
  let verified = 0;
  let problem: ReplicationProblem | undefined;
  let down: unknown;
  let running = 0;
  let bigRunning = 0;
  const stopped = () => problem !== undefined || down !== undefined || opts.signal.aborted;
  const readBack = async (file: FileRecord, outcome: 'written' | 'exists'): Promise<void> => {
    try {
      const result = await checkFile(target, bagId, file, outcome, opts.signal);
      if (result !== undefined) problem ??= result;
      else {
        if (outcome === 'written') written++;
        verified++;
        opts.onVerified(file.path, file.size);
      }
    } catch (err) {
      down ??= err;
    }
  };
  const lane = async (): Promise<void> => {
    // This lane's read-back of its previous file, running while it writes the next one.
    let checking: Promise<void> | undefined;
    let counted = true;
    try {
      while (!stopped()) {
        // Fewer lanes asked for (an ingest started): the extra ones stop after their file. A lane
        // counts itself out the moment it decides, not when its last read-back ends, so lanes
        // deciding one after another never all leave: the last one stays until the work is done.
        if (running > Math.max(1, opts.lanes())) {
          running--;
          counted = false;
          break;
        }
        // The last lane writes no file while its previous one is still read back.
        if (opts.lanes() <= 1) await checking;
        const big = bigRunning < BIG_AT_ONCE ? large.shift() : undefined;
        const file = big ?? small.shift();
        if (file === undefined) break;
        if (big !== undefined) bigRunning++;
        let outcome: 'written' | 'exists' | ReplicationProblem;
        try {
          outcome = await writeFile(target, bagId, dir, file, !present.has(objectKey(bagId, file.path)), opts);
        } catch (err) {
          down ??= err;
          break;
        } finally {
          if (big !== undefined) bigRunning--;
        }
        if (typeof outcome !== 'string') {
          problem ??= outcome;
          break;
        }
        await checking;
        checking = readBack(file, outcome);
      }
      await checking;
    } finally {
      if (counted) running--;
    }
  };
  const lanes: Array<Promise<void>> = [];
  const width = Math.max(1, Math.min(opts.lanes(), todo.length));
  for (let i = 0; i < width; i++) {
    running++;
    lanes.push(lane());
  }
  await Promise.all(lanes);
  opts.signal.throwIfAborted();
  if (down !== undefined) throw down;
  if (problem !== undefined) return { kind: 'failed', problem };
  // Every file is verified here, or the copy is not: never report a copy with a file left out.
  if (verified !== todo.length) throw new Error(`copy of ${bagId} to ${target.name} ended with ${todo.length - verified} of ${todo.length} files neither verified nor failed`);
  return { kind: 'verified', files: files.length, bytes: files.reduce((n, f) => n + f.size, 0), written };
}

/** One file written unless already there: what happened, or the problem. Throws ReplicaDown (and aborts). */
async function writeFile(target: ReplicaTarget, bagId: string, dir: string, file: FileRecord, absent: boolean, opts: CopyOptions): Promise<'written' | 'exists' | ReplicationProblem> {
  const replica = target.name;
  const path = file.path;
  const sha256 = file.digests.sha256;
  if (sha256 === undefined) return { code: 'primary-changed', replica, path, detail: 'the catalog holds no sha256 for it' };
  let source: FileHandle;
  try {
    source = await open(Storage.resolveInside(dir, path), constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (err) {
    return { code: 'primary-unreadable', replica, path, detail: errorCode(err) };
  }
  try {
    return await target.write(objectKey(bagId, path), source, { size: file.size, sha256 }, { replace: opts.replaceable.has(path), absent, signal: opts.signal });
  } catch (err) {
    if (err instanceof SourceChanged) return { code: 'primary-changed', replica, path, detail: `read ${err.size} bytes, sha256 ${err.sha256}` };
    if (err instanceof ReplicaDown || opts.signal.aborted) throw err;
    if (isPrimaryReadError(err)) return { code: 'primary-unreadable', replica, path, detail: errorCode(err) };
    return { code: 'write-refused', replica, path, detail: (err as Error).message };
  } finally {
    await source.close().catch(() => undefined);
  }
}

/** The object just written (or found there) read back: undefined when it matches, else the problem. Throws ReplicaDown (and aborts). */
async function checkFile(target: ReplicaTarget, bagId: string, file: FileRecord, outcome: 'written' | 'exists', signal: AbortSignal): Promise<ReplicationProblem | undefined> {
  const replica = target.name;
  const path = file.path;
  const back = await target.readBack(objectKey(bagId, path), { size: file.size, sha256: file.digests.sha256! /* writeFile refused a file without one */ }, { signal });
  switch (back.kind) {
    case 'match':
      return undefined;
    case 'unreadable':
      return { code: 'copy-unreadable', replica, path, detail: back.reason };
    case 'missing':
      return { code: 'copy-differs', replica, path, detail: 'missing right after it was written' };
    case 'differs':
      return { code: outcome === 'written' ? 'copy-differs' : 'object-in-the-way', replica, path, detail: `${back.size} bytes, sha256 ${back.sha256}` };
  }
}

/** An error from reading the primary file (the stream's), not from the replica. */
function isPrimaryReadError(err: unknown): boolean {
  const e = err as { syscall?: string } | null;
  return e?.syscall === 'read';
}
