/**
 * What an audit can find wrong with a stored package or one of its copies: a typed value per
 * code, carrying exactly what its sentence needs, and their table (`defineProblems`): the
 * sentence of each code. Every finding fails the package's check. Nothing here reads the disk.
 */
import type { Algorithm, EntryKind } from '../fixity/index.js';
import { defineProblems } from '../problems.js';

/** A finding about one copy of the package, whichever copy it is. */
type FindingOnCopy =
  /** The package folder is gone; `kind`: what stands in its place, if anything does. */
  | { code: 'package-missing'; kind?: EntryKind }
  /** The package folder exists but could not be listed; `reason`: the error code. */
  | { code: 'package-unreadable'; reason: string }
  /** The package is no longer stored according to the catalog. */
  | { code: 'package-not-in-catalog' }
  | { code: 'file-missing'; path: string }
  /** Same size, different content; `actual` is empty when the hasher returned no such digest. */
  | { code: 'file-changed'; path: string; algorithm: Algorithm; expected: string; actual: string }
  /** `expected` and `actual` are sizes in bytes (decimal). */
  | { code: 'size-changed'; path: string; expected: string; actual: string }
  /** Could not be read; `reason` is the error code (EACCES, EIO, ...). */
  | { code: 'file-unreadable'; path: string; reason: string }
  /** A recorded file is now a symbolic link, folder or special file. */
  | { code: 'file-not-regular'; path: string; kind: EntryKind }
  /** On disk but not in the catalog. */
  | { code: 'file-extra'; path: string; kind: EntryKind }
  /** The catalog holds no digest for the file, so only its size was checked. */
  | { code: 'digest-not-recorded'; path: string }
  /** A replica could not be read at all (down, refusing). */
  | { code: 'replica-unreachable'; reason: string }
  /** The package's OCFL object is not valid OCFL: each error's code (E0xx) and path in the object. */
  | { code: 'object-invalid'; problems: Array<{ code: string; path: string }> }
  /** The object's inventory and the catalog disagree about a file (its digest, or whether it is there). */
  | { code: 'inventory-differs'; path: string; reason: string }
  /** A deaccessioned package's object found on a copy whose removal was done (audit/tombstones.ts). */
  | { code: 'deaccessioned-content-left' };

/**
 * `copy`: the replica whose copy the finding is about; absent for the primary copy in storage/.
 * Paths are relative to the bag root, as in the catalog; findings about the whole package have none.
 */
export type Finding = FindingOnCopy & { copy?: string };

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

/** OCFL errors an `object-invalid` sentence names; the rest are counted. */
const OCFL_ERRORS_NAMED = 10;

/** Each code's sentence; never a server path. All are errors. */
const FINDINGS = defineProblems<FindingOnCopy>({
  'package-missing': {
    describe: (f) =>
      f.kind === undefined
        ? 'the package folder is missing'
        : `the package folder is missing: a ${KIND_NOUN[f.kind]} stands in its place`,
  },
  'package-unreadable': { describe: (f) => `the package folder could not be read (${f.reason})` },
  'package-not-in-catalog': { describe: () => 'the package is no longer recorded as stored in the catalog' },
  'file-missing': { describe: (f) => `${f.path}: missing` },
  'file-changed': {
    describe: (f) => `${f.path}: ${f.algorithm} changed: expected ${f.expected}, found ${f.actual || '?'}`,
  },
  'size-changed': {
    describe: (f) => `${f.path}: size changed: expected ${f.expected} bytes, found ${f.actual}`,
  },
  'file-unreadable': { describe: (f) => `${f.path}: could not be read (${f.reason})` },
  'file-not-regular': { describe: (f) => `${f.path}: is now a ${KIND_NOUN[f.kind]}, not a regular file` },
  'file-extra': { describe: (f) => `${f.path}: extra ${KIND_NOUN[f.kind]} not in the catalog` },
  'digest-not-recorded': {
    describe: (f) => `${f.path}: no digest recorded in the catalog; only its size was checked`,
  },
  'replica-unreachable': { describe: (f) => `could not be read (${f.reason})` },
  'object-invalid': {
    describe: (f) =>
      `the object is not valid OCFL: ${f.problems
        .slice(0, OCFL_ERRORS_NAMED)
        .map((p) => `${p.code} ${p.path === '' ? 'the object root' : p.path}`)
        .join(
          ', ',
        )}${f.problems.length > OCFL_ERRORS_NAMED ? ` and ${f.problems.length - OCFL_ERRORS_NAMED} more` : ''}`,
  },
  'inventory-differs': { describe: (f) => `${f.path}: the inventory differs from the catalog: ${f.reason}` },
  'deaccessioned-content-left': {
    describe: () =>
      'the package was deaccessioned, but content of its object is still here; removing it again',
  },
});

/** Every finding an audit can report, with its severity (for documentation and tests). */
export const FINDING_CODES = FINDINGS.CODES;

/** One finding as a sentence for people. A finding about a replica's copy starts with `replica <name>: `. */
export function describeFinding(f: Finding): string {
  return f.copy === undefined ? FINDINGS.describe(f) : `replica ${f.copy}: ${FINDINGS.describe(f)}`;
}

/** The detail of a failed fixity check event: one line per finding. */
export function findingsDetail(findings: readonly Finding[]): string {
  return findings.map(describeFinding).join('\n');
}

/** Findings about the whole package first, then by path. */
export function byPackageThenPath(a: Finding, b: Finding): number {
  const pa = 'path' in a ? a.path : '';
  const pb = 'path' in b ? b.path : '';
  return pa < pb ? -1 : pa > pb ? 1 : 0;
}
