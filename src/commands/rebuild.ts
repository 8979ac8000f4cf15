/**
 * `preservd rebuild --from NAME [--no-verify]` (CLI.md, STORAGE.md): a new catalog from one storage
 * root, `primary` (`<dataDir>/storage`) or a configured replica, read through the replica target
 * of its kind (a folder, or S3). Exit 0 all rebuilt, 1 objects skipped (each named with why), 2
 * could not run (and nothing changed when it refused). Run again after a kill, it goes on.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Catalog } from '../catalog/catalog.js';
import type { Config } from '../config/config.js';
import { targetsFor, type ReplicaTarget } from '../replicas/index.js';
import { DataLayout } from '../storage/layout.js';
import { rebuildCatalog, RebuildRefused, type RebuildProgress } from '../storage/rebuild.js';
import { RootReader } from '../storage/root-reader.js';
import type { CommandIO } from './users.js';

const USAGE =
  'usage: preservd rebuild --from NAME [--no-verify]   (NAME: primary, or a replica of the configuration)\n';
/** Progress is redrawn at most this often on a terminal. */
const PROGRESS_MS = 250;

export async function runRebuild(argv: string[], io: CommandIO, config: Config): Promise<number> {
  const args = parse(argv);
  if (args === undefined) {
    io.stderr.write(USAGE);
    return 2;
  }
  const layout = new DataLayout(config.dataDir);
  const target = await targetOf(args.from, config, layout);
  if (typeof target === 'string') {
    io.stderr.write(`preservd: ${target}\n`);
    return 2;
  }
  const refusal = await refusalOf(layout, args.from);
  if (refusal !== undefined) {
    target.close();
    io.stderr.write(`preservd: rebuild refused, nothing changed: ${refusal}\n`);
    return 2;
  }
  await layout.ensure();
  const catalog = Catalog.open(layout);
  const progress = progressWriter(io.stderr);
  try {
    const result = await rebuildCatalog(new RootReader(target), catalog, {
      from: args.from,
      verify: args.verify,
      onProgress: progress.update,
      copies: ['primary', ...config.replicas.map((r) => r.name)],
    });
    progress.end();
    for (const { object, why } of result.skipped) io.stderr.write(`skipped ${object}: ${why}\n`);
    io.stdout.write(
      `rebuilt ${result.rebuilt + result.resumed} packages from ${args.from} (${result.resumed} by an earlier run), ` +
        `${result.skipped.length} skipped, ${result.users} users, ${result.grants} grants, ${result.bytes} bytes read` +
        `${args.verify ? ' and verified' : ''}; users have no tokens: issue them with preservd token issue NAME\n`,
    );
    return result.skipped.length > 0 ? 1 : 0;
  } catch (err) {
    progress.end();
    const why =
      err instanceof RebuildRefused ? err.message : `${(err as Error).message} (run it again to go on)`;
    io.stderr.write(`preservd: rebuild failed: ${why}\n`);
    return 2;
  } finally {
    target.close();
    await catalog.close();
  }
}

function parse(argv: string[]): { from: string; verify: boolean } | undefined {
  let from: string | undefined;
  let verify = true;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--no-verify') verify = false;
    else if (arg === '--from' && argv[i + 1] !== undefined && from === undefined) from = argv[++i];
    else if (arg.startsWith('--from=') && from === undefined) from = arg.slice('--from='.length);
    else return undefined;
  }
  return from === undefined || from === '' ? undefined : { from, verify };
}

/** The target to read: the primary's folder, or the configured replica of that name. */
async function targetOf(from: string, config: Config, layout: DataLayout): Promise<ReplicaTarget | string> {
  if (from === 'primary')
    return (await targetsFor([{ name: 'primary', kind: 'dir', path: layout.storage }]))[0]!;
  const replica = config.replicas.find((r) => r.name === from);
  if (replica === undefined)
    return `no storage root named "${from}": primary, or a replica of the configuration (${config.replicas.map((r) => r.name).join(', ') || 'none configured'})`;
  return (await targetsFor([replica]))[0]!;
}

/**
 * Why the rebuild must not run, read without writing: another process has the catalog open (the
 * daemon), or the catalog holds something and is not a rebuild from `from` left half done.
 */
async function refusalOf(layout: DataLayout, from: string): Promise<string | undefined> {
  if (!existsSync(join(layout.catalog, 'data.mdb'))) return undefined;
  const others = Catalog.otherProcesses(layout);
  if (others.length > 0)
    return `the catalog is open in another process (pid ${others.join(', ')}): stop the daemon first`;
  let catalog: Catalog;
  try {
    catalog = Catalog.open(layout, { readOnly: true });
  } catch (err) {
    return `the catalog in ${layout.catalog} cannot be read as an empty one (${(err as Error).message})`;
  }
  try {
    const marker = catalog.records.rebuild();
    if (marker !== undefined)
      return marker.from === from
        ? undefined
        : `the catalog is half rebuilt from ${marker.from}: finish it with --from ${marker.from}`;
    const packages = catalog.packages.count();
    const users = catalog.users.list().length;
    if (packages > 0 || users > 0 || catalog.queue.counts().total > 0)
      return `the catalog in ${layout.catalog} is not empty (${packages} packages, ${users} users): a rebuild writes a new catalog; move that one away first`;
    return undefined;
  } finally {
    await catalog.close();
  }
}

/** On a terminal: one line redrawn as objects are done. Elsewhere: nothing (the summary says it all). */
function progressWriter(out: NodeJS.WritableStream): {
  update: (p: RebuildProgress) => void;
  end: () => void;
} {
  const tty = (out as NodeJS.WriteStream).isTTY === true;
  let last = 0;
  let drawn = false;
  return {
    update: (p) => {
      const now = Date.now();
      if (!tty || (now - last < PROGRESS_MS && p.done < p.objects)) return;
      last = now;
      drawn = true;
      out.write(`\rrebuilding: ${p.done}/${p.objects} objects, ${(p.bytes / 1e6).toFixed(1)} MB read\x1b[K`);
    },
    end: () => {
      if (drawn) out.write('\n');
    },
  };
}
