/**
 * `preservd migrate` (CLI.md, STORAGE.md): a repository of an earlier release (plain bag folders
 * in `storage/` and on the replicas) converted to OCFL storage roots, the primary first, then each
 * replica from the primary's objects; the daemon stopped. Progress on a terminal, one summary
 * line; exit 0 all converted, 1 packages skipped (each named with why), 2 could not run (and
 * nothing changed when it refused). Run again after a kill, it goes on where it was.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Catalog } from '../catalog/catalog.js';
import type { Config } from '../config/config.js';
import { createHasher } from '../fixity/index.js';
import { migratePrimary, type Skipped } from '../migrate/primary.js';
import { migrateReplica, type ReplicaOutcome } from '../migrate/replicas.js';
import { targetsFor } from '../replicas/index.js';
import { DataLayout } from '../storage/layout.js';
import { Storage } from '../storage/storage.js';
import type { CommandIO } from './users.js';

/** Progress is redrawn at most this often on a terminal. */
const PROGRESS_MS = 250;

export async function runMigrate(argv: string[], io: CommandIO, config: Config): Promise<number> {
  if (argv.length > 0) {
    io.stderr.write('usage: preservd migrate   (the daemon stopped; see docs/operators.md, Upgrades)\n');
    return 2;
  }
  const layout = new DataLayout(config.dataDir);
  if (!existsSync(join(layout.catalog, 'data.mdb'))) {
    io.stderr.write(`preservd: migrate refused, nothing changed: no catalog in ${layout.catalog}\n`);
    return 2;
  }
  const others = Catalog.otherProcesses(layout);
  if (others.length > 0) {
    io.stderr.write(
      `preservd: migrate refused, nothing changed: the catalog is open in another process (pid ${others.join(', ')}): stop the daemon first\n`,
    );
    return 2;
  }
  await layout.ensure();
  const catalog = Catalog.open(layout);
  const hasher = createHasher();
  const storage = new Storage(layout);
  const progress = progressLine(io.stderr);
  const targets = await targetsFor(config.replicas);
  try {
    const primary = await migratePrimary(storage, catalog, hasher, (p) =>
      progress(`primary: ${p.done}/${p.total} packages, ${p.bytes} bytes checked`),
    );
    const skipped: Skipped[] = [...primary.skipped];
    const notHere = new Set(primary.skipped.map((s) => s.bagId));
    const objectPaths = [...catalog.packages.everyRecord(0, Number.MAX_SAFE_INTEGER)]
      .filter((p) => p.stored && p.storagePath === Storage.storagePath(p.bagId) && !notHere.has(p.bagId))
      .map((p) => p.bagId);
    const replicas: ReplicaOutcome[] = [];
    for (const target of targets) {
      try {
        replicas.push(
          await migrateReplica(target, storage, catalog, objectPaths, (done) =>
            progress(`replica ${target.name}: ${done}/${objectPaths.length} packages`),
          ),
        );
      } catch (err) {
        skipped.push({
          bagId: '*',
          why: `replica ${target.name} could not be migrated: ${(err as Error).message} (run it again to go on)`,
        });
      }
    }
    progress(undefined);
    for (const replica of replicas) skipped.push(...replica.skipped);
    for (const { bagId, why } of skipped) io.stderr.write(`skipped ${bagId}: ${why}\n`);
    io.stdout.write(`${summary(primary, replicas, skipped.length)}\n`);
    return skipped.length > 0 ? 1 : 0;
  } catch (err) {
    progress(undefined);
    io.stderr.write(`preservd: migrate failed: ${(err as Error).message} (run it again to go on)\n`);
    return 2;
  } finally {
    for (const target of targets) target.close();
    await hasher.close();
    await catalog.close();
  }
}

function summary(
  primary: Awaited<ReturnType<typeof migratePrimary>>,
  replicas: readonly ReplicaOutcome[],
  skipped: number,
): string {
  const parts = [
    `migrated ${primary.migrated + primary.already} packages to OCFL (${primary.already} by an earlier run, ${primary.bytes} bytes checked), ${skipped} skipped`,
  ];
  for (const r of replicas) {
    const kept =
      r.retained > 0
        ? `, ${r.retained} kept under Object Lock retention until ${r.retainedUntil!.toISOString()} (delete them then: docs/replicas.md)`
        : '';
    parts.push(`replica ${r.replica}: ${r.migrated} objects written, ${r.removed} old keys deleted${kept}`);
  }
  return parts.join('; ');
}

/** A line redrawn in place on a terminal (nothing elsewhere); undefined ends it. */
function progressLine(out: NodeJS.WritableStream): (text: string | undefined) => void {
  const tty = (out as { isTTY?: boolean }).isTTY === true;
  let last = 0;
  let shown = false;
  return (text) => {
    if (!tty) return;
    if (text === undefined) {
      if (shown) out.write('\r\x1b[K');
      return;
    }
    const now = Date.now();
    if (now - last < PROGRESS_MS) return;
    last = now;
    shown = true;
    out.write(`\r${text}\x1b[K`);
  };
}
