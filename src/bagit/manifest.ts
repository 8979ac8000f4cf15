/**
 * Payload and tag manifests (`manifest-ALG.txt`, `tagmanifest-ALG.txt`): naming, and reading
 * their `<digest> <path>` lines into entries keyed by bag path. Every path is decoded, checked to
 * stay inside the bag and in the manifest's scope (payload or tag) before it becomes an entry;
 * lines that fail are reported, never used.
 */
import { ALGORITHMS, DIGEST_LENGTH, type Algorithm } from '../fixity/index.js';
import { decodeBagPath, isPayloadPath, unsafePathReason } from './paths.js';
import type { BagProblemInit } from './problems.js';
import { splitLines } from './tagfile.js';

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
  const algorithm = (ALGORITHMS as readonly string[]).includes(algorithmName) ? (algorithmName as Algorithm) : undefined;
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
  const entries = new Map<string, ManifestEntry>();
  const problems: BagProblemInit[] = [];
  const { fileName } = opts;
  let binaryMarkers = 0;
  let firstBinaryLine = 0;
  let dotSlashes = 0;
  let firstDotSlashLine = 0;

  splitLines(text).forEach((line, i) => {
    const lineNo = i + 1;
    if (line.trim() === '') return;
    const m = /^[ \t]*([^ \t]+)[ \t]+(.*)$/.exec(line);
    if (!m || m[2] === '') {
      problems.push({ code: 'manifest-line-malformed', path: fileName, line: lineNo, fault: 'no-path' });
      return;
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
      return;
    }
    if (opts.kind === 'payload' && !isPayloadPath(path)) {
      problems.push({ code: 'payload-entry-outside-data', path, listedIn: fileName, line: lineNo });
      return;
    }
    if (opts.kind === 'tag' && isPayloadPath(path)) {
      problems.push({ code: 'tag-entry-inside-data', path, listedIn: fileName, line: lineNo });
      return;
    }
    if (barePercent) problems.push({ code: 'manifest-path-percent', path, listedIn: fileName, line: lineNo });
    if (/[ \t]$/.test(path)) problems.push({ code: 'path-ends-in-whitespace', path, listedIn: fileName, line: lineNo });
    const digestWellFormed = digest.length === DIGEST_LENGTH[opts.algorithm] && /^[0-9a-f]+$/.test(digest);
    if (!digestWellFormed) problems.push({ code: 'manifest-line-malformed', path: fileName, line: lineNo, fault: 'digest' });

    const earlier = entries.get(path);
    if (earlier === undefined) {
      entries.set(path, { path, digest, line: lineNo, digestWellFormed, conflictingDigests: [] });
    } else if (earlier.digest === digest) {
      problems.push({ code: 'manifest-duplicate', path, listedIn: fileName, line: lineNo });
    } else {
      problems.push({ code: 'manifest-duplicate-conflict', path, listedIn: fileName, line: lineNo, expected: earlier.digest, actual: digest });
      if (digestWellFormed) earlier.conflictingDigests.push(digest);
    }
  });

  if (binaryMarkers > 0) problems.push({ code: 'manifest-binary-marker', path: fileName, line: firstBinaryLine, count: binaryMarkers });
  if (dotSlashes > 0) problems.push({ code: 'manifest-dot-slash', path: fileName, line: firstDotSlashLine, count: dotSlashes });
  return { entries, problems };
}
