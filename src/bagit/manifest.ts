/**
 * Payload and tag manifests (`manifest-ALG.txt`, `tagmanifest-ALG.txt`): naming, and reading
 * their `<digest> <path>` lines into entries keyed by bag path. Every path is decoded, checked to
 * stay inside the bag and in the manifest's scope (payload or tag) before it becomes an entry;
 * lines that fail are reported, never used.
 */
import { ALGORITHMS, DIGEST_LENGTH, type Algorithm } from '../fixity/index.js';
import { decodeBagPath, isPayloadPath, unsafePathReason } from './paths.js';
import type { BagProblemInit } from './problems.js';
import { linesOf } from './tagfile.js';

export type ManifestKind = 'payload' | 'tag';

export interface ManifestName {
  kind: ManifestKind;
  /** As written in the file name, lower-case or not. */
  algorithmName: string;
  /** Set when the algorithm is one we can compute. */
  algorithm?: Algorithm;
}

/** Recognise a manifest by its file name at the bag root; undefined for any other file. */
export function parseManifestFileName(name: string): ManifestName | undefined {
  const m = /^(tag)?manifest-(.+)\.txt$/.exec(name);
  if (!m) return undefined;
  const algorithmName = m[2]!;
  const kind: ManifestKind = m[1] ? 'tag' : 'payload';
  const algorithm = (ALGORITHMS as readonly string[]).includes(algorithmName)
    ? (algorithmName as Algorithm)
    : undefined;
  return algorithm === undefined ? { kind, algorithmName } : { kind, algorithmName, algorithm };
}

export interface ManifestEntry {
  /** Decoded bag path, '/' separated. */
  path: string;
  /** Lower-case hex. */
  digest: string;
  line: number;
  /** False when the digest is not hex of the algorithm's length: reported once, not compared. */
  digestWellFormed: boolean;
  /** Further, different digests the same manifest gives for this path (a conflict, reported). */
  conflictingDigests: string[];
}

export interface ParsedManifest {
  entries: Map<string, ManifestEntry>;
  problems: BagProblemInit[];
}

/**
 * Where a manifest's entries go as they are read: a Map (`parseManifest`), or a table that holds
 * a large payload manifest compactly (`compact-manifest.ts`).
 */
export interface ManifestTable {
  /** The digest this manifest gave first for `path`, when it listed the path before. */
  digestOf(path: string): string | undefined;
  add(entry: Omit<ManifestEntry, 'conflictingDigests'>): void;
  /** A further, different, well-formed digest for a path already listed. */
  addConflict(path: string, digest: string): void;
}

/** The table of `parseManifest`: entries by path, in the order first listed. */
class EntryMap implements ManifestTable {
  readonly entries = new Map<string, ManifestEntry>();

  digestOf(path: string): string | undefined {
    return this.entries.get(path)?.digest;
  }

  add(entry: Omit<ManifestEntry, 'conflictingDigests'>): void {
    this.entries.set(entry.path, { ...entry, conflictingDigests: [] });
  }

  addConflict(path: string, digest: string): void {
    this.entries.get(path)?.conflictingDigests.push(digest);
  }
}

export interface ManifestOptions {
  /** File name of the manifest at the bag root, e.g. `manifest-sha256.txt`. */
  fileName: string;
  kind: ManifestKind;
  algorithm: Algorithm;
  /** Decode `%25` too (BagIt 1.0 and later). */
  decodePercent: boolean;
}

/**
 * Parse a manifest's text. Tolerated with a warning, as bagit-python and bagit-java do: md5sum's
 * `*` binary-mode marker before a path and a leading `./`. Blank lines are skipped. The path is
 * everything after the whitespace that follows the digest, exactly: trailing spaces and tabs are
 * part of it (a file may really be named so), with a warning, since sloppy writers add them.
 */
export function parseManifest(text: string, opts: ManifestOptions): ParsedManifest {
  const table = new EntryMap();
  const problems = readManifest(text, opts, table);
  return { entries: table.entries, problems };
}

/** Reads a manifest's text into `table` (see parseManifest); returns the problems found. */
export function readManifest(text: string, opts: ManifestOptions, table: ManifestTable): BagProblemInit[] {
  const problems: BagProblemInit[] = [];
  const { fileName } = opts;
  let binaryMarkers = 0;
  let firstBinaryLine = 0;
  let dotSlashes = 0;
  let firstDotSlashLine = 0;

  let lineNo = 0;
  for (const line of linesOf(text)) {
    lineNo++;
    if (line.trim() === '') continue;
    const m = /^[ \t]*([^ \t]+)[ \t]+(.*)$/.exec(line);
    if (!m || m[2] === '') {
      problems.push({ code: 'manifest-line-malformed', path: fileName, line: lineNo, fault: 'no-path' });
      continue;
    }
    const digest = m[1]!.toLowerCase();
    let raw = m[2]!;
    if (raw.startsWith('*')) {
      raw = raw.slice(1);
      if (binaryMarkers++ === 0) firstBinaryLine = lineNo;
    }
    // In 1.0 a literal % is written %25; a bare one is taken literally, with a warning.
    const barePercent = opts.decodePercent && /%(?!0A|0D|25)/i.test(raw);
    let path = decodeBagPath(raw, opts.decodePercent);
    if (path.startsWith('./')) {
      path = path.slice(2);
      if (dotSlashes++ === 0) firstDotSlashLine = lineNo;
    }
    const unsafe = unsafePathReason(path);
    if (unsafe !== undefined) {
      problems.push({ code: 'unsafe-path', path, listedIn: fileName, line: lineNo, reason: unsafe });
      continue;
    }
    if (opts.kind === 'payload' && !isPayloadPath(path)) {
      problems.push({ code: 'payload-entry-outside-data', path, listedIn: fileName, line: lineNo });
      continue;
    }
    if (opts.kind === 'tag' && isPayloadPath(path)) {
      problems.push({ code: 'tag-entry-inside-data', path, listedIn: fileName, line: lineNo });
      continue;
    }
    if (barePercent) problems.push({ code: 'manifest-path-percent', path, listedIn: fileName, line: lineNo });
    if (/[ \t]$/.test(path))
      problems.push({ code: 'path-ends-in-whitespace', path, listedIn: fileName, line: lineNo });
    const digestWellFormed = digest.length === DIGEST_LENGTH[opts.algorithm] && /^[0-9a-f]+$/.test(digest);
    if (!digestWellFormed)
      problems.push({ code: 'manifest-line-malformed', path: fileName, line: lineNo, fault: 'digest' });

    const earlier = table.digestOf(path);
    if (earlier === undefined) {
      table.add({ path, digest, line: lineNo, digestWellFormed });
    } else if (earlier === digest) {
      problems.push({ code: 'manifest-duplicate', path, listedIn: fileName, line: lineNo });
    } else {
      problems.push({
        code: 'manifest-duplicate-conflict',
        path,
        listedIn: fileName,
        line: lineNo,
        expected: earlier,
        actual: digest,
      });
      if (digestWellFormed) table.addConflict(path, digest);
    }
  }

  if (binaryMarkers > 0)
    problems.push({
      code: 'manifest-binary-marker',
      path: fileName,
      line: firstBinaryLine,
      count: binaryMarkers,
    });
  if (dotSlashes > 0)
    problems.push({ code: 'manifest-dot-slash', path: fileName, line: firstDotSlashLine, count: dotSlashes });
  return problems;
}
