/**
 * Paths in the loops that visit every file of an upload (the walks, the check, the store).
 * `path.join` and `path.relative` normalise their result a character at a time: for an upload's
 * paths ~1 KB of garbage a call, which at complete came to a quarter of what the daemon's thread
 * allocated (docs/performance.md, "Tenth session"). These build the same strings directly, for
 * the cases where nothing needs normalising.
 */
import { relative, sep } from 'node:path';

/**
 * `dir/rel` for a normalised `dir` and a `rel` made of names read from folders under it (no
 * empty, `.` or `..` segment): what `join(dir, rel)` gives, without its normalisation.
 */
export function under(dir: string, rel: string): string {
  return dir.endsWith('/') ? `${dir}${rel}` : `${dir}/${rel}`;
}

/** `abs` relative to `dir`, '/'-separated: a slice when `abs` is under `dir`, else `path.relative`. */
export function relativeUnder(dir: string, abs: string): string {
  const prefix = dir.endsWith('/') ? dir : `${dir}/`;
  return abs.startsWith(prefix) ? abs.slice(prefix.length) : relative(dir, abs).split(sep).join('/');
}
