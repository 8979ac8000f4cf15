/**
 * Copying one stored package's OCFL object to one replica (an OCFL root, keys.ts): every file of
 * the bag (tag files too) streamed from its content path in the primary object to the same path
 * on the target, then read back and compared with the catalog's size and sha256; once all content
 * is verified, the object's declaration and inventories (object-files.ts), one after the other,
 * the root inventory and its sidecar last, so that a reader never finds an inventory whose
 * content is not all there. The package's objects are listed once first, so a file not there yet
 * is written without asking about it again. Files run in a few lanes (p-limit slots); each lane reads a file back while it
 * writes its next one (so at most one write and one read-back per lane; none while an ingest
 * keeps replication to one lane, which then does one file at a time). At most BIG_AT_ONCE lanes
 * write a large file at once (its upload has parts of its own in flight, and in memory), the
 * others take the small ones. A file counts as verified only once it was read back and matched.
 *
 * It does not decide when to copy or record the outcome: it reports verified files through
 * `onVerified` as it goes (the replicator keeps them in the catalog, so a restart skips them) and
 * returns the first problem found, or throws ReplicaDown when the replica is unavailable.
 */
import { constants } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import pLimit from 'p-limit';
import type { FileRecord } from '../catalog/types.js';
import { errorCode } from '../fs/errors.js';
import { inSlot } from '../service/slots.js';
import { Readable } from 'node:stream';
import type { Storage } from '../storage/storage.js';
import { contentPathOfFile, objectKey, objectPrefix } from './keys.js';
import { objectFilesOf, type ObjectFile } from './object-files.js';
import type { ReplicationProblem } from './problems.js';
import {
  ReplicaDown,
  SourceChanged,
  type ExpectedFile,
  type ReplicaTarget,
  type WriteSource,
} from './target.js';

export interface CopyOptions {
  /** Paths in the object already verified by an earlier attempt. */
  skip: ReadonlySet<string>;
  /** Paths in the object whose wrong object this daemon wrote itself: they may be replaced. */
  replaceable: ReadonlySet<string>;
  /** How many files at once, asked before each file (fewer while ingests run). */
  lanes: () => number;
  onVerified: (path: string, bytes: number) => void;
  signal: AbortSignal;
}

export type CopyOutcome =
  | { kind: 'verified'; files: number; bytes: number; written: number }
  | { kind: 'failed'; problem: ReplicationProblem };

/** A file at least this large is a large one (S3 uploads it in parts). */
const LARGE_BYTES = 64 * 1024 * 1024;
/** Large files copied at once. */
const BIG_AT_ONCE = 4;

export async function copyPackage(
  target: ReplicaTarget,
  bagId: string,
  storage: Storage,
  files: readonly FileRecord[],
  opts: CopyOptions,
): Promise<CopyOutcome> {
  const todo = files.filter((f) => !opts.skip.has(contentPathOfFile(f))).sort((a, b) => b.size - a.size);
  const large = todo.filter((f) => f.size >= LARGE_BYTES);
  const small = todo.filter((f) => f.size < LARGE_BYTES);
  const lastly = await objectFilesToSend(target, bagId, storage, files, opts.skip);
  if (!Array.isArray(lastly)) return { kind: 'failed', problem: lastly };
  const present = await keysOf(target, bagId, opts.signal);
  let written = 0;
  let verified = 0;
  let problem: ReplicationProblem | undefined;
  let down: unknown;
  let bigWriting = 0;
  const stopped = () => problem !== undefined || down !== undefined || opts.signal.aborted;
  // A file holds a writing slot while it is written, a reading slot while it is read back, and a
  // file slot throughout: each lane writes one file while it reads back its previous one. With
  // one lane (an ingest runs) a file is written only once the one before was read back.
  const writing = pLimit(1);
  const reading = pLimit(1);
  const inFlight = pLimit(1);
  const copyOne = async (): Promise<void> => {
    if (stopped()) return;
    const big = bigWriting < BIG_AT_ONCE ? large.shift() : undefined;
    const file = big ?? small.shift();
    if (file === undefined) return;
    if (big !== undefined) bigWriting++;
    let outcome: 'written' | 'exists' | ReplicationProblem;
    try {
      outcome = await writing(() => writeContent(target, bagId, storage, file, present, opts));
    } catch (err) {
      down ??= err;
      return;
    } finally {
      if (big !== undefined) bigWriting--;
    }
    if (typeof outcome !== 'string') {
      problem ??= outcome;
      return;
    }
    try {
      const path = contentPathOfFile(file);
      const expected = { size: file.size, sha256: file.digests.sha256! /* writeContent needs one */ };
      const result = await reading(() => checkFile(target, bagId, path, expected, outcome, opts.signal));
      if (result !== undefined) problem ??= result;
      else {
        if (outcome === 'written') written++;
        verified++;
        opts.onVerified(path, file.size);
      }
    } catch (err) {
      down ??= err;
    }
  };
  const copies = new Set<Promise<void>>();
  for (let left = todo.length; left > 0 && !stopped(); left--) {
    // Fewer lanes asked for (an ingest started): files under way finish, the next wait.
    const lanes = Math.max(1, Math.min(opts.lanes(), todo.length));
    writing.concurrency = lanes;
    reading.concurrency = lanes;
    inFlight.concurrency = lanes === 1 ? 1 : 2 * lanes;
    const { done } = await inSlot(inFlight, copyOne);
    copies.add(done);
    void done.finally(() => copies.delete(done));
  }
  await Promise.all(copies);
  opts.signal.throwIfAborted();
  if (down !== undefined) throw down;
  if (problem !== undefined) return { kind: 'failed', problem };
  // Every file is verified here, or the copy is not: never report a copy with a file left out.
  if (verified !== todo.length)
    throw new Error(
      `copy of ${bagId} to ${target.name} ended with ${todo.length - verified} of ${todo.length} files neither verified nor failed`,
    );
  const last = await sendObjectFiles(target, bagId, lastly, present, opts);
  if (typeof last !== 'number') return { kind: 'failed', problem: last };
  const bytes = files.reduce((n, f) => n + f.size, 0);
  return { kind: 'verified', files: files.length, bytes, written: written + last };
}

