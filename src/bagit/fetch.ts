/**
 * fetch.txt (RFC 8493 §2.2.3): `<url> <length> <path>` lines naming payload files to be fetched
 * from elsewhere. This validator never fetches; it reads the lines so that a listed file that is
 * absent is reported as a hole, and so that a path that would land outside the bag is refused
 * like any manifest path.
 */
import { decodeBagPath, isPayloadPath, unsafePathReason } from './paths.js';
import type { BagProblemInit } from './problems.js';
import { splitLines } from './tagfile.js';

export interface FetchEntry {
  url: string;
  /** Octets, or undefined for `-` (unknown). */
  length?: number;
  /** Decoded bag path. */
  path: string;
  line: number;
}

export const FETCH_FILE = 'fetch.txt';

/**
 * Parse fetch.txt. The path is the rest of the line after the second field, so names with spaces
 * work (the suite's holey bags have `data/test 1.txt`).
 */
export function parseFetch(
  text: string,
  opts: { decodePercent: boolean },
): { entries: FetchEntry[]; problems: BagProblemInit[] } {
  const entries: FetchEntry[] = [];
  const problems: BagProblemInit[] = [];
  splitLines(text).forEach((line, i) => {
    const lineNo = i + 1;
    if (line.trim() === '') return;
    const m = /^[ \t]*([^ \t]+)[ \t]+([^ \t]+)[ \t]+(.*?)[ \t]*$/.exec(line);
    if (!m || m[3] === '') {
      problems.push({ code: 'fetch-line-malformed', path: FETCH_FILE, line: lineNo, fault: 'fields' });
      return;
    }
    const [, url, lengthField, rawPath] = m as unknown as [string, string, string, string];
    let wellFormed = true;
    if (!URL.canParse(url)) {
      problems.push({ code: 'fetch-line-malformed', path: FETCH_FILE, line: lineNo, fault: 'url' });
      wellFormed = false;
    }
    if (lengthField !== '-' && !/^\d+$/.test(lengthField)) {
      problems.push({ code: 'fetch-line-malformed', path: FETCH_FILE, line: lineNo, fault: 'length' });
      wellFormed = false;
    }
    const path = decodeBagPath(rawPath, opts.decodePercent);
    const unsafe = unsafePathReason(path);
    if (unsafe !== undefined) {
      problems.push({ code: 'unsafe-path', path, listedIn: FETCH_FILE, line: lineNo, reason: unsafe });
      return;
    }
    if (!isPayloadPath(path)) {
      problems.push({ code: 'payload-entry-outside-data', path, listedIn: FETCH_FILE, line: lineNo });
      return;
    }
    if (!wellFormed) return;
    const entry: FetchEntry = { url, path, line: lineNo };
    if (lengthField !== '-') entry.length = Number(lengthField);
    entries.push(entry);
  });
  return { entries, problems };
}
