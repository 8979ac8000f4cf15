/**
 * The rules OCFL sets for the paths an inventory lists: logical paths in a version's state (E051 to
 * E053, E095) and content paths in the manifest and fixity blocks (E098 to E101), both `/`-joined
 * elements none of which is `.`, `..` or empty, unique, and no path the folder of another.
 */

export type PathFault = 'not-a-string' | 'slash-at-end' | 'bad-element';

/** Why `path` is not a well-formed relative path, or undefined when it is one. */
export function pathFault(path: unknown): PathFault | undefined {
  if (typeof path !== 'string') return 'not-a-string';
  if (path.startsWith('/') || path.endsWith('/')) return 'slash-at-end';
  if (path.split('/').some((e) => e === '' || e === '.' || e === '..')) return 'bad-element';
  return undefined;
}

/** Paths seen so far in one block: duplicates, and a path that is also another one's folder. */
export class PathSet {
  private readonly paths = new Set<string>();
  private readonly folders = new Set<string>();

  /** Adds a well-formed path; false when it is already listed. */
  add(path: string): boolean {
    if (this.paths.has(path)) return false;
    this.paths.add(path);
    const elements = path.split('/');
    for (let i = 1; i < elements.length; i++) this.folders.add(elements.slice(0, i).join('/'));
    return true;
  }

  /** The paths that are also folders of other paths (`a` and `a/b`). */
  conflicts(): string[] {
    return [...this.paths].filter((p) => this.folders.has(p)).sort();
  }
}
