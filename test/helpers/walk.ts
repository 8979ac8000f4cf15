/**
 * Every entry below a folder that is not a folder, as '/'-separated paths relative to it,
 * sorted; links are listed, never followed. `regularOnly` keeps regular files alone.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';

export function filesUnder(dir: string, options: { regularOnly?: boolean } = {}): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => (options.regularOnly === true ? e.isFile() : !e.isDirectory()))
    .map((e) => relative(dir, join(e.parentPath, e.name)).split(sep).join('/'))
    .sort();
}

/** Every file below a folder with its bytes, by '/'-separated path relative to it. */
export function bytesUnder(dir: string): Map<string, Buffer> {
  return new Map(filesUnder(dir).map((path) => [path, readFileSync(join(dir, path))]));
}

/**
 * What a running daemon's `staging/` holds besides the record writer's file in flight
 * (`.preservd-record-<hex>.tmp`, renamed into storage within moments; one a crash leaves is
 * removed at the next start). With the daemon stopped, read the folder itself.
 */
export function stagingWhileRunning(dataDir: string): string[] {
  return readdirSync(join(dataDir, 'staging')).filter(
    (n) => !/^\.preservd-record-[0-9a-f]{16}\.tmp$/.test(n),
  );
}
