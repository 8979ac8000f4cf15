/**
 * Walking a bag on disk without trusting it: every entry is looked at with lstat, symbolic links
 * are never followed, anything that is not a regular file or a directory is refused. Also the
 * name checks that need the whole set of names at once: operating-system junk files and names
 * that collide when letter case or Unicode normalization is ignored.
 */
import { isUtf8 } from 'node:buffer';
import { lstatSync, type Stats } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { kindOf } from '../fixity/index.js';
import { errorCode } from '../fs/errors.js';
import { under } from '../fs/paths.js';
import { nonPortableNameReason, unsafePathReason } from './paths.js';
import type { BagProblemInit, SpecialFileKind } from './problems.js';

export interface ScannedFile {
  /** Relative to the bag root, '/' separated. */
  path: string;
  size: number;
  /**
   * What changes when the file is written to or replaced, as scanned (with `size`): numbers on
   * the record rather than a string per file, for bags of many files.
   */
  ino: number;
  mtimeMs: number;
  ctimeMs: number;
}

export interface BagScan {
  /** Regular files, sorted by path. */
  files: ScannedFile[];
  /**
   * Paths that exist in the bag but are neither regular files nor directories (links, devices,
   * entries that could not be looked at): with `files` and `directories`, everything there is.
   * Not a set of every path: for a bag of many files that would be one more entry per file.
   */
  others: Set<string>;
  /** Directories, sorted by path. */
  directories: string[];
  /**
   * Paths that could not be looked at or into (unreadable folders, paths beyond PATH_MAX), each
   * reported once: what a manifest lists under them is not known to be missing.
   */
  unreachable: string[];
  /** The bag folder itself could not be listed: nothing else is known about the bag. */
  rootUnreadable?: string;
  problems: BagProblemInit[];
}

/** Whether `st` is still the file scanned: same inode, size, modification and change time. */
function sameStamp(file: ScannedFile, st: Stats): boolean {
  return (
    st.ino === file.ino && st.size === file.size && st.mtimeMs === file.mtimeMs && st.ctimeMs === file.ctimeMs
  );
}

function specialKind(st: Stats): SpecialFileKind {
  const kind = kindOf(st);
  return kind === 'file' || kind === 'directory' || kind === 'symlink' ? 'unknown' : kind;
}

/**
 * The path as one flat string. `${dir}/${name}` is a V8 rope (two cons cells over the parts),
 * which stays as large as the parts and the flat copy together once it is hashed as a map key,
 * for every file, through the whole validation (docs/performance.md, "Scale").
 */
function flatString(path: string): string {
  return Buffer.from(path, 'utf8').toString('utf8');
}

/** The longest run of synchronous lstat calls before the event loop gets a turn. */
const SLICE_MS = 4;

/**
 * lstat of `count` paths in order, each Stats (or the error) handed to `use`. Synchronous calls in
 * slices of a few milliseconds: an lstat through fs/promises cost 5–8 times the CPU (a thread-pool
 * round trip, a promise and more garbage per file), all of it before hashing can start
 * (docs/performance.md, "Ingest"); between slices the daemon's event loop runs.
 */
async function lstatEach(
  count: number,
  pathOf: (i: number) => string,
  use: (i: number, st: Stats | Error) => void,
  signal: AbortSignal | undefined,
): Promise<void> {
  let sliceStart = performance.now();
  for (let i = 0; i < count; i++) {
    if (performance.now() - sliceStart > SLICE_MS) {
      await nextTurn();
      signal?.throwIfAborted();
      sliceStart = performance.now();
    }
    let st: Stats | Error;
    try {
      st = lstatSync(pathOf(i));
    } catch (err) {
      st = err as Error;
    }
    use(i, st);
  }
}

/** The problem of a path that could not be looked at: too long for the system, or unreadable. */
function unreachableProblem(path: string, err: unknown): BagProblemInit {
  const code = errorCode(err);
  return code === 'ENAMETOOLONG'
    ? { code: 'path-beyond-path-max', path }
    : { code: 'file-unreadable', path, detail: code };
}

/** The names of folder `dir` that are UTF-8, sorted; each other one is a `name-not-utf8` problem. */
function utf8Names(dir: string, names: readonly Buffer[], problems: BagProblemInit[]): string[] {
  const decoded: string[] = [];
  for (const raw of names) {
    if (isUtf8(raw)) decoded.push(raw.toString('utf8'));
    else
      problems.push({
        code: 'name-not-utf8',
        path: dir === '' ? raw.toString('utf8') : `${dir}/${raw.toString('utf8')}`,
      });
  }
  return decoded.sort();
}

/**
 * Names of one file inside the bag are harmless; a name outside it lets whoever holds it change
 * the stored bytes behind the repository's back (storage is a rename, not a copy).
 */
