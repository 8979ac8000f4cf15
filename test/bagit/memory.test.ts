/**
 * The validator's memory grows with a bag's file count by little more than what it must keep
 * for each file (its digests, for the report): a bag of 4N small files peaks not far above a bag
 * of N. Each is validated in a child process of its own, the way `preservd validate` does, and
 * the growth of the peak resident set per added file is bounded. Before issue 16 the validator
 * held several kilobytes per file (manifest entries, stamps, a promise per lstat, name sets).
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { writeManyFilesBag } from '../helpers/many-files-bag.js';
import { node } from '../helpers/node.js';

const run = promisify(execFile);

const N = 10_000;
/** Peak growth allowed per file added; the old validator took about 5 kB. */
const BYTES_PER_FILE = 2_000;

const root = mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'preservd-memory-'));
t.teardown(() => rmSync(root, { recursive: true, force: true }));

async function peakOf(files: number): Promise<number> {
  const dir = join(root, `bag-${files}`);
  writeManyFilesBag(dir, files);
  const child = join(import.meta.dirname, 'fixtures', 'validate-peak.js');
  const { stdout } = await run(...node([child, dir]), { maxBuffer: 1 << 20 });
  const result = JSON.parse(stdout) as { valid: boolean; files: number; peak: number };
  t.same(
    [result.valid, result.files],
    [true, files + 3],
    `the bag of ${files} files is valid, every file read`,
  );
  rmSync(dir, { recursive: true, force: true });
  return result.peak;
}

t.test(`validating ${4 * N} files peaks at most ${BYTES_PER_FILE} bytes a file above ${N}`, async (t) => {
  const small = await peakOf(N);
  const large = await peakOf(4 * N);
  const perFile = (large - small) / (3 * N);
  t.comment(
    `peak ${(small / 1e6).toFixed(0)} MB for ${N} files, ${(large / 1e6).toFixed(0)} MB for ${4 * N}: ${perFile.toFixed(0)} bytes per added file`,
  );
  t.ok(perFile < BYTES_PER_FILE, `${perFile.toFixed(0)} bytes per added file`);
});
