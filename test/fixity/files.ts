/** Temporary files for the fixity tests, removed when the test file ends. */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface Scratch {
  dir: string;
  /** Writes `size` random bytes (or the given bytes) to `name`; returns the absolute path. */
  file(name: string, content: number | Uint8Array): string;
  remove(): void;
}

export function scratch(prefix = 'preservd-fixity-'): Scratch {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return {
    dir,
    file(name, content) {
      const path = join(dir, name);
      writeFileSync(path, typeof content === 'number' ? randomBytes(content) : content);
      return path;
    },
    remove() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export const MiB = 1024 * 1024;
