/**
 * Every entry below a folder that is not a folder, as '/'-separated paths relative to it,
 * sorted; links are listed, never followed. `regularOnly` keeps regular files alone.
 */
import { readdirSync } from 'node:fs';
import { join, relative, sep } from 'node:path';

export function filesUnder(dir: string, options: { regularOnly?: boolean } = {}): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => (options.regularOnly === true ? e.isFile() : !e.isDirectory()))
    .map((e) => relative(dir, join(e.parentPath, e.name)).split(sep).join('/'))
    .sort();
}
