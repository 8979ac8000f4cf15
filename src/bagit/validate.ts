/**
 * `validateBag`: is this directory a valid BagIt bag (RFC 8493, versions 0.93 to 1.0)? It walks
 * the bag, reads its tag files, hashes every regular file once (every algorithm at once, through
 * the caller's FileHasher) and reports every problem it finds, errors and warnings together.
 * It knows nothing of HTTP, the catalog or chipmunk, and never writes to the bag.
 */
import { readFile, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { ALGORITHMS, type Algorithm } from '../fixity/index.js';
import { errorCode } from '../fs/errors.js';
import { FETCH_FILE, parseFetch, type FetchEntry } from './fetch.js';
import { CompactManifest, type ManifestView } from './compact-manifest.js';
import { parseManifest, parseManifestFileName, readManifest, type ManifestKind } from './manifest.js';
import { DEFAULT_CONCURRENCY, hashFiles, readFailure } from './hash-files.js';
import { isPayloadPath } from './paths.js';
import { makeProblem, type BagProblem, type BagProblemInit, type Severity } from './problems.js';
import type { BagReport, ValidateOptions } from './report.js';
import { filesChangedSinceScan, findNameCollisions, findSystemFiles, scanBag } from './scan.js';
import { compareVersions, decodeTagBytes, parseBagDeclaration, parseTagText, startsWithUtf8Bom, SUPPORTED_VERSIONS, tagValue } from './tagfile.js';

/** The rules that differ between BagIt versions. */
interface VersionRules {
  /** `%25` is an escape (1.0); before, only `%0D` and `%0A` are. */
  decodePercent: boolean;
  /** The same path listed twice with the same digest: a warning before 1.0, an error from 1.0. */
  duplicateSeverity: Severity;
  /** 1.0: every payload file in every payload manifest; before, in at least one. */
  everyPayloadManifest: boolean;
  /** 0.93 to 0.95 called bag-info.txt package-info.txt. */
  packageInfo: boolean;
  /** 1.0 writes `Label: value`, one space after the colon; a line without it is a warning. */
  spaceAfterColon: boolean;
  /** RFC 8493 §2.2.1's MUSTs for tag manifests (list every payload manifest, no tag manifest): errors from 1.0. */
  tagManifestRules: Severity;
}

/**
 * A bag whose version cannot be read or is unknown is held to the current rules (1.0): the
 * strictest reading, and the one a new bag should follow anyway.
 */
function rulesFor(version: string | undefined): VersionRules {
  const known = version !== undefined && /^\d+\.\d+$/.test(version) && SUPPORTED_VERSIONS.some((v) => compareVersions(v, version) === 0);
  const effective = known ? version : '1.0';
  const atLeast10 = compareVersions(effective, '1.0') >= 0;
  return {
    decodePercent: atLeast10,
    duplicateSeverity: atLeast10 ? 'error' : 'warning',
    everyPayloadManifest: atLeast10,
    packageInfo: compareVersions(effective, '0.96') < 0,
    spaceAfterColon: atLeast10,
    tagManifestRules: atLeast10 ? 'error' : 'warning',
  };
}

interface LoadedManifest {
  fileName: string;
  kind: ManifestKind;
  algorithm: Algorithm;
  /** Tag manifests as a Map; payload manifests, which may list a great many files, compactly. */
  entries: ManifestView;
  /** The files on disk its entries name (by index): the entry's path, or the file it matched by normalization. */
  covered: Uint8Array;
}

/** Root tag files the RFC names; each must be a file, never a folder. */
function isNamedTagFile(name: string): boolean {
  return ['bagit.txt', 'bag-info.txt', 'package-info.txt', FETCH_FILE].includes(name) || parseManifestFileName(name) !== undefined;
}


/** Severity order for the report: errors first, then warnings, each in the order found. */
function errorsFirst(problems: BagProblem[]): BagProblem[] {
  return [...problems.filter((p) => p.severity === 'error'), ...problems.filter((p) => p.severity === 'warning')];
}

/**
 * Problems of one code listed one by one; beyond, one `problems-omitted` says how many more. A
 * hostile manifest of a million bogus lines would otherwise become a million-line queue item.
 */
const PROBLEMS_PER_CODE = 1000;

function limitPerCode(problems: BagProblem[]): BagProblem[] {
  const seen = new Map<string, { count: number; severity: Severity }>();
  const kept = problems.filter((p) => {
    const entry = seen.get(p.code) ?? { count: 0, severity: p.severity };
    seen.set(p.code, entry);
    if (p.severity === 'error') entry.severity = 'error';
    return ++entry.count <= PROBLEMS_PER_CODE;
  });
  for (const [code, { count, severity }] of seen) {
    if (count > PROBLEMS_PER_CODE) kept.push(makeProblem({ code: 'problems-omitted', omittedCode: code, count: count - PROBLEMS_PER_CODE }, severity));
  }
  return kept;
}

function emptyReport(problems: BagProblem[]): BagReport {
  return { valid: false, algorithms: [], problems, files: [], payloadBytes: 0, payloadFiles: 0, bagInfo: [] };
}

/** The names of several sources, one after the other (the name checks count a name once). */
function* namesOf(...sources: Array<Iterable<string>>): Generator<string> {
  for (const source of sources) yield* source;
}

export async function validateBag(bagDir: string, opts: ValidateOptions): Promise<BagReport> {
  const { hasher, signal } = opts;
  // Hashers take absolute paths only.
  const dir = resolve(bagDir);
  const found: BagProblem[] = [];
  const add = (init: BagProblemInit, severity?: Severity): void => {
    found.push(makeProblem(init, severity));
  };

  try {
    const st = await stat(dir);
    if (!st.isDirectory()) {
      add({ code: 'bag-unreadable', detail: 'not a directory' });
      return emptyReport(found);
    }
  } catch (err) {
    add({ code: 'bag-unreadable', detail: errorCode(err) });
    return emptyReport(found);
  }

  const scan = await scanBag(dir, signal);
  if (scan.rootUnreadable !== undefined) {
    // Nothing else is known: no follow-on "bagit.txt missing".
    add({ code: 'bag-unreadable', detail: scan.rootUnreadable });
    return emptyReport(found);
  }
  scan.problems.forEach((p) => add(p));
  // Each file's index in scan.files (`has`: is this path a regular file of the bag).
  const fileIndex = new Map<string, number>();
  scan.files.forEach((f, i) => fileIndex.set(f.path, i));
  const directorySet = new Set(scan.directories);
  const exists = (path: string): boolean => fileIndex.has(path) || directorySet.has(path) || scan.others.has(path);
  for (const name of scan.directories) if (!name.includes('/') && isNamedTagFile(name)) add({ code: 'not-a-file', path: name });
  /** Under a path the scan could not look into: whether it is there is unknown, and was reported. */
  const unreachable = (path: string): boolean => scan.unreachable.some((u) => path === u || path.startsWith(`${u}/`));

  /** Read a root tag file we are about to parse; only regular files, never through a link. */
  const readBytes = async (path: string): Promise<Buffer | undefined> => {
    try {
      return await readFile(join(dir, path));
    } catch (err) {
      add({ code: 'file-unreadable', path, detail: readFailure(err) });
      return undefined;
    }
  };

  // bagit.txt decides the version's rules and the encoding of every other tag file.
  let version: string | undefined;
  let encoding: string | undefined;
  if (fileIndex.has('bagit.txt')) {
    const bytes = await readBytes('bagit.txt');
    if (bytes !== undefined) {
      const declaration = parseBagDeclaration(bytes);
      declaration.problems.forEach((p) => add(p));
      version = declaration.version;
      encoding = declaration.encoding;
    }
  } else if (!exists('bagit.txt')) {
    add({ code: 'bagit-txt-missing', path: 'bagit.txt' });
  }
  const rules = rulesFor(version);
  const declaredEncoding = encoding ?? 'UTF-8';
  // An encoding we cannot read was reported already; UTF-8 is the best remaining guess.
  const readableEncoding = decodeTagBytes(new Uint8Array(0), declaredEncoding).ok ? declaredEncoding : 'UTF-8';

  const readTagText = async (path: string): Promise<string | undefined> => {
    const bytes = await readBytes(path);
    if (bytes === undefined) return undefined;
    const decoded = decodeTagBytes(bytes, readableEncoding);
    if (!decoded.ok) {
      add({ code: 'tag-file-undecodable', path, encoding: readableEncoding });
      return undefined;
    }
    // The decoder may drop a byte-order mark itself: look at the bytes. (In UTF-16 the mark says
    // which byte order the file uses, and belongs there.)
    if (/^utf-?8$/i.test(readableEncoding) && startsWithUtf8Bom(bytes)) add({ code: 'tag-file-bom', path });
    return decoded.text.startsWith('\ufeff') ? decoded.text.slice(1) : decoded.text;
  };

  // bag-info.txt (package-info.txt before 0.96): optional, but Payload-Oxum is checked when given.
  const bagInfoName = fileIndex.has('bag-info.txt')
    ? 'bag-info.txt'
    : rules.packageInfo && fileIndex.has('package-info.txt')
      ? 'package-info.txt'
      : undefined;
  let bagInfo: Array<[string, string]> = [];
  let oxum: string | undefined;
  if (bagInfoName !== undefined) {
    const text = await readTagText(bagInfoName);
    if (text !== undefined) {
      const parsed = parseTagText(text);
      parsed.malformedLines.forEach((line) => add({ code: 'tag-file-malformed', path: bagInfoName, line }));
      if (rules.spaceAfterColon) parsed.noSpaceLines.forEach((line) => add({ code: 'tag-line-no-space', path: bagInfoName, line }));
      bagInfo = parsed.entries.map((e) => [e.label, e.value]);
      oxum = tagValue(parsed.entries, 'Payload-Oxum');
      const oxums = parsed.entries.filter((e) => e.label.toLowerCase() === 'payload-oxum').length;
      if (oxums > 1) add({ code: 'payload-oxum-repeated', path: bagInfoName, count: oxums });
    }
  }

  if (!scan.directories.includes('data')) add({ code: 'data-dir-missing', path: 'data' });

  // Manifests live at the bag root.
  const manifests: LoadedManifest[] = [];
  for (const file of scan.files) {
    if (file.path.includes('/')) continue;
    const name = parseManifestFileName(file.path);
    if (name === undefined) continue;
    if (name.algorithm === undefined) {
      add({ code: 'manifest-algorithm-unknown', path: file.path, algorithmName: name.algorithmName });
      continue;
    }
    const text = await readTagText(file.path);
    if (text === undefined) continue;
    const options = { fileName: file.path, kind: name.kind, algorithm: name.algorithm, decodePercent: rules.decodePercent };
    let entries: ManifestView;
    let problems: BagProblemInit[];
    if (name.kind === 'payload') {
      const table = new CompactManifest(name.algorithm, fileIndex, (i) => scan.files[i]!.path, scan.files.length);
      problems = readManifest(text, options, table);
      entries = table;
    } else ({ entries, problems } = parseManifest(text, options));
    problems.forEach((p) => add(p, p.code === 'manifest-duplicate' ? rules.duplicateSeverity : undefined));
    manifests.push({ fileName: file.path, kind: name.kind, algorithm: name.algorithm, entries, covered: new Uint8Array(scan.files.length) });
  }
  const payloadManifests = manifests.filter((m) => m.kind === 'payload');
  if (payloadManifests.length === 0) add({ code: 'manifest-missing' });
  // RFC 8493 §2.2.1: a tag manifest must not list tag manifests, and should list the payload manifests.
  for (const tagManifest of manifests.filter((m) => m.kind === 'tag')) {
    for (const entry of tagManifest.entries.values()) {
      if (!entry.path.includes('/') && parseManifestFileName(entry.path)?.kind === 'tag') {
        add({ code: 'tag-manifest-lists-tag-manifest', path: entry.path, listedIn: tagManifest.fileName, line: entry.line }, rules.tagManifestRules);
      }
    }
    for (const m of payloadManifests) {
      if (!tagManifest.entries.has(m.fileName)) add({ code: 'tag-manifest-incomplete', path: m.fileName, listedIn: tagManifest.fileName }, rules.tagManifestRules);
    }
  }

  let fetchEntries: FetchEntry[] = [];
  if (fileIndex.has(FETCH_FILE)) {
    const text = await readTagText(FETCH_FILE);
    if (text !== undefined) {
      const parsed = parseFetch(text, { decodePercent: rules.decodePercent });
      parsed.problems.forEach((p) => add(p));
      fetchEntries = parsed.entries;
    }
  }
  const fetched = new Set(fetchEntries.map((e) => e.path));

  // One read per file, for every algorithm any manifest uses plus what the caller wants kept.
  const wanted = new Set<Algorithm>([...manifests.map((m) => m.algorithm), ...(opts.alsoDigest ?? [])]);
  const algorithms = ALGORITHMS.filter((a) => wanted.has(a));
  const { entries: hashed, failures } = await hashFiles(dir, scan.files, algorithms, hasher, opts.concurrency ?? DEFAULT_CONCURRENCY, signal);
  signal?.throwIfAborted();
  for (const [path, detail] of [...failures].sort(([a], [b]) => (a < b ? -1 : 1))) add({ code: 'file-unreadable', path, detail });
  // A file written to while it was hashed has digests of bytes that may no longer be there.
  const hashedFiles = scan.files.filter((_, i) => hashed[i] !== undefined);
  for (const path of await filesChangedSinceScan(dir, hashedFiles, signal)) add({ code: 'file-changed-during-validation', path });

  // Each manifest entry: present and matching. A name in another Unicode normalization than the
  // file's matches it (RFC 8493 §2.4 asks validators to tolerate this), with a warning.
  // Built only when some listed path is not on disk as written: an entry per file of the bag.
  let filesByNfc: Map<string, string[]> | undefined;
  const filesNamedLike = (path: string): string[] => {
    if (filesByNfc === undefined) {
      filesByNfc = new Map();
      for (const f of scan.files) {
        const key = f.path.normalize('NFC');
        const twins = filesByNfc.get(key);
        if (twins === undefined) filesByNfc.set(key, [f.path]);
        else twins.push(f.path);
      }
    }
    return filesByNfc.get(path.normalize('NFC')) ?? [];
  };
  const missing = new Map<string, string[]>();
  for (const manifest of manifests) {
    for (const entry of manifest.entries.values()) {
      let onDisk: string | undefined = fileIndex.has(entry.path) ? entry.path : undefined;
      if (onDisk === undefined) {
        if (directorySet.has(entry.path)) {
          add({ code: 'not-a-file', path: entry.path, listedIn: manifest.fileName });
          continue;
        }
        // A path that exists as a link or device was reported as such already, one under a folder
        // that could not be read was reported with it, and one fetch.txt lists is a fetch hole.
        if (scan.others.has(entry.path) || unreachable(entry.path) || (manifest.kind === 'payload' && fetched.has(entry.path))) continue;
        const twins = filesNamedLike(entry.path);
        if (twins.length === 1) {
          onDisk = twins[0]!;
          add({ code: 'manifest-path-normalization', path: onDisk, listed: entry.path, listedIn: manifest.fileName });
        } else {
          const listedIn = missing.get(entry.path);
          if (listedIn === undefined) missing.set(entry.path, [manifest.fileName]);
          else listedIn.push(manifest.fileName);
          continue;
        }
      }
      const index = fileIndex.get(onDisk)!;
      manifest.covered[index] = 1;
      const file = hashed[index];
      if (file === undefined || !entry.digestWellFormed) continue;
      const actual = file.digests[manifest.algorithm];
      if (actual === undefined) {
        add({ code: 'file-unreadable', path: onDisk, detail: `the hasher returned no ${manifest.algorithm} digest` });
        continue;
      }
      for (const expected of [entry.digest, ...entry.conflictingDigests]) {
        if (actual.toLowerCase() !== expected) {
          add({ code: 'manifest-mismatch', path: onDisk, algorithm: manifest.algorithm, expected, actual: actual.toLowerCase(), listedIn: manifest.fileName });
        }
      }
    }
  }
  if (missing.size > 0) {
    // A listed name that is absent but present under another case, or with whitespace a sloppy
    // writer added, is the commonest cause on Linux; say so in the problem.
    const similarKey = (p: string): string => p.normalize('NFC').toLowerCase().trimEnd();
    const bySimilarKey = new Map(scan.files.map((f) => [similarKey(f.path), f.path]));
    for (const [path, listedIn] of [...missing].sort(([a], [b]) => (a < b ? -1 : 1))) {
      const similar = bySimilarKey.get(similarKey(path));
      add(similar === undefined ? { code: 'file-missing', path, listedIn } : { code: 'file-missing', path, listedIn, similar });
    }
  }

  // Completeness the other way: every payload file in a payload manifest (every one, from 1.0).
  const payload = scan.files.filter((f) => isPayloadPath(f.path));
  if (payloadManifests.length > 0) {
    for (const [i, file] of scan.files.entries()) {
      if (!isPayloadPath(file.path)) continue;
      const lacking = payloadManifests.filter((m) => m.covered[i] !== 1);
      if (lacking.length === payloadManifests.length) add({ code: 'file-not-in-manifest', path: file.path });
      else if (rules.everyPayloadManifest) {
        for (const m of lacking) add({ code: 'file-not-in-manifest', path: file.path, algorithm: m.algorithm, manifest: m.fileName });
      }
    }
  }

  for (const entry of fetchEntries) {
    if (!exists(entry.path)) add({ code: 'fetch-hole', path: entry.path, url: entry.url, listedIn: FETCH_FILE });
    for (const m of payloadManifests) {
      if (!m.entries.has(entry.path)) add({ code: 'fetch-not-in-manifest', path: entry.path, manifest: m.fileName });
    }
  }

  let payloadBytes = 0;
  scan.files.forEach((f, i) => {
    if (isPayloadPath(f.path)) payloadBytes += hashed[i]?.size ?? f.size;
  });
  // With part of the payload out of reach its size is unknown, and that was reported already.
  const payloadKnown = !scan.unreachable.some((u) => isPayloadPath(u));
  if (oxum !== undefined && bagInfoName !== undefined && payloadKnown) {
    const actual = `${payloadBytes}.${payload.length}`;
    const m = /^(\d+)\.(\d+)$/.exec(oxum);
    if (!m) add({ code: 'payload-oxum-malformed', path: bagInfoName, value: oxum });
    else if (BigInt(m[1]!) !== BigInt(payloadBytes) || BigInt(m[2]!) !== BigInt(payload.length)) {
      add({ code: 'payload-oxum-mismatch', path: bagInfoName, expected: oxum, actual });
    }
  }

  // Name checks over everything the bag has or claims to have.
  // (A name matched to a file by normalization is that file's; it is no second name.)
  // What manifests list beyond the files on disk is the missing paths; named without a copy of the lot.
  const filePaths = function* (): Generator<string> {
    for (const f of scan.files) yield f.path;
  };
  findSystemFiles(namesOf(filePaths(), scan.directories, missing.keys())).forEach((p) => add(p));
  findNameCollisions(namesOf(filePaths(), missing.keys())).forEach((p) => add(p));

  const files = hashed.filter((f) => f !== undefined);
  const problems = errorsFirst(limitPerCode(found));
  const result: BagReport = {
    valid: !problems.some((p) => p.severity === 'error'),
    algorithms: ALGORITHMS.filter((a) => payloadManifests.some((m) => m.algorithm === a)),
    problems,
    files,
    payloadBytes,
    payloadFiles: payload.length,
    bagInfo,
  };
  if (version !== undefined) result.version = version;
  if (encoding !== undefined) result.encoding = encoding;
  return result;
}
