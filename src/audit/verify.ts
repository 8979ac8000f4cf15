/**
 * Verifying one stored package against the catalog: every recorded file (tag files and payload
 * alike) is read again and its size and digests compared; files on disk the catalog does not
 * know are found by walking the folder without following links. Every problem is a typed
 * `Finding`, gathered into a list; `describeFinding` turns one into a sentence for people.
 *
 * It never writes, never throws for what it finds on disk (a missing or unreadable folder is a
 * finding like any other) and never decides what to do about a finding: the runner records it.
 * It rejects only when the check itself could not be done: an abort (the caller's signal), or
 * a closed or broken hasher.
 */
import { lstat, readdir } from 'node:fs/promises';
import pLimit from 'p-limit';
import type { FileRecord } from '../catalog/types.js';
import { ALGORITHM_STRENGTH, errorCode, kindOf, type Algorithm, type EntryKind, type Tree } from '../fixity/index.js';
import { Storage } from '../storage/storage.js';

/** What verifying needs from the fixity pool (FixityPool satisfies it). */
export interface PackageHasher {
  hashFile(absPath: string, algorithms: Algorithm[], opts: { priority?: 'ingest' | 'audit'; signal?: AbortSignal }): Promise<HashResult>;
  /**
   * Optional: many files as one job, each file's entry its result or its error (FixityPool's
   * hashFiles). Used when present; it spares the main thread most of the per-file work.
   */
  hashFiles?(
    files: ReadonlyArray<{ path: string; algorithms: Algorithm[] }>,
    opts: { priority?: 'ingest' | 'audit'; signal?: AbortSignal },
  ): Promise<Array<HashResult | Error>>;
  /** Optional, used with hashFiles: the package folder listed by the hasher (FixityPool's listTree). */
  listTree?(absDir: string, opts: { priority?: 'ingest' | 'audit'; signal?: AbortSignal }): Promise<Tree>;
}

interface HashResult {
  size: number;
  digests: Partial<Record<Algorithm, string>>;
}

type FindingCode =
  /** The package folder is gone (or something other than a folder stands in its place). */
  | 'package-missing'
  /** The package folder exists but could not be listed. */
  | 'package-unreadable'
  /** The package is no longer stored according to the catalog. */
  | 'package-not-in-catalog'
  | 'file-missing'
  /** Same size, different content: `algorithm`, `expected` and `actual` digests. */
  | 'file-changed'
  /** `expected` and `actual` are sizes in bytes (decimal). */
  | 'size-changed'
  /** Could not be read; `reason` is the error code (EACCES, EIO, ...). */
  | 'file-unreadable'
  /** A recorded file is now a symbolic link, folder or special file; `kind` says which. */
  | 'file-not-regular'
  /** On disk but not in the catalog; `kind` says what it is. */
  | 'file-extra'
  /** The catalog holds no digest for the file, so only its size was checked. */
  | 'digest-not-recorded';

export interface Finding {
  code: FindingCode;
  /** Relative to the bag root, as in the catalog; absent for findings about the whole package. */
  path?: string;
  algorithm?: Algorithm;
  expected?: string;
  actual?: string;
  /** The error code behind an unreadable file or folder. */
  reason?: string;
  kind?: EntryKind;
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
  /** Files handed to the hasher at once for this package; default 32. */
  filesInFlight?: number;
}

/**
 * Errors that say nothing about the file: the check was stopped, or the hasher itself broke (a
 * worker thread died). They propagate instead of becoming findings, so a broken pool never
 * records a package as damaged.
 */
const STOP_CODES = new Set(['ABORT_ERR', 'ERR_FIXITY_POOL_CLOSED', 'ERR_FIXITY_WORKER_FAILED']);

/** A stop (the caller's abort or the pool closing), never a finding about the package. */
const isStop = (err: unknown, signal: AbortSignal | undefined): boolean => signal?.aborted === true || STOP_CODES.has(errorCode(err));

/** The digests to verify for one file, strongest first. */
function algorithmsToVerify(file: FileRecord, mode: 'strongest' | 'all'): Algorithm[] {
  const recorded = ALGORITHM_STRENGTH.filter((a) => file.digests[a] !== undefined);
  return mode === 'all' ? recorded : recorded.slice(0, 1);
}

