/**
 * Everything the BagIt validator can find wrong with a bag, as typed values carrying their
 * subject (which file, which manifest, expected vs found), and their table (`defineProblems`):
 * each code's severity and the one sentence for people it becomes. Nothing here reads the disk.
 */
import type { Algorithm, EntryKind } from '../fixity/index.js';
import { defineProblems, type Problem, type Severity } from '../problems.js';

export type { Severity };

/** Why a line of bagit.txt is not the exact `Label: value` RFC 8493 §2.1.1 asks for. */
export type BagitTxtFault =
  | 'space-before-colon'
  | 'no-colon'
  | 'no-space-after-colon'
  | 'unexpected-line'
  | 'wrong-order'
  | 'missing-version'
  | 'missing-encoding';

/** Why a path is refused: one listed in a manifest, fetch.txt or chipmunk-info.txt, or one in the bag. */
export type UnsafePathReason =
  | 'empty'
  | 'absolute'
  | 'parent-segment'
  | 'dot-segment'
  | 'empty-segment'
  | 'home-directory'
  | 'drive-letter'
  | 'backslash'
  | 'unc'
  | 'environment-variable'
  | 'nul';

/** Why a name on disk would not survive a copy to another common filesystem. */
export type NonPortableReason =
  'reserved-character' | 'control-character' | 'trailing-dot-or-space' | 'reserved-name';

/** What a bag may not hold besides symbolic links, as fixity spells the kinds of entries. */
export type SpecialFileKind = Exclude<EntryKind, 'file' | 'directory' | 'symlink'>;

/** A problem before its severity and sentence are attached: what `makeProblem` takes. */
export type BagProblemInit =
  | { code: 'bag-unreadable'; detail: string }
  | { code: 'bagit-txt-missing'; path: 'bagit.txt' }
  | { code: 'bagit-txt-bom'; path: 'bagit.txt' }
  | { code: 'bagit-txt-malformed'; path: 'bagit.txt'; line?: number; fault: BagitTxtFault }
  | { code: 'bagit-version-invalid'; path: 'bagit.txt'; version: string }
  | { code: 'bagit-version-unsupported'; path: 'bagit.txt'; version: string }
  | { code: 'tag-encoding-unsupported'; path: 'bagit.txt'; encoding: string }
  | { code: 'tag-file-undecodable'; path: string; encoding: string }
  | { code: 'tag-file-malformed'; path: string; line: number }
  | { code: 'data-dir-missing'; path: 'data' }
  | { code: 'manifest-missing' }
  | { code: 'manifest-algorithm-unknown'; path: string; algorithmName: string }
  | { code: 'manifest-line-malformed'; path: string; line: number; fault: 'no-path' | 'digest' }
  | { code: 'manifest-binary-marker'; path: string; line: number; count: number }
  | { code: 'manifest-dot-slash'; path: string; line: number; count: number }
  | { code: 'manifest-duplicate'; path: string; listedIn: string; line: number }
  | {
      code: 'manifest-duplicate-conflict';
      path: string;
      listedIn: string;
      line: number;
      expected: string;
      actual: string;
    }
  /** Without `listedIn`: a file or folder in the bag has the path. */
  | { code: 'unsafe-path'; path: string; listedIn?: string; line?: number; reason: UnsafePathReason }
  | { code: 'payload-entry-outside-data'; path: string; listedIn: string; line: number }
  | { code: 'tag-entry-inside-data'; path: string; listedIn: string; line: number }
  | { code: 'file-missing'; path: string; listedIn: string[]; similar?: string }
  | { code: 'file-not-in-manifest'; path: string; algorithm?: Algorithm; manifest?: string }
  | {
      code: 'manifest-mismatch';
      path: string;
      algorithm: Algorithm;
      expected: string;
      actual: string;
      listedIn: string;
    }
  | { code: 'file-unreadable'; path: string; detail: string }
  | { code: 'file-changed-during-validation'; path: string }
  | { code: 'payload-oxum-malformed'; path: string; value: string }
  | { code: 'payload-oxum-mismatch'; path: string; expected: string; actual: string }
  | { code: 'fetch-line-malformed'; path: string; line: number; fault: 'fields' | 'url' | 'length' }
  | { code: 'fetch-hole'; path: string; url: string; listedIn: string }
  | { code: 'fetch-not-in-manifest'; path: string; manifest: string }
  | { code: 'symlink'; path: string }
  | { code: 'special-file'; path: string; kind: SpecialFileKind }
  | { code: 'hard-link'; path: string; outside: number }
  | { code: 'name-not-utf8'; path: string }
  | { code: 'system-file'; path: string }
  | { code: 'empty-folder'; path: string }
  | { code: 'case-collision'; path: string; other: string }
  | { code: 'normalization-collision'; path: string; other: string }
  | { code: 'non-portable-name'; path: string; reason: NonPortableReason }
  | { code: 'not-a-file'; path: string; listedIn?: string }
  | { code: 'tag-file-bom'; path: string }
  | { code: 'payload-oxum-repeated'; path: string; count: number }
  | { code: 'tag-manifest-incomplete'; path: string; listedIn: string }
  | { code: 'tag-manifest-lists-tag-manifest'; path: string; listedIn: string; line: number }
  | { code: 'path-ends-in-whitespace'; path: string; listedIn: string; line: number }
  | { code: 'manifest-path-normalization'; path: string; listed: string; listedIn: string }
  | { code: 'manifest-path-percent'; path: string; listedIn: string; line: number }
  | { code: 'tag-line-no-space'; path: string; line: number }
  | { code: 'path-beyond-path-max'; path: string }
  | { code: 'problems-omitted'; omittedCode: string; count: number };

