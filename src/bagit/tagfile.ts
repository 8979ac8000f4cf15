/**
 * Tag files: turning their bytes into text in the encoding bagit.txt declares, and reading
 * `Label: value` entries with indented continuation lines (bag-info.txt, package-info.txt,
 * chipmunk-info.txt). bagit.txt itself has its own strict reader, because RFC 8493 fixes its
 * exact shape and a lenient reader would accept bags other tools reject.
 */
import type { BagitTxtFault, BagProblemInit } from './problems.js';

export interface TagEntry {
  label: string;
  value: string;
  /** 1-based line where the entry starts. */
  line: number;
}

/** BagIt versions this validator knows the rules of. */
export const SUPPORTED_VERSIONS: readonly string[] = ['0.93', '0.94', '0.95', '0.96', '0.97', '1.0'];

/** Compare two `M.N` versions numerically; NaN-safe callers pass only syntactically valid ones. */
export function compareVersions(a: string, b: string): number {
  const [aMajor = 0, aMinor = 0] = a.split('.').map(Number);
  const [bMajor = 0, bMinor = 0] = b.split('.').map(Number);
  return aMajor !== bMajor ? aMajor - bMajor : aMinor - bMinor;
}

/** Line breaks may be CR, LF or CRLF (RFC 8493 §2.1). */
export function splitLines(text: string): string[] {
  const lines = text.split(/\r\n|\r|\n/);
  // A final line break ends the last line; it does not start an empty one.
  if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  return lines;
}

/** The lines of `text` one at a time, as `splitLines` gives them, without an array of them all. */
export function* linesOf(text: string): Generator<string> {
  const n = text.length;
  let at = 0;
  while (at < n) {
    let end = at;
    for (let c = text.charCodeAt(end); end < n && c !== 10 && c !== 13; c = text.charCodeAt(++end));
    yield text.slice(at, end);
    if (text.charCodeAt(end) === 13 && text.charCodeAt(end + 1) === 10) end++;
    at = end + 1;
  }
}

export type DecodeResult = { ok: true; text: string } | { ok: false; fault: 'unsupported' | 'undecodable' };

/**
 * Decode a tag file. A byte-order mark is dropped (and for UTF-16 it decides the byte order;
 * without one, RFC 2781 says big-endian). ISO-8859-1 is decoded byte for byte, not as the
 * windows-1252 superset that the WHATWG `TextDecoder` label maps it to.
 */
export function decodeTagBytes(bytes: Uint8Array, encoding: string): DecodeResult {
  const name = encoding.trim().toLowerCase().replace(/_/g, '-');
  try {
    switch (name) {
      case 'utf-8':
      case 'utf8':
      case 'us-ascii':
      case 'ascii':
        return { ok: true, text: new TextDecoder('utf-8', { fatal: true }).decode(bytes) };
      case 'iso-8859-1':
      case 'iso8859-1':
      case 'latin1':
      case 'latin-1':
      case 'l1':
        return {
          ok: true,
          text: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1'),
        };
      case 'utf-16':
      case 'utf16': {
        const littleEndian = bytes.length >= 2 && bytes[0] === 0xff && bytes[1] === 0xfe;
        return {
          ok: true,
          text: new TextDecoder(littleEndian ? 'utf-16le' : 'utf-16be', { fatal: true }).decode(bytes),
        };
      }
      default: {
        let decoder: TextDecoder;
        try {
          decoder = new TextDecoder(name, { fatal: true });
        } catch {
          return { ok: false, fault: 'unsupported' };
        }
        return { ok: true, text: decoder.decode(bytes) };
      }
    }
  } catch {
    return { ok: false, fault: 'undecodable' };
  }
}

/** True when the encoding name is one `decodeTagBytes` can read. */
function isSupportedEncoding(encoding: string): boolean {
  const probe = decodeTagBytes(new Uint8Array(0), encoding);
  return probe.ok || probe.fault !== 'unsupported';
}

/**
 * Read `Label: value` entries, lenient as RFC 8493 §2.2.2 and the 0.97 suite allow: whitespace
 * around the colon is trimmed, labels may repeat (kept in order, as written), blank lines are
 * skipped, and a line starting with whitespace continues the previous value (joined with one
 * space). Lines that are none of these are returned as malformed; lines whose colon is not
 * followed by whitespace are listed too (BagIt 1.0 writes `Label: value`).
 */
export function parseTagText(text: string): {
  entries: TagEntry[];
  malformedLines: number[];
  noSpaceLines: number[];
} {
  const entries: TagEntry[] = [];
  const malformedLines: number[] = [];
  const noSpaceLines: number[] = [];
  const lines = splitLines(text);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const lineNo = i + 1;
    if (line.trim() === '') continue;
    if (/^[ \t]/.test(line)) {
      const last = entries[entries.length - 1];
      if (last === undefined) malformedLines.push(lineNo);
      else last.value = last.value === '' ? line.trim() : `${last.value} ${line.trim()}`;
      continue;
    }
    const colon = line.indexOf(':');
    const label = colon < 0 ? '' : line.slice(0, colon).trim();
    if (label === '') {
      malformedLines.push(lineNo);
      continue;
    }
    const rest = line.slice(colon + 1);
    if (rest !== '' && !/^[ \t]/.test(rest)) noSpaceLines.push(lineNo);
    entries.push({ label, value: rest.trim(), line: lineNo });
  }
  return { entries, malformedLines, noSpaceLines };
}