function hardLinksOutside(
  linked: ReadonlyMap<string, { nlink: number; paths: string[] }>,
  problems: BagProblemInit[],
): void {
  for (const { nlink, paths } of linked.values()) {
    const outside = nlink - paths.length;
    if (outside > 0) for (const path of paths) problems.push({ code: 'hard-link', path, outside });
  }
}

/**
 * Walk the bag rooted at `root` (which the caller has checked is a directory). Problems here:
 * `symlink`, `special-file`, `hard-link`, `name-not-utf8`, `non-portable-name`, `unsafe-path`,
 * `file-unreadable` (a directory that cannot be listed).
 */
export async function scanBag(root: string, signal?: AbortSignal): Promise<BagScan> {
  const files: ScannedFile[] = [];
  const directories: string[] = [];
  const others = new Set<string>();
  const unreachable: string[] = [];
  const problems: BagProblemInit[] = [];
  const pending: string[] = [''];
  // Files with more than one name, by inode: the names found in the bag and the link count.
  const linked = new Map<string, { nlink: number; paths: string[] }>();

  while (pending.length > 0) {
    signal?.throwIfAborted();
    const dir = pending.pop()!;
    // A path refused for a folder's name is reported once, for the folder, not for all inside it.
    const dirRefused = dir !== '' && unsafePathReason(dir) !== undefined;
    let names: Buffer[];
    try {
      // Names as bytes: a name that is not UTF-8 would otherwise be silently mangled.
      names = await readdir(join(root, dir), { encoding: 'buffer' });
    } catch (err) {
      if (dir === '')
        return { files, others, directories, unreachable, rootUnreadable: errorCode(err), problems };
      unreachable.push(dir);
      problems.push(unreachableProblem(dir, err));
      continue;
    }
    const decoded = utf8Names(dir, names, problems);
    const stats = new Array<Stats | Error>(decoded.length);
    await lstatEach(
      decoded.length,
      (i) => under(root, dir === '' ? decoded[i]! : `${dir}/${decoded[i]!}`),
      (i, st) => (stats[i] = st),
      signal,
    );
    decoded.forEach((name, i) => {
      const rel = dir === '' ? name : `${dir}/${name}`;
      const st = stats[i]!;
      if (st instanceof Error) {
        others.add(rel);
        unreachable.push(rel);
        problems.push(unreachableProblem(rel, st));
        return;
      }
      // The rule manifest paths follow holds for every path in the bag (storage reads by it too).
      const unsafe = dirRefused ? undefined : unsafePathReason(rel);
      const portability = nonPortableNameReason(name);
      if (unsafe !== undefined) problems.push({ code: 'unsafe-path', path: rel, reason: unsafe });
      else if (portability !== undefined)
        problems.push({ code: 'non-portable-name', path: rel, reason: portability });
      if (!st.isDirectory() && !st.isFile()) others.add(rel);
      if (st.isSymbolicLink()) problems.push({ code: 'symlink', path: rel });
      else if (st.isDirectory()) {
        directories.push(rel);
        pending.push(rel);
      } else if (st.isFile()) {
        files.push({
          path: flatString(rel),
          size: st.size,
          ino: st.ino,
          mtimeMs: st.mtimeMs,
          ctimeMs: st.ctimeMs,
        });
        if (st.nlink > 1) {
          const key = `${st.dev}:${st.ino}`;
          const group = linked.get(key);
          if (group === undefined) linked.set(key, { nlink: st.nlink, paths: [rel] });
          else group.paths.push(rel);
        }
      } else problems.push({ code: 'special-file', path: rel, kind: specialKind(st) });
    });
  }
  hardLinksOutside(linked, problems);
  const byPath = (a: { path: string }, b: { path: string }): number =>
    a.path < b.path ? -1 : a.path > b.path ? 1 : 0;
  files.sort(byPath);
  directories.sort();
  unreachable.sort();
  problems.push(...findEmptyFolders(files, others, directories, unreachable));
  return { files, others, directories, unreachable, problems };
}

/**
 * One `empty-folder` warning per folder that holds no file at any depth (the outermost such
 * folder only): no manifest can list it, and it is not stored, since an OCFL object's content
 * holds files only (E024; storage/assembly.ts drops it). A folder not looked into is not empty.
 */
function findEmptyFolders(
  files: readonly ScannedFile[],
  others: ReadonlySet<string>,
  directories: readonly string[],
  unreachable: readonly string[],
): BagProblemInit[] {
  const holding = new Set<string>(unreachable);
  const mark = (path: string): void => {
    for (let at = path.lastIndexOf('/'); at > 0; at = path.lastIndexOf('/', at - 1)) {
      const folder = path.slice(0, at);
      if (holding.has(folder)) return; // and every folder above it
      holding.add(folder);
    }
  };
  for (const file of files) mark(file.path);
  for (const path of others) mark(path);
  for (const path of unreachable) mark(path);
  return directories
    .filter((folder) => {
      if (holding.has(folder)) return false;
      const at = folder.lastIndexOf('/');
      return at < 0 || holding.has(folder.slice(0, at));
    })
    .map((path) => ({ code: 'empty-folder', path }));
}

