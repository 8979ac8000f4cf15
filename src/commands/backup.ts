/**
 * `preservd backup DEST`: a hot copy of the catalog, safe while the daemon runs (LMDB copies one
 * read transaction; the daemon's writes go on). DEST becomes a data directory that holds only
 * `catalog/data.mdb`; the copy is opened again and counted before the command says it is good.
 * Stored bags are not copied: they never change after ingest, so any file-level backup keeps them.
 * The copy holds what the live catalog's 0700 folder protects (token digests, open upload
 * links), so it is made the same way whatever the umask: folders 0700, files 0600.
 */
import { chmodSync, existsSync, mkdirSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Catalog } from '../catalog/catalog.js';
import type { Config } from '../config/config.js';
import { DataLayout } from '../storage/layout.js';
import type { CommandIO } from './users.js';

export async function runBackup(argv: string[], io: CommandIO, config: Config): Promise<number> {
  if (argv.length !== 1 || argv[0]!.startsWith('-')) {
    io.stderr.write('usage: preservd backup DEST   (DEST: a new or empty folder)\n');
    return 2;
  }
  const dest = resolve(argv[0]!);
  if (dest === resolve(config.dataDir)) {
    io.stderr.write('preservd: DEST is the data directory itself; name another folder\n');
    return 2;
  }
  if (existsSync(dest) && readdirSync(dest).length > 0) {
    io.stderr.write(`preservd: ${dest} is not empty; a backup goes into a new or empty folder\n`);
    return 2;
  }
  let source: Catalog | undefined;
  let copy: Catalog | undefined;
  const umask = process.umask(0o077);
  try {
    mkdirSync(dest, { recursive: true, mode: 0o700 });
    chmodSync(dest, 0o700); // an empty folder made beforehand keeps its own mode otherwise
    source = Catalog.open(new DataLayout(config.dataDir), { readOnly: true });
    const copied = new DataLayout(dest);
    await source.backup(copied);
    copy = Catalog.open(copied, { readOnly: true });
    const stored = copy.packages.count({ stored: true });
    const all = copy.packages.count();
    const users = copy.users.list().length;
    io.stdout.write(
      `catalog copied to ${join(copied.catalog, 'data.mdb')}: schema ${copy.schemaVersion}, ${all} packages (${stored} stored), ${users} users\n`,
    );
    return 0;
  } catch (err) {
    io.stderr.write(`preservd: backup failed: ${(err as Error).message}\n`);
    return 1;
  } finally {
    await copy?.close();
    await source?.close();
    process.umask(umask);
  }
}