/** The first value of a label, compared case-insensitively (labels are case-insensitive in use). */
export function tagValue(entries: readonly TagEntry[], label: string): string | undefined {
  const wanted = label.toLowerCase();
  return entries.find((e) => e.label.toLowerCase() === wanted)?.value;
}

export interface BagDeclaration {
  /** As written (trailing whitespace trimmed), even when it is not a valid version. */
  version?: string;
  encoding?: string;
  problems: BagProblemInit[];
}

const VERSION_LABEL = 'BagIt-Version';
const ENCODING_LABEL = 'Tag-File-Character-Encoding';

/**
 * Read bagit.txt strictly (RFC 8493 §2.1.1): UTF-8 without a byte-order mark, exactly the two
 * lines `BagIt-Version: M.N` and `Tag-File-Character-Encoding: ENC` in that order, one space after
 * the colon, none before. Trailing whitespace after a value is tolerated (the 1.0 suite's own
 * bags have it). Every fault is reported, and the values are still returned when they can be
 * read, so the rest of the bag is checked under the rules of the version it claims.
 */
/** Whether bytes start with UTF-8's byte-order mark (EF BB BF). */
export function startsWithUtf8Bom(bytes: Uint8Array): boolean {
  return bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf;
}

export function parseBagDeclaration(bytes: Uint8Array): BagDeclaration {
  const problems: BagProblemInit[] = [];
  const fault = (f: BagitTxtFault, line?: number): void => {
    problems.push(
      line === undefined
        ? { code: 'bagit-txt-malformed', path: 'bagit.txt', fault: f }
        : { code: 'bagit-txt-malformed', path: 'bagit.txt', line, fault: f },
    );
  };
  let body = bytes;
  if (startsWithUtf8Bom(body)) {
    problems.push({ code: 'bagit-txt-bom', path: 'bagit.txt' });
    body = body.subarray(3);
  } else if (
    body.length >= 2 &&
    ((body[0] === 0xfe && body[1] === 0xff) || (body[0] === 0xff && body[1] === 0xfe))
  ) {
    // A UTF-16 bagit.txt: not UTF-8, so nothing more can be read from it.
    problems.push({ code: 'bagit-txt-bom', path: 'bagit.txt' });
    return { problems };
  }
  const decoded = decodeTagBytes(body, 'utf-8');
  if (!decoded.ok) {
    problems.push({ code: 'tag-file-undecodable', path: 'bagit.txt', encoding: 'UTF-8' });
    return { problems };
  }
  const lines = splitLines(decoded.text);
  while (lines.length > 0 && lines[lines.length - 1]!.trim() === '') lines.pop();

  let version: string | undefined;
  let encoding: string | undefined;
  let versionLine: number | undefined;
  let encodingLine: number | undefined;
  lines.forEach((line, i) => {
    const lineNo = i + 1;
    const colon = line.indexOf(':');
    if (colon < 0) {
      fault('no-colon', lineNo);
      return;
    }
    const rawLabel = line.slice(0, colon);
    const label = rawLabel.trim();
    const after = line.slice(colon + 1);
    const value = after.trim();
    const known = label === VERSION_LABEL || label === ENCODING_LABEL;
    if (
      !known ||
      rawLabel.trimStart() !== rawLabel ||
      (label === VERSION_LABEL ? versionLine : encodingLine) !== undefined
    ) {
      fault('unexpected-line', lineNo);
      return;
    }
    if (rawLabel !== label) fault('space-before-colon', lineNo);
    else if (value !== '' && !/^ \S/.test(after)) fault('no-space-after-colon', lineNo);
    if (label === VERSION_LABEL) {
      version = value;
      versionLine = lineNo;
    } else {
      encoding = value;
      encodingLine = lineNo;
    }
  });
  if (versionLine === undefined) fault('missing-version');
  if (encodingLine === undefined) fault('missing-encoding');
  if (versionLine !== undefined && encodingLine !== undefined && versionLine > encodingLine)
    fault('wrong-order');

  if (version !== undefined) {
    if (!/^\d+\.\d+$/.test(version))
      problems.push({ code: 'bagit-version-invalid', path: 'bagit.txt', version });
    else if (!SUPPORTED_VERSIONS.some((v) => compareVersions(v, version!) === 0)) {
      problems.push({ code: 'bagit-version-unsupported', path: 'bagit.txt', version });
    }
  }
  if (encoding !== undefined && !isSupportedEncoding(encoding)) {
    problems.push({ code: 'tag-encoding-unsupported', path: 'bagit.txt', encoding });
  }
  const result: BagDeclaration = { problems };
  if (version !== undefined) result.version = version;
  if (encoding !== undefined) result.encoding = encoding;
  return result;
}
