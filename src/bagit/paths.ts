/**
 * Paths inside a bag: decoding the few percent-escapes manifests use, refusing any path that
 * could leave the bag on any operating system, and spotting names that will not survive a copy
 * to another common filesystem. Pure string work; nothing here touches the disk.
 */
import type { NonPortableReason, UnsafePathReason } from './problems.js';

/**
 * Undo the escapes RFC 8493 §2.1.3 defines for manifest and fetch paths: `%0D` and `%0A` (CR and
 * LF in a file name) in every version, `%25` (a literal %) from 1.0 on. Nothing else is decoded:
 * a 0.97 bag may hold a file literally named `%7Etest1.txt`. One pass, so `%250A` becomes `%0A`.
 */
export function decodeBagPath(raw: string, decodePercent: boolean): string {
  const pattern = decodePercent ? /%(0A|0D|25)/gi : /%(0A|0D)/gi;
  return raw.replace(pattern, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16)));
}

/**
 * Why a relative bag path is unsafe, or undefined when it is safe. Windows forms (drive letters,
 * backslashes, UNC, %VAR%) are refused on every host: a repository keeps bags for readers on any
 * system, and a path one of them would resolve outside the bag is never acceptable.
 */
export function unsafePathReason(path: string): UnsafePathReason | undefined {
  if (path.length === 0) return 'empty';
  if (path.includes('\0')) return 'nul';
  if (path.startsWith('\\\\') || path.startsWith('//')) return 'unc';
  if (path.startsWith('/')) return 'absolute';
  if (/^[A-Za-z]:/.test(path)) return 'drive-letter';
  if (path.startsWith('~')) return 'home-directory';
  // Only a leading %VAR% expands to somewhere else; `data/50%off%.txt` is just a name.
  if (/^%[A-Za-z_][A-Za-z0-9_()]*%/.test(path)) return 'environment-variable';
  if (path.includes('\\')) return 'backslash';
  const segments = path.split('/');
  if (segments.includes('..')) return 'parent-segment';
  if (segments.includes('.')) return 'dot-segment';
  if (segments.includes('')) return 'empty-segment';
  return undefined;
}

const WINDOWS_RESERVED_NAME = /^(CON|PRN|AUX|NUL|COM[1-9]|LPT[1-9])(\..*)?$/i;

/** Why one name (a single path segment) is not portable, or undefined when it is. */
export function nonPortableNameReason(name: string): NonPortableReason | undefined {
  // eslint-disable-next-line no-control-regex -- control characters are what it looks for
  if (/[\u0000-\u001f\u007f]/.test(name)) return 'control-character';
  if (/[<>:"|?*\\]/.test(name)) return 'reserved-character';
  if (/[. ]$/.test(name) && name !== '.' && name !== '..') return 'trailing-dot-or-space';
  if (WINDOWS_RESERVED_NAME.test(name)) return 'reserved-name';
  return undefined;
}

/** True when the bag path names something in the payload directory. */
export function isPayloadPath(path: string): boolean {
  return path.startsWith('data/');
}