export type BagProblemCode = BagProblemInit['code'];

/**
 * A problem as reported: the typed value, its severity and its sentence; the fields most codes
 * carry can be read whatever the code (the catalog keeps these).
 */
export type BagProblem = Problem<BagProblemInit> & {
  path?: string;
  algorithm?: Algorithm;
  expected?: string;
  actual?: string;
};

/** Longest path shown whole in a sentence; a longer one (a hostile 1 MiB line) is cut. */
const SHOWN_PATH_LENGTH = 1024;

/**
 * Show a path from a bag so that a person can read it: control characters (a newline in a file
 * name is legal) are escaped instead of breaking the line the path is printed on, a path that
 * begins or ends in whitespace is quoted so the whitespace shows, and a path longer than 1024
 * characters is cut, saying how long it was.
 */
export function showPath(path: string): string {
  const cut = path.length > SHOWN_PATH_LENGTH;
  const head = cut ? path.slice(0, SHOWN_PATH_LENGTH) : path;
  // eslint-disable-next-line no-control-regex -- control characters are what it escapes
  const escaped = head.replace(/[\u0000-\u001f\u007f]/g, (c) => {
    if (c === '\n') return '\\n';
    if (c === '\r') return '\\r';
    if (c === '\t') return '\\t';
    return `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`;
  });
  const quoted = /^\s|\s$/u.test(path) ? `"${escaped}${cut ? '…' : ''}"` : `${escaped}${cut ? '…' : ''}`;
  return cut ? `${quoted} (${path.length} characters)` : quoted;
}

/** Which Unicode form a name is in, so two names that print alike can be told apart. */
function normalizationForm(s: string): string {
  if (s === s.normalize('NFC')) return 'NFC, composed';
  if (s === s.normalize('NFD')) return 'NFD, decomposed';
  return 'mixed normalization';
}

const BAGIT_TXT_FAULT: Record<BagitTxtFault, string> = {
  'space-before-colon': 'has whitespace before the colon',
  'no-colon': 'is not of the form "Label: value"',
  'no-space-after-colon': 'needs exactly one space after the colon',
  'unexpected-line':
    'is not one of the two lines bagit.txt may hold (BagIt-Version, Tag-File-Character-Encoding)',
  'wrong-order': 'is out of order: BagIt-Version must come first, Tag-File-Character-Encoding second',
  'missing-version': 'lacks the BagIt-Version line',
  'missing-encoding': 'lacks the Tag-File-Character-Encoding line',
};

