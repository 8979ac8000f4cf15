/**
 * Everything the BagIt validator can find wrong with a bag, as typed values carrying their
 * subject (which file, which manifest, expected vs found), and the one function that turns such a
 * value into a sentence for people. Nothing here reads the disk.
 */
import type { Algorithm } from '../fixity/index.js';

export type Severity = 'error' | 'warning';

/** Why a line of bagit.txt is not the exact `Label: value` RFC 8493 §2.1.1 asks for. */
export type BagitTxtFault =
  | 'space-before-colon'
  | 'no-colon'
  | 'no-space-after-colon'
  | 'unexpected-line'
  | 'wrong-order'
  | 'missing-version'
  | 'missing-encoding';

/** Why a path taken from a manifest, fetch.txt or chipmunk-info.txt is refused. */
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
export type NonPortableReason = 'reserved-character' | 'control-character' | 'trailing-dot-or-space' | 'reserved-name';

export type SpecialFileKind = 'fifo' | 'socket' | 'block-device' | 'character-device' | 'unknown';

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
  | { code: 'manifest-duplicate-conflict'; path: string; listedIn: string; line: number; expected: string; actual: string }
  | { code: 'unsafe-path'; path: string; listedIn: string; line?: number; reason: UnsafePathReason }
  | { code: 'payload-entry-outside-data'; path: string; listedIn: string; line: number }
  | { code: 'tag-entry-inside-data'; path: string; listedIn: string; line: number }
  | { code: 'file-missing'; path: string; listedIn: string[]; similar?: string }
  | { code: 'file-not-in-manifest'; path: string; algorithm?: Algorithm; manifest?: string }
  | { code: 'manifest-mismatch'; path: string; algorithm: Algorithm; expected: string; actual: string; listedIn: string }
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

/** A problem as reported: the typed value, its severity and its sentence. */
export type BagProblem = BagProblemInit & ProblemFields;

/** What every bag problem can be read by, whatever its code (the catalog keeps these fields). */
interface ProblemFields {
  severity: Severity;
  message: string;
  path?: string;
  algorithm?: Algorithm;
  expected?: string;
  actual?: string;
}

/**
 * Severity of each code when nothing else decides. `manifest-duplicate` is the one code whose
 * severity depends on the bag (a warning before BagIt 1.0, an error from 1.0), so the caller
 * passes it explicitly.
 */
const DEFAULT_SEVERITY: Record<BagProblemCode, Severity> = {
  'bag-unreadable': 'error',
  'bagit-txt-missing': 'error',
  'bagit-txt-bom': 'error',
  'bagit-txt-malformed': 'error',
  'bagit-version-invalid': 'error',
  'bagit-version-unsupported': 'error',
  'tag-encoding-unsupported': 'error',
  'tag-file-undecodable': 'error',
  'tag-file-malformed': 'error',
  'data-dir-missing': 'error',
  'manifest-missing': 'error',
  'manifest-algorithm-unknown': 'error',
  'manifest-line-malformed': 'error',
  'manifest-binary-marker': 'warning',
  'manifest-dot-slash': 'warning',
  'manifest-duplicate': 'error',
  'manifest-duplicate-conflict': 'error',
  'unsafe-path': 'error',
  'payload-entry-outside-data': 'error',
  'tag-entry-inside-data': 'error',
  'file-missing': 'error',
  'file-not-in-manifest': 'error',
  'manifest-mismatch': 'error',
  'file-unreadable': 'error',
  'file-changed-during-validation': 'error',
  'payload-oxum-malformed': 'error',
  'payload-oxum-mismatch': 'error',
  'fetch-line-malformed': 'error',
  'fetch-hole': 'error',
  'fetch-not-in-manifest': 'error',
  symlink: 'error',
  'special-file': 'error',
  'hard-link': 'error',
  'name-not-utf8': 'error',
  'system-file': 'warning',
  'case-collision': 'warning',
  'normalization-collision': 'warning',
  'non-portable-name': 'warning',
  'not-a-file': 'error',
  'tag-file-bom': 'warning',
  'payload-oxum-repeated': 'error',
  'tag-manifest-incomplete': 'error',
  'tag-manifest-lists-tag-manifest': 'error',
  'path-ends-in-whitespace': 'warning',
  'manifest-path-normalization': 'warning',
  'manifest-path-percent': 'warning',
  'tag-line-no-space': 'warning',
  'path-beyond-path-max': 'error',
  // Takes the severity of the problems it stands for; the caller passes it.
  'problems-omitted': 'error',
};

/** Every code this module can report, with its usual severity (for documentation and tests). */
export const BAG_PROBLEM_CODES: Readonly<Record<BagProblemCode, Severity>> = DEFAULT_SEVERITY;

