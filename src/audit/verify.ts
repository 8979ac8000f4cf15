/**
 * Verifying one stored package against the catalog: every recorded file (tag files and payload
 * alike) is read again and its size and digests compared; files on disk the catalog does not
 * know are found in the package folder's listing, made without following links. Every problem is
 * a typed `Finding` (findings.ts), gathered into a list.
 *
 * The hasher (the fixity pool) lists the folder and reads the files in its workers; this module
 * only compares, and looks at a file itself (one lstat) only when a recorded file is no longer a
 * regular file. It never writes, never throws for what it finds on disk (a missing or unreadable
 * folder is a finding like any other) and never decides what to do about a finding: the runner
 * records it. It rejects only when the check itself could not be done: an abort (the caller's
 * signal), or a closed or broken hasher.
 */
import { lstat } from 'node:fs/promises';
import pLimit from 'p-limit';
import type { FileRecord } from '../catalog/types.js';
import {
  ALGORITHM_STRENGTH,
  entriesOf,
  errorCode,
  kindOf,
  type Algorithm,
  type FolderEntries,
  type Tree,
} from '../fixity/index.js';
import { inSlot } from '../service/slots.js';
import { Storage } from '../storage/storage.js';
import { byPackageThenPath, type Finding } from './findings.js';

/** What verifying needs from the fixity pool (FixityPool satisfies it). */
export interface PackageHasher {
  /**
   * Many files as one job, each file's entry its result or its error (FixityPool's hashFiles):
   * it spares the main thread most of the per-file work.
   */
  hashFiles(
    files: ReadonlyArray<{ path: string; algorithms: Algorithm[] }>,
    opts: { priority?: 'ingest' | 'audit'; signal?: AbortSignal },
  ): Promise<Array<HashResult | Error>>;
  /** Worker threads hashing (FixityPool's workers); unknown: taken as 8. */
  readonly workers?: number;
  /** The package folder listed by the hasher, links not followed (FixityPool's listTree). */
  listTree(absDir: string, opts: { priority?: 'ingest' | 'audit'; signal?: AbortSignal }): Promise<Tree>;
}

interface HashResult {
  size: number;
  digests: Partial<Record<Algorithm, string>>;
}

export interface VerifyOptions {
  /** `strongest`: the strongest recorded digest of each file; `all`: every recorded one. */
  algorithms: 'strongest' | 'all';
  signal?: AbortSignal;
  /** Called with a file's recorded size once it has been read, for progress reporting. */
  onFileRead?: (bytes: number) => void;
  /**
   * Called once every file has been handed to the hasher (only the last ones are still being
   * read): the moment a caller can start on the next package without the workers going idle.
   */
  onSubmitted?: () => void;
}

/**
 * Errors that say nothing about the file: the check was stopped, or the hasher itself broke (a
 * worker thread died). They propagate instead of becoming findings, so a broken pool never
 * records a package as damaged.
 */
const STOP_CODES = new Set(['ABORT_ERR', 'ERR_FIXITY_POOL_CLOSED', 'ERR_FIXITY_WORKER_FAILED']);

/** A stop (the caller's abort or the pool closing), never a finding about the package. */
const isStop = (err: unknown, signal: AbortSignal | undefined): boolean =>
  signal?.aborted === true || STOP_CODES.has(errorCode(err));

/** The digests to verify for one file, strongest first. */
function algorithmsToVerify(file: FileRecord, mode: 'strongest' | 'all'): Algorithm[] {
  const recorded = ALGORITHM_STRENGTH.filter((a) => file.digests[a] !== undefined);
  return mode === 'all' ? recorded : recorded.slice(0, 1);
}

/**
 * The recorded files as a view of the catalog (`FileStore.view`): walked afresh on each
 * iteration, and asked about one path without a walk, so the listing is compared without a set
 * of every recorded path.
 */
interface RecordedFiles extends Iterable<FileRecord> {
  has(path: string): boolean;
  /** Whether some recorded file's path starts with `folder/`. */
  holdsUnder(folder: string): boolean;
}

/**
 * Checks the package folder `dir` against its recorded `files`: an array, or a view of the
 * catalog (walked twice, big files first, and looked up for the listing; only the big files are
 * held). Findings come back sorted: package-level first, then by path.
 *
 * The folder is listed by a pool worker and the files hashed in batches, listing and hashing
 * queued at once: the main thread only compares. Hashing results are dropped when the folder
 * turns out to be missing or unlistable (one finding for the package, not one per file).
 */