const UNSAFE_REASON: Record<UnsafePathReason, string> = {
  empty: 'it is empty',
  absolute: 'it is an absolute path',
  'parent-segment': 'it contains a ".." segment that could reach outside the bag',
  'dot-segment': 'it contains a "." segment, so it is not written the one way a bag path may be written',
  'empty-segment': 'it contains an empty segment ("//" or a trailing "/")',
  'home-directory': 'it starts with "~", a home-directory shortcut',
  'drive-letter': 'it starts with a Windows drive letter',
  backslash: 'it contains a backslash, a path separator on Windows',
  unc: 'it is a Windows UNC or device path',
  'environment-variable': 'it starts with a %VARIABLE% that Windows would expand',
  nul: 'it contains a NUL byte',
};

const NON_PORTABLE_REASON: Record<NonPortableReason, string> = {
  'reserved-character': 'contains a character Windows does not allow in names (one of < > : " | ? * \\)',
  'control-character': 'contains a control character',
  'trailing-dot-or-space': 'has a name ending in a dot or a space, which Windows drops',
  'reserved-name': 'uses a name Windows reserves for devices (CON, PRN, AUX, NUL, COM1-9, LPT1-9)',
};

/** Each code's severity (an error unless it says so) and its sentence. */
const BAG_PROBLEMS = defineProblems<BagProblemInit>({
  'bag-unreadable': { describe: (p) => `The bag directory cannot be read (${p.detail}).` },
  'bagit-txt-missing': {
    describe: () =>
      'bagit.txt is missing: every bag must declare its BagIt version and tag-file encoding there.',
  },
  'bagit-txt-bom': { describe: () => 'bagit.txt starts with a byte-order mark, which RFC 8493 forbids.' },
  'bagit-txt-malformed': {
    describe: (p) =>
      p.line === undefined
        ? `bagit.txt ${BAGIT_TXT_FAULT[p.fault]}.`
        : `bagit.txt line ${p.line} ${BAGIT_TXT_FAULT[p.fault]}.`,
  },
  'bagit-version-invalid': {
    describe: (p) =>
      `bagit.txt gives BagIt-Version "${p.version}", which is not of the form M.N (for example 1.0).`,
  },
  'bagit-version-unsupported': {
    describe: (p) => `bagit.txt gives BagIt-Version ${p.version}; versions 0.93 to 1.0 are supported.`,
  },
  'tag-encoding-unsupported': {
    describe: (p) =>
      `bagit.txt declares Tag-File-Character-Encoding "${p.encoding}", which this validator cannot read.`,
  },
  'tag-file-undecodable': {
    describe: (p) => `${showPath(p.path)} is not valid ${p.encoding} text, the encoding bagit.txt declares.`,
  },
  'tag-file-malformed': {
    describe: (p) =>
      `${showPath(p.path)} line ${p.line} is neither "Label: value" nor an indented continuation line.`,
  },
  'data-dir-missing': { describe: () => 'The payload directory data/ is missing.' },
  'manifest-missing': {
    describe: () => 'The bag has no payload manifest (manifest-<algorithm>.txt) with a supported algorithm.',
  },
  'manifest-algorithm-unknown': {
    describe: (p) =>
      `${showPath(p.path)} uses the algorithm "${p.algorithmName}"; supported are md5, sha1, sha224, sha256, sha384 and sha512.`,
  },
  'manifest-line-malformed': {
    describe: (p) =>
      p.fault === 'no-path'
        ? `${showPath(p.path)} line ${p.line} is not "<digest> <path>".`
        : `${showPath(p.path)} line ${p.line} has a digest that is not hexadecimal of the algorithm's length.`,
  },
  'manifest-binary-marker': {
    severity: 'warning',
    describe: (p) =>
      `${showPath(p.path)} marks ${p.count} path(s) with md5sum's "*" binary flag (first on line ${p.line}); the "*" was ignored.`,
  },
  'manifest-dot-slash': {
    severity: 'warning',
    describe: (p) =>
      `${showPath(p.path)} writes ${p.count} path(s) with a leading "./" (first on line ${p.line}); it was ignored.`,
  },
  // A warning before BagIt 1.0, an error from 1.0: the validator passes the bag's severity.
  'manifest-duplicate': {
    describe: (p) =>
      `${showPath(p.path)} is listed twice in ${p.listedIn} with the same digest (again on line ${p.line}).`,
  },
  'manifest-duplicate-conflict': {
    describe: (p) =>
      `${showPath(p.path)} is listed twice in ${p.listedIn} with different digests (${p.expected} and ${p.actual}, line ${p.line}).`,
  },
  'unsafe-path': {
    describe: (p) =>
      p.listedIn === undefined
        ? `The bag holds "${showPath(p.path)}", which is refused because ${UNSAFE_REASON[p.reason]}; rename it.`
        : `${p.listedIn}${p.line === undefined ? '' : ` line ${p.line}`} names "${showPath(p.path)}", which is refused because ${UNSAFE_REASON[p.reason]}.`,
  },
  'payload-entry-outside-data': {
    describe: (p) =>
      `${p.listedIn} line ${p.line} names ${showPath(p.path)}, which is not under data/; only payload files belong there.`,
  },
  'tag-entry-inside-data': {
    describe: (p) =>
      `${p.listedIn} line ${p.line} names ${showPath(p.path)}, a payload file; tag manifests cover tag files only.`,
  },
  'file-missing': {
    describe: (p) =>
      `${showPath(p.path)} is listed in ${p.listedIn.join(', ')} but is not in the bag${
        p.similar === undefined
          ? ''
          : ` (the bag has ${showPath(p.similar)}, which differs only in letter case, Unicode normalization or trailing whitespace)`
      }.`,
  },
  'file-not-in-manifest': {
    describe: (p) =>
      p.manifest === undefined
        ? `${showPath(p.path)} is in the payload but in no payload manifest.`
        : `${showPath(p.path)} is missing from ${p.manifest}; BagIt 1.0 requires every payload file in every payload manifest.`,
  },
  'manifest-mismatch': {
    describe: (p) =>
      `${showPath(p.path)} has ${p.algorithm} ${p.actual}, but ${p.listedIn} expects ${p.expected}.`,
  },
  'file-unreadable': { describe: (p) => `${showPath(p.path)} could not be read (${p.detail}).` },
  'file-changed-during-validation': {
    describe: (p) =>
      `${showPath(p.path)} changed while it was being validated; upload it again once nothing writes to it.`,
  },
  'payload-oxum-malformed': {
    describe: (p) => `${showPath(p.path)} gives Payload-Oxum "${p.value}", which is not "<octets>.<files>".`,
  },
  'payload-oxum-mismatch': {
    describe: (p) =>
      `Payload-Oxum in ${showPath(p.path)} is ${p.expected} (octets.files) but the payload holds ${p.actual}.`,
  },
  'fetch-line-malformed': {
    describe: (p) =>
      p.fault === 'fields'
        ? `${showPath(p.path)} line ${p.line} is not "<url> <length> <path>".`
        : p.fault === 'url'
          ? `${showPath(p.path)} line ${p.line} has a URL that cannot be parsed.`
          : `${showPath(p.path)} line ${p.line} has a length that is neither a number nor "-".`,
  },
  'fetch-hole': {
    describe: (p) =>
      `${showPath(p.path)} is listed in ${p.listedIn} (to be fetched from ${p.url}) but is not in the bag; fetch the file before depositing.`,
  },
  'fetch-not-in-manifest': {
    describe: (p) => `${showPath(p.path)} is listed in fetch.txt but not in ${p.manifest}.`,
  },
  symlink: { describe: (p) => `${showPath(p.path)} is a symbolic link; bags must hold regular files only.` },
  'special-file': {
    describe: (p) => `${showPath(p.path)} is a ${p.kind}; bags must hold regular files only.`,
  },
  'hard-link': {
    describe: (p) =>
      `${showPath(p.path)} is a hard link with ${p.outside} other name${p.outside === 1 ? '' : 's'} outside the bag, through which it could change after it is stored; upload a copy instead.`,
  },
  'name-not-utf8': {
    describe: (p) => `${showPath(p.path)} has a name that is not valid UTF-8, so no manifest can name it.`,
  },
  'system-file': {
    severity: 'warning',
    describe: (p) =>
      `${showPath(p.path)} is an operating-system file (Finder, Explorer or thumbnail cache), probably not meant to be preserved.`,
  },
  'empty-folder': { severity: 'warning', describe: (p) => `${showPath(p.path)}: empty folder, not stored.` },
  'case-collision': {
    severity: 'warning',
    describe: (p) =>
      `${showPath(p.path)} and ${showPath(p.other)} differ only in letter case; they would collide on a case-insensitive filesystem.`,
  },
  'normalization-collision': {
    severity: 'warning',
    describe: (p) =>
      `${showPath(p.path)} (${normalizationForm(p.path)}) and ${showPath(p.other)} (${normalizationForm(p.other)}) are the same name in different Unicode normalization forms; they would collide on macOS and confuse tools.`,
  },
  'non-portable-name': {
    severity: 'warning',
    describe: (p) => `${showPath(p.path)} ${NON_PORTABLE_REASON[p.reason]}.`,
  },
  'not-a-file': {
    describe: (p) =>
      p.listedIn === undefined
        ? `${showPath(p.path)} is a folder, where RFC 8493 requires a file.`
        : `${showPath(p.path)} is listed in ${p.listedIn} but is a folder; manifests list files only.`,
  },
  'tag-file-bom': {
    severity: 'warning',
    describe: (p) =>
      `${showPath(p.path)} starts with a byte-order mark; it was read without it, but tag files should not carry one (bagit.txt must not).`,
  },
  'payload-oxum-repeated': {
    describe: (p) => `${showPath(p.path)} gives Payload-Oxum ${p.count} times; it must be given once.`,
  },
  // This and the next: warnings before BagIt 1.0, errors from 1.0 (the validator passes the severity).
  'tag-manifest-incomplete': {
    describe: (p) =>
      `${showPath(p.path)} is not listed in ${p.listedIn}; a tag manifest should list every payload manifest, so that its digests are checked too.`,
  },
  'tag-manifest-lists-tag-manifest': {
    describe: (p) =>
      `${p.listedIn} line ${p.line} lists ${showPath(p.path)}, a tag manifest; tag manifests must not list tag manifests.`,
  },
  'path-ends-in-whitespace': {
    severity: 'warning',
    describe: (p) =>
      `${showPath(p.path)} (${p.listedIn} line ${p.line}) ends in whitespace, which is taken as part of the name; if it is not, the writer of the manifest added it.`,
  },
  'manifest-path-normalization': {
    severity: 'warning',
    describe: (p) =>
      `${showPath(p.path)} is listed in ${p.listedIn} as ${showPath(p.listed)}, the same name in another Unicode normalization form (${normalizationForm(p.listed)}); it was matched to the file as it is named on disk.`,
  },
  'manifest-path-percent': {
    severity: 'warning',
    describe: (p) =>
      `${showPath(p.path)} (${p.listedIn} line ${p.line}) has a "%" that is not one of the escapes %0A, %0D, %25; BagIt 1.0 writes a literal % as %25. It was taken literally.`,
  },
  'tag-line-no-space': {
    severity: 'warning',
    describe: (p) =>
      `${showPath(p.path)} line ${p.line} has no space after the colon; BagIt 1.0 writes "Label: value".`,
  },
  'path-beyond-path-max': {
    describe: (p) =>
      `${showPath(p.path)} is too long a path for this system to open (beyond PATH_MAX); nothing in or under it could be checked.`,
  },
  // Takes the severity of the problems it stands for; the validator passes it.
  'problems-omitted': {
    describe: (p) => `${p.count} more ${p.omittedCode} problems were found; they are not listed one by one.`,
  },
});

/** Every code this module can report, with its usual severity (for documentation and tests). */
export const BAG_PROBLEM_CODES = BAG_PROBLEMS.CODES;
/** Attach severity and sentence to a problem value. */
export const makeProblem: (init: BagProblemInit, severity?: Severity) => BagProblem = BAG_PROBLEMS.make;
/** The one place a bag problem becomes a sentence. */
export const describeProblem = BAG_PROBLEMS.describe;