/**
 * Checks the package folder `dir` against its recorded `files`. Findings come back sorted:
 * package-level first, then by path.
 */
export async function verifyPackage(dir: string, files: readonly FileRecord[], hasher: PackageHasher, opts: VerifyOptions): Promise<Finding[]> {
  const { signal } = opts;
  signal?.throwIfAborted();

  if (hasher.listTree !== undefined && hasher.hashFiles !== undefined) return verifyInWorkers(dir, files, hasher as Required<PackageHasher>, opts);

  const root = await lstat(dir).catch((err: unknown) => err as NodeJS.ErrnoException);
  if (root instanceof Error) {
    const code = errorCode(root);
    if (code === 'ENOENT' || code === 'ENOTDIR') return [{ code: 'package-missing' }];
    return [{ code: 'package-unreadable', reason: code }];
  }
  if (!root.isDirectory()) return [{ code: 'package-missing', kind: kindOf(root) }];

  // Listing first: an unlistable folder is one finding, not one per file.
  const walked = await walk(files, signal, async (rel) =>
    (await readdir(rel === '' ? dir : `${dir}/${rel}`, { withFileTypes: true })).map((entry): [string, EntryKind] => [entry.name, kindOf(entry)]),
  );
  if ('unreadable' in walked) return [{ code: 'package-unreadable', reason: walked.unreadable }];

  const findings: Finding[] = [...walked.findings];
  // Largest first: the pool runs jobs in submission order, and big files last would leave cores idle.
  const order = [...files].sort((a, b) => b.size - a.size);
  if (hasher.hashFiles !== undefined) {
    await checkInBatches(dir, order, hasher.hashFiles.bind(hasher), opts, findings);
  } else {
    const limit = pLimit(opts.filesInFlight ?? 32);
    let handedOver = 0;
    const submitted = () => {
      if (++handedOver === order.length) opts.onSubmitted?.();
    };
    if (order.length === 0) opts.onSubmitted?.();
    const checks = order.map((file) => limit(async () => {
      const found = await checkFile(dir, file, hasher, opts, submitted);
      if (found !== undefined) findings.push(found);
    }));
    const settled = await Promise.allSettled(checks);
    signal?.throwIfAborted();
    for (const result of settled) if (result.status === 'rejected') throw result.reason;
  }
  return findings.sort(byPackageThenPath);
}

/**
 * The same with the folder listed by a pool worker and the files hashed in batches, listing and
 * hashing queued at once: the main thread only compares. Hashing results are dropped when the
 * folder turns out to be missing or unlistable (as above, one finding for the package).
 */
async function verifyInWorkers(dir: string, files: readonly FileRecord[], hasher: Required<PackageHasher>, opts: VerifyOptions): Promise<Finding[]> {
  const { signal } = opts;
  const listing = hasher.listTree(dir, { priority: 'audit', ...(signal ? { signal } : {}) });
  const hashed: Finding[] = [];
  const order = [...files].sort((a, b) => b.size - a.size);
  const [tree, hashing] = await Promise.allSettled([listing, checkInBatches(dir, order, hasher.hashFiles.bind(hasher), opts, hashed)]);
  signal?.throwIfAborted();
  if (tree.status === 'rejected') throw tree.reason;
  const { root, dirs } = tree.value;
  if ('code' in root) return root.code === 'ENOENT' || root.code === 'ENOTDIR' ? [{ code: 'package-missing' }] : [{ code: 'package-unreadable', reason: root.code }];
  if ('kind' in root) return [{ code: 'package-missing', kind: root.kind }];
  const listed = new Map(dirs);
  const walked = await walk(files, signal, async (rel) => {
    const entries = listed.get(rel);
    if (typeof entries === 'string') throw Object.assign(new Error(`cannot list ${rel || 'the package folder'}: ${entries}`), { code: entries });
    return entries ?? [];
  });
  if ('unreadable' in walked) return [{ code: 'package-unreadable', reason: walked.unreadable }];
  if (hashing.status === 'rejected') throw hashing.reason;
  return [...walked.findings, ...hashed].sort(byPackageThenPath);
}