/**
 * The object's own files to send (read from the primary and checked), those not verified before;
 * read before any content goes, so a primary object that cannot be sent whole is not begun.
 */
async function objectFilesToSend(
  target: ReplicaTarget,
  bagId: string,
  storage: Storage,
  files: readonly FileRecord[],
  skip: ReadonlySet<string>,
): Promise<ObjectFile[] | ReplicationProblem> {
  const objectFiles = await objectFilesOf(storage, bagId, files);
  if (!Array.isArray(objectFiles)) return { ...objectFiles, replica: target.name };
  return objectFiles.filter((f) => !skip.has(f.path));
}

/**
 * Once all content is verified, the object's own files written and read back one at a time, in
 * order (the root inventory last): how many were written, or the first problem.
 */
async function sendObjectFiles(
  target: ReplicaTarget,
  bagId: string,
  objectFiles: readonly ObjectFile[],
  present: ReadonlySet<string>,
  opts: CopyOptions,
): Promise<number | ReplicationProblem> {
  let written = 0;
  for (const file of objectFiles) {
    const source = Readable.from([file.bytes]);
    const outcome = await writeObject(target, bagId, file.path, source, file, present, opts);
    if (typeof outcome !== 'string') return outcome;
    const result = await checkFile(target, bagId, file.path, file, outcome, opts.signal);
    if (result !== undefined) return result;
    if (outcome === 'written') written++;
    opts.onVerified(file.path, file.size);
  }
  return written;
}

/** The keys of the package's object on the replica, as the target names them. */
async function keysOf(target: ReplicaTarget, bagId: string, signal: AbortSignal): Promise<Set<string>> {
  const keys = new Set<string>();
  for await (const object of target.list(objectPrefix(bagId), signal))
    keys.add(object.key.replace(/^\/+/, ''));
  return keys;
}

/** A bag file's content written from the primary object unless already there. Throws ReplicaDown (and aborts). */
async function writeContent(
  target: ReplicaTarget,
  bagId: string,
  storage: Storage,
  file: FileRecord,
  present: ReadonlySet<string>,
  opts: CopyOptions,
): Promise<'written' | 'exists' | ReplicationProblem> {
  const path = contentPathOfFile(file);
  const sha256 = file.digests.sha256;
  if (sha256 === undefined)
    return {
      code: 'primary-changed',
      replica: target.name,
      path,
      detail: 'the catalog holds no sha256 for it',
    };
  let source: FileHandle;
  try {
    source = await open(storage.storedFilePath(bagId, file), constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (err) {
    return { code: 'primary-unreadable', replica: target.name, path, detail: errorCode(err) };
  }
  try {
    return await writeObject(target, bagId, path, source, { size: file.size, sha256 }, present, opts);
  } finally {
    await source.close().catch(() => undefined);
  }
}

/** One file of the object written unless already there: what happened, or the problem. Throws ReplicaDown (and aborts). */
async function writeObject(
  target: ReplicaTarget,
  bagId: string,
  path: string,
  source: WriteSource,
  expected: ExpectedFile,
  present: ReadonlySet<string>,
  opts: CopyOptions,
): Promise<'written' | 'exists' | ReplicationProblem> {
  const replica = target.name;
  const key = objectKey(bagId, path);
  try {
    return await target.write(
      key,
      source,
      { size: expected.size, sha256: expected.sha256 },
      { replace: opts.replaceable.has(path), absent: !present.has(key), signal: opts.signal },
    );
  } catch (err) {
    if (err instanceof SourceChanged)
      return {
        code: 'primary-changed',
        replica,
        path,
        detail: `read ${err.size} bytes, sha256 ${err.sha256}`,
      };
    if (err instanceof ReplicaDown || opts.signal.aborted) throw err;
    if (isPrimaryReadError(err)) return { code: 'primary-unreadable', replica, path, detail: errorCode(err) };
    return { code: 'write-refused', replica, path, detail: (err as Error).message };
  }
}

/** The object just written (or found there) read back: undefined when it matches, else the problem. Throws ReplicaDown (and aborts). */
async function checkFile(
  target: ReplicaTarget,
  bagId: string,
  path: string,
  expected: ExpectedFile,
  outcome: 'written' | 'exists',
  signal: AbortSignal,
): Promise<ReplicationProblem | undefined> {
  const replica = target.name;
  const back = await target.readBack(
    objectKey(bagId, path),
    { size: expected.size, sha256: expected.sha256 },
    { signal },
  );
  switch (back.kind) {
    case 'match':
      return undefined;
    case 'unreadable':
      return { code: 'copy-unreadable', replica, path, detail: back.reason };
    case 'missing':
      return { code: 'copy-differs', replica, path, detail: 'missing right after it was written' };
    case 'differs':
      return {
        code: outcome === 'written' ? 'copy-differs' : 'object-in-the-way',
        replica,
        path,
        detail: `${back.size} bytes, sha256 ${back.sha256}`,
      };
  }
}

/** An error from reading the primary file (the stream's), not from the replica. */
function isPrimaryReadError(err: unknown): boolean {
  const e = err as { syscall?: string } | null;
  return e?.syscall === 'read';
}