/** Attach severity and sentence to a problem value. */
export function makeProblem(init: BagProblemInit, severity?: Severity): BagProblem {
  return { ...init, severity: severity ?? DEFAULT_SEVERITY[init.code], message: describeProblem(init) };
}

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
  'unexpected-line': 'is not one of the two lines bagit.txt may hold (BagIt-Version, Tag-File-Character-Encoding)',
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

/** The one place a bag problem becomes a sentence. */
export function describeProblem(p: BagProblemInit): string {
  switch (p.code) {
    case 'bag-unreadable':
      return `The bag directory cannot be read (${p.detail}).`;
    case 'bagit-txt-missing':
      return 'bagit.txt is missing: every bag must declare its BagIt version and tag-file encoding there.';
    case 'bagit-txt-bom':
      return 'bagit.txt starts with a byte-order mark, which RFC 8493 forbids.';
    case 'bagit-txt-malformed':
      return p.line === undefined
        ? `bagit.txt ${BAGIT_TXT_FAULT[p.fault]}.`
        : `bagit.txt line ${p.line} ${BAGIT_TXT_FAULT[p.fault]}.`;
    case 'bagit-version-invalid':
      return `bagit.txt gives BagIt-Version "${p.version}", which is not of the form M.N (for example 1.0).`;
    case 'bagit-version-unsupported':
      return `bagit.txt gives BagIt-Version ${p.version}; versions 0.93 to 1.0 are supported.`;
    case 'tag-encoding-unsupported':
      return `bagit.txt declares Tag-File-Character-Encoding "${p.encoding}", which this validator cannot read.`;
    case 'tag-file-undecodable':
      return `${showPath(p.path)} is not valid ${p.encoding} text, the encoding bagit.txt declares.`;
    case 'tag-file-malformed':
      return `${showPath(p.path)} line ${p.line} is neither "Label: value" nor an indented continuation line.`;
    case 'data-dir-missing':
      return 'The payload directory data/ is missing.';
    case 'manifest-missing':
      return 'The bag has no payload manifest (manifest-<algorithm>.txt) with a supported algorithm.';
    case 'manifest-algorithm-unknown':
      return `${showPath(p.path)} uses the algorithm "${p.algorithmName}"; supported are md5, sha1, sha224, sha256, sha384 and sha512.`;
    case 'manifest-line-malformed':
      return p.fault === 'no-path'
        ? `${showPath(p.path)} line ${p.line} is not "<digest> <path>".`
        : `${showPath(p.path)} line ${p.line} has a digest that is not hexadecimal of the algorithm's length.`;
    case 'manifest-binary-marker':
      return `${showPath(p.path)} marks ${p.count} path(s) with md5sum's "*" binary flag (first on line ${p.line}); the "*" was ignored.`;
    case 'manifest-dot-slash':
      return `${showPath(p.path)} writes ${p.count} path(s) with a leading "./" (first on line ${p.line}); it was ignored.`;
    case 'manifest-duplicate':
      return `${showPath(p.path)} is listed twice in ${p.listedIn} with the same digest (again on line ${p.line}).`;
    case 'manifest-duplicate-conflict':
      return `${showPath(p.path)} is listed twice in ${p.listedIn} with different digests (${p.expected} and ${p.actual}, line ${p.line}).`;
    case 'unsafe-path':
      return `${p.listedIn}${p.line === undefined ? '' : ` line ${p.line}`} names "${showPath(p.path)}", which is refused because ${UNSAFE_REASON[p.reason]}.`;
    case 'payload-entry-outside-data':
      return `${p.listedIn} line ${p.line} names ${showPath(p.path)}, which is not under data/; only payload files belong there.`;
    case 'tag-entry-inside-data':
      return `${p.listedIn} line ${p.line} names ${showPath(p.path)}, a payload file; tag manifests cover tag files only.`;
    case 'file-missing':
      return `${showPath(p.path)} is listed in ${p.listedIn.join(', ')} but is not in the bag${
        p.similar === undefined ? '' : ` (the bag has ${showPath(p.similar)}, which differs only in letter case, Unicode normalization or trailing whitespace)`
      }.`;
    case 'file-not-in-manifest':
      return p.manifest === undefined
        ? `${showPath(p.path)} is in the payload but in no payload manifest.`
        : `${showPath(p.path)} is missing from ${p.manifest}; BagIt 1.0 requires every payload file in every payload manifest.`;
    case 'manifest-mismatch':
      return `${showPath(p.path)} has ${p.algorithm} ${p.actual}, but ${p.listedIn} expects ${p.expected}.`;
    case 'file-unreadable':
      return `${showPath(p.path)} could not be read (${p.detail}).`;
    case 'file-changed-during-validation':
      return `${showPath(p.path)} changed while it was being validated; upload it again once nothing writes to it.`;
    case 'payload-oxum-malformed':
      return `${showPath(p.path)} gives Payload-Oxum "${p.value}", which is not "<octets>.<files>".`;
    case 'payload-oxum-mismatch':
      return `Payload-Oxum in ${showPath(p.path)} is ${p.expected} (octets.files) but the payload holds ${p.actual}.`;
    case 'fetch-line-malformed':
      return p.fault === 'fields'
        ? `${showPath(p.path)} line ${p.line} is not "<url> <length> <path>".`
        : p.fault === 'url'
          ? `${showPath(p.path)} line ${p.line} has a URL that cannot be parsed.`
          : `${showPath(p.path)} line ${p.line} has a length that is neither a number nor "-".`;
    case 'fetch-hole':
      return `${showPath(p.path)} is listed in ${p.listedIn} (to be fetched from ${p.url}) but is not in the bag; fetch the file before depositing.`;
    case 'fetch-not-in-manifest':
      return `${showPath(p.path)} is listed in fetch.txt but not in ${p.manifest}.`;
    case 'symlink':
      return `${showPath(p.path)} is a symbolic link; bags must hold regular files only.`;
    case 'special-file':
      return `${showPath(p.path)} is a ${p.kind.replace('-', ' ')}; bags must hold regular files only.`;
    case 'hard-link':
      return `${showPath(p.path)} is a hard link with ${p.outside} other name${p.outside === 1 ? '' : 's'} outside the bag, through which it could change after it is stored; upload a copy instead.`;
    case 'name-not-utf8':
      return `${showPath(p.path)} has a name that is not valid UTF-8, so no manifest can name it.`;
    case 'system-file':
      return `${showPath(p.path)} is an operating-system file (Finder, Explorer or thumbnail cache), probably not meant to be preserved.`;
    case 'case-collision':
      return `${showPath(p.path)} and ${showPath(p.other)} differ only in letter case; they would collide on a case-insensitive filesystem.`;
    case 'normalization-collision':
      return `${showPath(p.path)} (${normalizationForm(p.path)}) and ${showPath(p.other)} (${normalizationForm(p.other)}) are the same name in different Unicode normalization forms; they would collide on macOS and confuse tools.`;
    case 'non-portable-name':
      return `${showPath(p.path)} ${NON_PORTABLE_REASON[p.reason]}.`;
    case 'not-a-file':
      return p.listedIn === undefined
        ? `${showPath(p.path)} is a folder, where RFC 8493 requires a file.`
        : `${showPath(p.path)} is listed in ${p.listedIn} but is a folder; manifests list files only.`;
    case 'tag-file-bom':
      return `${showPath(p.path)} starts with a byte-order mark; it was read without it, but tag files should not carry one (bagit.txt must not).`;
    case 'payload-oxum-repeated':
      return `${showPath(p.path)} gives Payload-Oxum ${p.count} times; it must be given once.`;
    case 'tag-manifest-incomplete':
      return `${showPath(p.path)} is not listed in ${p.listedIn}; a tag manifest should list every payload manifest, so that its digests are checked too.`;
    case 'tag-manifest-lists-tag-manifest':
      return `${p.listedIn} line ${p.line} lists ${showPath(p.path)}, a tag manifest; tag manifests must not list tag manifests.`;
    case 'path-ends-in-whitespace':
      return `${showPath(p.path)} (${p.listedIn} line ${p.line}) ends in whitespace, which is taken as part of the name; if it is not, the writer of the manifest added it.`;
    case 'manifest-path-normalization':
      return `${showPath(p.path)} is listed in ${p.listedIn} as ${showPath(p.listed)}, the same name in another Unicode normalization form (${normalizationForm(p.listed)}); it was matched to the file as it is named on disk.`;
    case 'manifest-path-percent':
      return `${showPath(p.path)} (${p.listedIn} line ${p.line}) has a "%" that is not one of the escapes %0A, %0D, %25; BagIt 1.0 writes a literal % as %25. It was taken literally.`;
    case 'tag-line-no-space':
      return `${showPath(p.path)} line ${p.line} has no space after the colon; BagIt 1.0 writes "Label: value".`;
    case 'path-beyond-path-max':
      return `${showPath(p.path)} is too long a path for this system to open (beyond PATH_MAX); nothing in or under it could be checked.`;
    case 'problems-omitted':
      return `${p.count} more ${p.omittedCode} problems were found; they are not listed one by one.`;
  }
}