export async function verifyPackage(
  dir: string,
  files: Iterable<FileRecord> | RecordedFiles,
  hasher: PackageHasher,
  opts: VerifyOptions,
): Promise<Finding[]> {
  const { signal } = opts;
  signal?.throwIfAborted();
  const listing = hasher.listTree(dir, { priority: 'audit', ...(signal ? { signal } : {}) });
  const hashed: Finding[] = [];
  const [tree, hashing] = await Promise.allSettled([
    listing,
    checkInBatches(dir, largestFirst(files), hasher, opts, hashed),
  ]);
  signal?.throwIfAborted();
  if (tree.status === 'rejected') throw tree.reason;
  const { root, dirs } = tree.value;
  if ('code' in root)
    return root.code === 'ENOENT' || root.code === 'ENOTDIR'
      ? [{ code: 'package-missing' }]
      : [{ code: 'package-unreadable', reason: root.code }];
  if ('kind' in root) return [{ code: 'package-missing', kind: root.kind }];
  const walked = walk(lookupOf(files), new Map(dirs));
  if ('unreadable' in walked) return [{ code: 'package-unreadable', reason: walked.unreadable }];
  if (hashing.status === 'rejected') throw hashing.reason;
  return [...walked.findings, ...hashed].sort(byPackageThenPath);
}

/** Files of at least this size are hashed before the others, largest first. */
const BIG_FILE = 1024 * 1024;

/**
 * The files, big ones first, largest first (the pool runs jobs in submission order, and big
 * files last would leave cores idle), then the rest in the order given. Only the big files are
 * held at once: `files` may be a view that walks the catalog on each iteration.
 */
function* largestFirst(files: Iterable<FileRecord>): Generator<FileRecord> {
  const big: FileRecord[] = [];
  for (const file of files) if (file.size >= BIG_FILE) big.push(file);
  yield* big.sort((a, b) => b.size - a.size);
  for (const file of files) if (file.size < BIG_FILE) yield file;
}

/** A batch for the pool closes at this many bytes or files, so a large package spreads over the workers. */
const BATCH_BYTES = 8 * 1024 * 1024;
const BATCH_FILES = 256;

/**
 * Batches handed to the pool and not yet answered, at most, per worker: enough to keep each
 * busy (one running, one waiting), few enough that the records waiting for their answer are
 * young when it comes. What waits through several young-generation collections is promoted to
 * V8's old one and stays until a full collection (docs/performance.md, "Scale", the audit of a
 * bag of many files).
 */
const BATCHES_PER_WORKER = 2;
/** Workers assumed when the hasher does not say. */
const WORKERS_UNKNOWN = 8;

/**
 * The files (largest first) in batches, handed to the pool a bounded number ahead: per file, no
 * message, promise or closure of its own, which is most of what an audit of small files costs
 * the main thread. A batch is made only once a slot is free, so only its records wait.
 */
async function checkInBatches(
  dir: string,
  order: Iterable<FileRecord>,
  hasher: PackageHasher,
  opts: VerifyOptions,
  findings: Finding[],
): Promise<void> {
  const hashOpts = { priority: 'audit' as const, ...(opts.signal ? { signal: opts.signal } : {}) };
  const inFlight = pLimit(BATCHES_PER_WORKER * Math.max(1, hasher.workers ?? WORKERS_UNKNOWN));
  const files = order[Symbol.iterator]();
  const batches: Array<Promise<void>> = [];
  for (let more = true; more;) {
    const { done } = await inSlot(inFlight, async () => {
      const batch = nextBatch(dir, files, opts, findings);
      more = batch.more;
      if (batch.records.length === 0) return;
      // Only the records wait for the answer (the pool copies what it sends): what waits is
      // promoted out of V8's young generation, so the less of it per file, the less the old grows.
      const results = await hasher.hashFiles(batch.items, hashOpts);
      for (let i = 0; i < results.length; i++) {
        const file = batch.records[i]!;
        const found = judge(file, algorithmsToVerify(file, opts.algorithms), results[i]!, opts);
        if (found === NEEDS_LSTAT)
          findings.push(await notRegular(file.path, Storage.resolveInside(dir, file.path)));
        else if (found !== undefined) findings.push(found);
      }
    });
    // Looked at with the others at the end.
    batches.push(done);
  }
  opts.onSubmitted?.();
  const settled = await Promise.allSettled(batches);
  opts.signal?.throwIfAborted();
  for (const result of settled) if (result.status === 'rejected') throw result.reason;
}

/** The next files of `files` up to a batch's bytes or count; a path unsafe to open is a finding. */
function nextBatch(
  dir: string,
  files: Iterator<FileRecord>,
  opts: VerifyOptions,
  findings: Finding[],
): { records: FileRecord[]; items: Array<{ path: string; algorithms: Algorithm[] }>; more: boolean } {
  const records: FileRecord[] = [];
  const items: Array<{ path: string; algorithms: Algorithm[] }> = [];
  let bytes = 0;
  while (bytes < BATCH_BYTES && items.length < BATCH_FILES) {
    const next = files.next();
    if (next.done === true) return { records, items, more: false };
    const file = next.value;
    let absPath: string;
    try {
      absPath = Storage.resolveInside(dir, file.path);
    } catch {
      findings.push({ code: 'file-unreadable', path: file.path, reason: 'unsafe path in the catalog' });
      continue;
    }
    records.push(file);
    items.push({ path: absPath, algorithms: algorithmsToVerify(file, opts.algorithms) });
    bytes += file.size;
  }
  return { records, items, more: true };
}

