/**
 * An audit of a package of many files holds little per file: the recorded files are walked
 * from the catalog and looked up there, never gathered into a set, and the folder's listing
 * comes from the worker as two strings a folder, not a pair per entry. Each audit runs in a child
 * process of its own (`fixtures/walk-peak.ts`) that forces a full collection every 50 ms and
 * keeps the peak of what stays: the growth of that live heap per added file is bounded. Before
 * issue 16's audit work it held the listing as [name, kind] pairs for the whole audit (about
 * 90 bytes a file, and a set of every path at the end).
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { writeManyFilePackage } from '../helpers/many-files.js';
import { node } from '../helpers/node.js';

const run = promisify(execFile);

const N = 20_000;
/** Live heap growth allowed per file added; the listing as pairs took about 90 bytes. */
const BYTES_PER_FILE = 45;

const root = mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'preservd-audit-memory-'));
t.teardown(() => rmSync(root, { recursive: true, force: true }));

async function peakLiveOf(files: number): Promise<number> {
  const dataDir = join(root, `data-${files}`);
  const bagId = await writeManyFilePackage(dataDir, files);
  const child = join(import.meta.dirname, 'fixtures', 'walk-peak.js');
  const { stdout } = await run(...node([child, dataDir, bagId, 'audit']), { maxBuffer: 1 << 20 });
  const result = JSON.parse(stdout) as { bytes: number; peakLive: number };
  t.ok(result.bytes > 0, `the package of ${files} files was audited, nothing found`);
  rmSync(dataDir, { recursive: true, force: true });
  return result.peakLive;
}

t.test(`auditing ${4 * N} files holds at most ${BYTES_PER_FILE} bytes a file more than ${N}`, async (t) => {
  const small = await peakLiveOf(N);
  const large = await peakLiveOf(4 * N);
  const perFile = (large - small) / (3 * N);
  t.comment(
    `live heap peak ${(small / 1e6).toFixed(1)} MB for ${N} files, ${(large / 1e6).toFixed(1)} MB for ${4 * N}: ${perFile.toFixed(0)} bytes per added file`,
  );
  t.ok(perFile < BYTES_PER_FILE, `${perFile.toFixed(0)} bytes per added file`);
});
