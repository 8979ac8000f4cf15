/**
 * The bag as every validation step sees it: its folder, what the scan found, the index of its
 * files, and (once bagit.txt is read) the rules of its version and the encoding of its tag files.
 * Built once by `validateBag`; the steps read it and never change it. Also the one way a step
 * reads a root tag file. Reads the disk, never writes it.
 */
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { errorCode } from '../fs/errors.js';
import { readFailure } from './hash-files.js';
import { makeProblem, type BagProblem } from './problems.js';
import { scanBag, type BagScan } from './scan.js';
import { decodeTagBytes, startsWithUtf8Bom } from './tagfile.js';
import type { VersionRules } from './version-rules.js';

/** The bag as scanned, before bagit.txt is read. */
export interface ScannedBag {
  /** Absolute: hashers take absolute paths only. */
  dir: string;
  scan: BagScan;
  /** Each file's index in scan.files (`has`: is this path a regular file of the bag). */
  fileIndex: Map<string, number>;
  directories: Set<string>;
  signal: AbortSignal | undefined;
}

/** The bag with the rules bagit.txt decides. */
export interface BagContext extends ScannedBag {
  rules: VersionRules;
  /** What tag files are read as: bagit.txt's encoding, or UTF-8 when that one cannot be read. */
  tagEncoding: string;
}

/** What a step read, and the problems reading it found. */
export interface Read<T> {
  value: T | undefined;
  problems: BagProblem[];
}

/** Scan the folder `dir` (absolute); `unreadable` when it is no readable folder, and nothing else is known. */
export async function openBag(
  dir: string,
  signal: AbortSignal | undefined,
): Promise<ScannedBag | { unreadable: string }> {
  try {
    if (!(await stat(dir)).isDirectory()) return { unreadable: 'not a directory' };
  } catch (err) {
    return { unreadable: errorCode(err) };
  }
  const scan = await scanBag(dir, signal);
  // Nothing else is known: no follow-on "bagit.txt missing".
  if (scan.rootUnreadable !== undefined) return { unreadable: scan.rootUnreadable };
  const fileIndex = new Map<string, number>();
  scan.files.forEach((f, i) => fileIndex.set(f.path, i));
  return { dir, scan, fileIndex, directories: new Set(scan.directories), signal };
}

/** Whether anything (file, folder, link, device) is at `path`. */
export function existsInBag(bag: ScannedBag, path: string): boolean {
  return bag.fileIndex.has(path) || bag.directories.has(path) || bag.scan.others.has(path);
}

/** Under a path the scan could not look into: whether it is there is unknown, and was reported. */
export function unreachable(bag: ScannedBag, path: string): boolean {
  return bag.scan.unreachable.some((u) => path === u || path.startsWith(`${u}/`));
}

/** A root tag file we are about to parse; only regular files, never through a link. */
export async function readTagBytes(bag: ScannedBag, path: string): Promise<Read<Buffer>> {
  try {
    return { value: await readFile(join(bag.dir, path)), problems: [] };
  } catch (err) {
    return {
      value: undefined,
      problems: [makeProblem({ code: 'file-unreadable', path, detail: readFailure(err) })],
    };
  }
}

/** A tag file as text in the bag's tag encoding, without a byte-order mark. */
export async function readTagText(bag: BagContext, path: string): Promise<Read<string>> {
  const read = await readTagBytes(bag, path);
  const bytes = read.value;
  if (bytes === undefined) return { value: undefined, problems: read.problems };
  const decoded = decodeTagBytes(bytes, bag.tagEncoding);
  if (!decoded.ok)
    return {
      value: undefined,
      problems: [makeProblem({ code: 'tag-file-undecodable', path, encoding: bag.tagEncoding })],
    };
  // The decoder may drop a byte-order mark itself: look at the bytes. (In UTF-16 the mark says
  // which byte order the file uses, and belongs there.)
  const problems =
    /^utf-?8$/i.test(bag.tagEncoding) && startsWithUtf8Bom(bytes)
      ? [makeProblem({ code: 'tag-file-bom', path })]
      : [];
  return { value: decoded.text.startsWith('\ufeff') ? decoded.text.slice(1) : decoded.text, problems };
}
