/**
 * A revision's upload folder: pre-filled with the package's current version, so that the
 * depositor's `rsync -rtvzP --delete` of the corrected bag sends only what changed (API.md,
 * "Versions"). The files are copies (reflinks where the filesystem has them: `cp --reflink=auto`),
 * never hard links to stored files, which an `rsync --inplace` would write through. `cp` keeps
 * each stored file's mtime to the nanosecond (node's `utimes` keeps microseconds), which rsync's
 * quick check compares. Each copy's identity is recorded with the stored, verified digests as if
 * it had been hashed on landing (catalog/landed-hashes.ts): at complete an unchanged copy is not
 * read again (known-digests.ts), and any write to it changes its identity.
 */
import { mkdir, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Catalog } from '../catalog/catalog.js';
import type { LandedHash } from '../catalog/landed-hashes.js';
import type { FileRecord, Package } from '../catalog/types.js';
import { runBounded } from '../process/run-bounded.js';
import type { Storage } from '../storage/storage.js';
import { identityOf } from './file-identity.js';
import type { LandingZone } from './landing.js';

export interface RevisionUploadDeps {
  catalog: Catalog;
  storage: Storage;
  landing: LandingZone;
}

/** Files per `cp` (well below the argument list's limit). */
const CP_BATCH = 256;
/** More than the kernel's coarse timestamp tick: a write after the identities are read changes the ctime. */
const SETTLE_MS = 50;
const CP_TIMEOUT_MS = 30 * 60_000;
/**
 * Run as root, our rsync keeps owners and modes in an xattr (`fake super`, rsync/daemon.ts), and
 * writes it on every file whose xattr differs, which changes the ctime: the stored files carry
 * the one their upload wrote, so the copies keep it too.
 */
const PRESERVE = process.getuid?.() === 0 ? 'timestamps,xattr' : 'timestamps';

/** Makes the revision's landing folder (the package's new capability) and fills it with the current version. */
export async function prefillRevision(deps: RevisionUploadDeps, pkg: Package): Promise<void> {
  const { catalog, storage, landing } = deps;
  const root = landing.path(pkg.capability);
  await landing.open(pkg.capability);
  const files = [...catalog.files.iterate(pkg.bagId)];
  // By the folder they go to; a copy whose stored name differs (a file moved in a revision) alone.
  const byFolder = new Map<string, string[]>();
  for (const file of files) {
    const source = storage.storedFilePath(pkg.bagId, file);
    const target = join(root, file.path);
    if (basename(source) !== basename(target)) {
      await mkdir(dirname(target), { recursive: true });
      await cp([source, target]);
      continue;
    }
    const list = byFolder.get(dirname(target)) ?? [];
    list.push(source);
    byFolder.set(dirname(target), list);
  }
  for (const [folder, sources] of byFolder) {
    await mkdir(folder, { recursive: true });
    for (let i = 0; i < sources.length; i += CP_BATCH) await cp(sources.slice(i, i + CP_BATCH), folder);
  }
  await sleep(SETTLE_MS);
  await recordCopies(catalog, pkg.bagId, root, files);
}

/** `cp` of `paths` (sources, then the target) or, with `into`, of sources into that folder. */
async function cp(paths: string[], into?: string): Promise<void> {
  const target = into === undefined ? [] : ['-t', into];
  const run = await runBounded(
    ['cp', '--reflink=auto', `--preserve=${PRESERVE}`, ...target, '--', ...paths],
    {
      timeoutMs: CP_TIMEOUT_MS,
    },
  );
  if (run.outcome !== 'exited' || run.exitCode !== 0)
    throw new Error(`could not copy stored files into a revision's upload: ${JSON.stringify(run)}`);
}

/** Each copy's identity with its stored digests, as landed records (a transaction per batch). */
async function recordCopies(
  catalog: Catalog,
  bagId: string,
  root: string,
  files: FileRecord[],
): Promise<void> {
  catalog.landedHashes.clearPackage(bagId);
  let batch: Array<{ bagId: string; path: string; hash: LandedHash }> = [];
  for (const file of files) {
    const identity = identityOf(join(root, file.path));
    if (identity === undefined || identity.size !== file.size) continue;
    batch.push({ bagId, path: file.path, hash: { ...identity, crc32: file.crc32, digests: file.digests } });
    if (batch.length === CP_BATCH) {
      catalog.landedHashes.putAll(batch);
      batch = [];
    }
  }
  catalog.landedHashes.putAll(batch);
}

/**
 * Abandons the open revision: its link closed and its transfers stopped, the revision ended in
 * the catalog, then its upload removed (a copy of stored content and the depositor's changes,
 * given up). After a crash between, start-up removes the folder of a closed link that no
 * revision owns (recovery.ts).
 */
export async function abandonRevision(
  deps: RevisionUploadDeps,
  pkg: Package,
  version: number,
): Promise<void> {
  const { catalog, landing } = deps;
  await landing.close(pkg.capability);
  await landing.stopTransfers(pkg.capability);
  catalog.transaction(() => {
    catalog.revisions.end(pkg.bagId, version, 'abandoned');
    catalog.landedHashes.clearPackage(pkg.bagId);
  });
  await rm(landing.path(pkg.capability), { recursive: true, force: true });
  await landing.reopen(pkg.capability);
}