/** A batch for the pool closes at this many bytes or files, so a large package spreads over the workers. */
const BATCH_BYTES = 8 * 1024 * 1024;
const BATCH_FILES = 256;

/**
 * The files (largest first) in batches, all handed to the pool at once: per file, no message,
 * promise or closure of its own, which is most of what an audit of small files costs the main
 * thread.
 */
async function checkInBatches(
  dir: string,
  order: readonly FileRecord[],
  hashFiles: NonNullable<PackageHasher['hashFiles']>,
  opts: VerifyOptions,
  findings: Finding[],
): Promise<void> {
  const hashOpts = { priority: 'audit' as const, ...(opts.signal ? { signal: opts.signal } : {}) };
  const batches: Array<Promise<void>> = [];
  let records: FileRecord[] = [];
  let items: Array<{ path: string; algorithms: Algorithm[] }> = [];
  let bytes = 0;
  const submit = (): void => {
    const batchRecords = records;
    const batchItems = items;
    records = [];
    items = [];
    bytes = 0;
    batches.push(
      hashFiles(batchItems, hashOpts).then(async (results) => {
        for (let i = 0; i < results.length; i++) {
          let found = judge(batchRecords[i]!, batchItems[i]!.path, batchItems[i]!.algorithms, results[i]!, opts);
          if (found instanceof Promise) found = await found;
          if (found !== undefined) findings.push(found);
        }
      }),
    );
  };
  for (const file of order) {
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
    if (bytes >= BATCH_BYTES || items.length >= BATCH_FILES) submit();
  }
  if (items.length > 0) submit();
  opts.onSubmitted?.();
  const settled = await Promise.allSettled(batches);
  opts.signal?.throwIfAborted();
  for (const result of settled) if (result.status === 'rejected') throw result.reason;
}

async function checkFile(dir: string, file: FileRecord, hasher: PackageHasher, opts: VerifyOptions, submitted: () => void): Promise<Finding | undefined> {
  opts.signal?.throwIfAborted();
  const path = file.path;
  let absPath: string;
  try {
    absPath = Storage.resolveInside(dir, path);
  } catch {
    submitted();
    return { code: 'file-unreadable', path, reason: 'unsafe path in the catalog' };
  }
  const algorithms = algorithmsToVerify(file, opts.algorithms);
  let found: HashResult | Error;
  try {
    const hashing = hasher.hashFile(absPath, algorithms, { priority: 'audit', ...(opts.signal ? { signal: opts.signal } : {}) });
    submitted();
    found = await hashing;
  } catch (err) {
    found = err as Error;
  }
  return judge(file, absPath, algorithms, found, opts);
}

/**
 * What hashing one file found, as a finding (undefined: the file is intact); a promise only when
 * it must look at the file again (not a regular file any more). Throws a stop.
 */
function judge(file: FileRecord, absPath: string, algorithms: Algorithm[], found: HashResult | Error, opts: VerifyOptions): Finding | undefined | Promise<Finding> {
  const path = file.path;
  if (found instanceof Error || typeof found !== 'object' || found === null || !('digests' in found)) {
    const err: unknown = found;
    if (isStop(err, opts.signal)) throw err;
    const code = errorCode(err);
    if (code === 'ENOENT' || code === 'ENOTDIR') return { code: 'file-missing', path };
    if (code === 'ELOOP' || code === 'EISDIR' || code === 'ERR_NOT_REGULAR_FILE') {
      return lstat(absPath).then(
        (entry): Finding => ({ code: 'file-not-regular', path, kind: kindOf(entry) }),
        (): Finding => ({ code: 'file-not-regular', path, kind: 'unknown' }),
      );
    }
    return { code: 'file-unreadable', path, reason: code };
  }
  opts.onFileRead?.(file.size);
  if (found.size !== file.size) return { code: 'size-changed', path, expected: String(file.size), actual: String(found.size) };
  for (const algorithm of algorithms) {
    const expected = file.digests[algorithm]!;
    const actual = found.digests[algorithm];
    if (actual === undefined || actual.toLowerCase() !== expected.toLowerCase())
      return { code: 'file-changed', path, algorithm, expected, actual: actual ?? '' };
  }
  if (algorithms.length === 0) return { code: 'digest-not-recorded', path };
  return undefined;
}