/**
 * The files among `files` that are no longer as the scan saw them (written to, replaced or
 * gone since), sorted by path.
 */
export async function filesChangedSinceScan(
  root: string,
  files: readonly ScannedFile[],
  signal?: AbortSignal,
): Promise<string[]> {
  const changed: string[] = [];
  signal?.throwIfAborted();
  await lstatEach(
    files.length,
    (i) => under(root, files[i]!.path),
    (i, st) => {
      if (st instanceof Error || !sameStamp(files[i]!, st)) changed.push(files[i]!.path);
    },
    signal,
  );
  return changed.sort();
}

/** Files and folders that desktop systems leave behind (compared case-insensitively). */
const SYSTEM_NAMES = new Set([
  '.ds_store',
  'thumbs.db',
  'ehthumbs.db',
  'desktop.ini',
  '.spotlight-v100',
  '.trashes',
  '.fseventsd',
  '.temporaryitems',
  '__macosx',
  'icon\r',
]);

function isSystemName(name: string): boolean {
  return name.startsWith('._') || SYSTEM_NAMES.has(name.toLowerCase());
}

/**
 * One `system-file` warning per operating-system file or folder among `paths` (for a folder such
 * as `__MACOSX`, the folder is named once rather than every file in it). Warnings, not errors:
 * the bytes are listed and verified like any others, and whether they belong is the depositor's
 * call; the warning tells them.
 */
export function findSystemFiles(paths: Iterable<string>): BagProblemInit[] {
  const found = new Set<string>();
  for (const path of paths) {
    const segments = path.split('/');
    const at = segments.findIndex(isSystemName);
    if (at >= 0) found.add(segments.slice(0, at + 1).join('/'));
  }
  return [...found].sort().map((path) => ({ code: 'system-file', path }));
}

/**
 * Names that are different byte strings but the same name to macOS (Unicode normalization) or to
 * Windows and macOS (letter case). Each group is reported once per extra spelling, against the
 * first spelling in sorted order. Normalization is checked first; case is then compared between
 * spellings that still differ after NFC, so one pair never gives two warnings. `paths` may hold
 * a name twice; it counts once.
 *
 * Almost no name collides with another, so a group is one string until it gets a second
 * spelling: a bag of many files costs one map entry per name, and only groups are sorted.
 */
export function findNameCollisions(paths: Iterable<string>): BagProblemInit[] {
  const byNfc = groupBy(paths, (path) => path.normalize('NFC'));
  const problems: BagProblemInit[] = [];
  for (const [, group] of sortedGroups(byNfc)) {
    const spellings = [...group].sort();
    for (const other of spellings.slice(1))
      problems.push({ code: 'normalization-collision', path: other, other: spellings[0]! });
  }
  // Case groups in the order of their first name's NFC form, as the names are sorted.
  const byCase = groupBy(firstSpellings(byNfc), (spelling) => spelling.normalize('NFC').toLowerCase());
  const caseGroups = [...byCase.values()]
    .filter((group): group is Set<string> => typeof group !== 'string')
    .map((group) => [...group].sort())
    .map((spellings) => ({ spellings, order: spellings.map((s) => s.normalize('NFC')).sort()[0]! }))
    .sort((a, b) => compareStrings(a.order, b.order));
  for (const { spellings } of caseGroups) {
    for (const other of spellings.slice(1))
      problems.push({ code: 'case-collision', path: other, other: spellings[0]! });
  }
  return problems;
}

const compareStrings = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** Names by a key; a key with one name keeps the bare string, one with more a set of them. */
function groupBy(
  names: Iterable<string>,
  keyOf: (name: string) => string,
): Map<string, string | Set<string>> {
  const groups = new Map<string, string | Set<string>>();
  for (const name of names) {
    const key = keyOf(name);
    const group = groups.get(key);
    if (group === undefined) groups.set(key, name);
    else if (typeof group === 'string') {
      if (group !== name) groups.set(key, new Set([group, name]));
    } else group.add(name);
  }
  return groups;
}

/** Each group's first name in sorted order. */
function* firstSpellings(groups: Map<string, string | Set<string>>): Generator<string> {
  for (const group of groups.values()) yield typeof group === 'string' ? group : [...group].sort()[0]!;
}

/** The groups of more than one name, sorted by key. */
function sortedGroups(groups: Map<string, string | Set<string>>): Array<[string, Set<string>]> {
  const found: Array<[string, Set<string>]> = [];
  for (const [key, group] of groups) if (typeof group !== 'string') found.push([key, group]);
  return found.sort(([a], [b]) => compareStrings(a, b));
}