/** What `judge` returns when the file is no longer a regular file: its kind needs an lstat. */
const NEEDS_LSTAT = Symbol('needs lstat');

/**
 * What hashing one file found, as a finding (undefined: the file is intact), or NEEDS_LSTAT when
 * the hasher refused it as not a regular file (a link, folder or special file now). Throws a stop.
 */
function judge(
  file: FileRecord,
  algorithms: Algorithm[],
  found: HashResult | Error,
  opts: VerifyOptions,
): Finding | undefined | typeof NEEDS_LSTAT {
  const path = file.path;
  if (found instanceof Error || typeof found !== 'object' || found === null || !('digests' in found)) {
    const err: unknown = found;
    if (isStop(err, opts.signal)) throw err;
    const code = errorCode(err);
    if (code === 'ENOENT' || code === 'ENOTDIR') return { code: 'file-missing', path };
    if (code === 'ELOOP' || code === 'EISDIR' || code === 'ERR_NOT_REGULAR_FILE') return NEEDS_LSTAT;
    return { code: 'file-unreadable', path, reason: code };
  }
  opts.onFileRead?.(file.size);
  if (found.size !== file.size)
    return { code: 'size-changed', path, expected: String(file.size), actual: String(found.size) };
  for (const algorithm of algorithms) {
    const expected = file.digests[algorithm]!;
    const actual = found.digests[algorithm];
    if (actual === undefined || actual.toLowerCase() !== expected.toLowerCase())
      return { code: 'file-changed', path, algorithm, expected, actual: actual ?? '' };
  }
  if (algorithms.length === 0) return { code: 'digest-not-recorded', path };
  return undefined;
}

/** The finding for a recorded file that is no longer a regular file, naming what it is now. */
function notRegular(path: string, absPath: string): Promise<Finding> {
  return lstat(absPath).then(
    (entry): Finding => ({ code: 'file-not-regular', path, kind: kindOf(entry) }),
    (): Finding => ({ code: 'file-not-regular', path, kind: 'unknown' }),
  );
}

/** Recorded paths as the listing's comparison needs them: a view of the catalog as it is, an array made into sets. */
function lookupOf(files: Iterable<FileRecord> | RecordedFiles): Pick<RecordedFiles, 'has' | 'holdsUnder'> {
  if ('has' in files && 'holdsUnder' in files) return files;
  const recorded = new Set<string>();
  const impliedDirs = new Set<string>();
  for (const { path } of files) {
    recorded.add(path);
    for (let i = path.indexOf('/'); i >= 0; i = path.indexOf('/', i + 1)) impliedDirs.add(path.slice(0, i));
  }
  return { has: (path) => recorded.has(path), holdsUnder: (folder) => impliedDirs.has(folder) };
}

const NO_ENTRIES: FolderEntries = { names: '', kinds: '' };

/**
 * Goes through the package folder's listing (`listed`: bag-relative folder → its entries, or the
 * error code of its readdir) and reports every entry the catalog does not know. A folder the
 * catalog does not imply is reported itself only when it holds no files (empty folders that
 * appeared); otherwise the files in it are. A subfolder that could not be listed is reported as
 * unreadable; the root folder failing to list makes the whole package unreadable.
 */
function walk(
  recorded: Pick<RecordedFiles, 'has' | 'holdsUnder'>,
  listed: ReadonlyMap<string, FolderEntries | string>,
): { findings: Finding[] } | { unreadable: string } {
  const findings: Finding[] = [];

  const visit = (rel: string, entries: FolderEntries): void => {
    for (const [name, kind] of entriesOf(entries)) {
      const path = rel === '' ? name : `${rel}/${name}`;
      if (kind === 'directory') {
        const before = findings.length;
        const inside = listed.get(path) ?? NO_ENTRIES;
        if (typeof inside === 'string')
          findings.push({ code: 'file-unreadable', path: `${path}/`, reason: inside });
        else visit(path, inside);
        // A folder the catalog does not imply, holding no files: one finding for the topmost.
        const beneath = findings.slice(before);
        if (
          !recorded.holdsUnder(path) &&
          !recorded.has(path) &&
          beneath.every((f) => f.code === 'file-extra' && f.kind === 'directory')
        ) {
          findings.splice(before, beneath.length, {
            code: 'file-extra',
            path: `${path}/`,
            kind: 'directory',
          });
        }
      } else if (!recorded.has(path)) {
        // A recorded path that became a link or special file is reported by judge instead.
        findings.push({ code: 'file-extra', path, kind });
      }
    }
  };

  const root = listed.get('') ?? NO_ENTRIES;
  if (typeof root === 'string') return { unreadable: root };
  visit('', root);
  return { findings };
}