/**
 * Walks the package folder without following links and reports every entry the catalog does
 * not know. A folder the catalog does not imply is reported itself only when it holds no files
 * (empty folders that appeared); otherwise the files in it are. A subfolder that cannot be listed is reported as
 * unreadable; the root folder failing to list makes the whole package unreadable.
 */
async function walk(
  files: readonly FileRecord[],
  signal: AbortSignal | undefined,
  list: (rel: string) => Promise<Array<[name: string, kind: EntryKind]>>,
): Promise<{ findings: Finding[] } | { unreadable: string }> {
  const recorded = new Set(files.map((f) => f.path));
  const impliedDirs = new Set<string>();
  for (const { path } of files) {
    for (let i = path.indexOf('/'); i >= 0; i = path.indexOf('/', i + 1)) impliedDirs.add(path.slice(0, i));
  }
  const findings: Finding[] = [];

  const visit = async (rel: string): Promise<void> => {
    signal?.throwIfAborted();
    let entries: Array<[string, EntryKind]>;
    try {
      entries = await list(rel);
    } catch (err) {
      if (rel === '') throw err;
      findings.push({ code: 'file-unreadable', path: `${rel}/`, reason: errorCode(err) });
      return;
    }
    for (const [name, kind] of entries) {
      const path = rel === '' ? name : `${rel}/${name}`;
      if (kind === 'directory') {
        const before = findings.length;
        await visit(path);
        // A folder the catalog does not imply, holding no files: one finding for the topmost.
        const beneath = findings.slice(before);
        if (!impliedDirs.has(path) && !recorded.has(path) && beneath.every((f) => f.code === 'file-extra' && f.kind === 'directory')) {
          findings.splice(before, beneath.length, { code: 'file-extra', path: `${path}/`, kind: 'directory' });
        }
      } else if (!recorded.has(path)) {
        // A recorded path that became a link or special file is reported by checkFile instead.
        findings.push({ code: 'file-extra', path, kind });
      }
    }
  };

  try {
    await visit('');
  } catch (err) {
    if (isStop(err, signal)) throw err;
    return { unreadable: errorCode(err) };
  }
  return { findings };
}

function byPackageThenPath(a: Finding, b: Finding): number {
  const pa = a.path ?? '';
  const pb = b.path ?? '';
  return pa < pb ? -1 : pa > pb ? 1 : 0;
}

const KIND_NOUN: Record<EntryKind, string> = {
  file: 'file',
  directory: 'folder',
  symlink: 'symbolic link',
  fifo: 'FIFO',
  socket: 'socket',
  'block device': 'block device',
  'character device': 'character device',
  unknown: 'entry of unknown type',
};

/** One finding as a sentence for people. Never names a server path: paths are bag-relative. */
export function describeFinding(f: Finding): string {
  const where = f.path ?? 'the package';
  switch (f.code) {
    case 'package-missing':
      return f.kind === undefined ? 'the package folder is missing' : `the package folder is missing: a ${KIND_NOUN[f.kind]} stands in its place`;
    case 'package-unreadable':
      return `the package folder could not be read (${f.reason ?? 'unknown error'})`;
    case 'package-not-in-catalog':
      return 'the package is no longer recorded as stored in the catalog';
    case 'file-missing':
      return `${where}: missing`;
    case 'file-changed':
      return `${where}: ${f.algorithm ?? 'digest'} changed: expected ${f.expected ?? '?'}, found ${f.actual || '?'}`;
    case 'size-changed':
      return `${where}: size changed: expected ${f.expected ?? '?'} bytes, found ${f.actual ?? '?'}`;
    case 'file-unreadable':
      return `${where}: could not be read (${f.reason ?? 'unknown error'})`;
    case 'file-not-regular':
      return `${where}: is now a ${KIND_NOUN[f.kind ?? 'unknown']}, not a regular file`;
    case 'file-extra':
      return `${where}: extra ${KIND_NOUN[f.kind ?? 'file']} not in the catalog`;
    case 'digest-not-recorded':
      return `${where}: no digest recorded in the catalog; only its size was checked`;
  }
}

/** The detail of a failed fixity check event: one line per finding. */
export function findingsDetail(findings: readonly Finding[]): string {
  return findings.map(describeFinding).join('\n');
}
