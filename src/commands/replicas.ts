/**
 * `preservd replicas`: per configured replica, the stored packages whose copy there is verified,
 * pending and failed, the bytes verified, and since when the oldest copy not yet verified has
 * been owed; then the failed copies with what is wrong (at most FAILED_SHOWN). Exit 0 when every
 * stored package has a verified copy on every replica (or none is configured), 1 when any is
 * short of one, 2 when the catalog cannot be read.
 *
 * It reads the catalog (read-only, safe while the daemon runs), so it works with the daemon down
 * too, e.g. from a monitoring check. `replicaLines` is also used by `preservd status`.
 */
import { formatBytes } from '../format.js';
import { Catalog } from '../catalog/catalog.js';
import type { Config } from '../config/config.js';
import { DataLayout } from '../storage/layout.js';
import { summarizeReplicas } from '../replicas/index.js';
import { formatDuration, type AuditCommandIO } from './audit.js';

const FAILED_SHOWN = 20;

export async function runReplicas(argv: string[], io: AuditCommandIO, config: Config): Promise<number> {
  if (argv.length > 0) {
    io.stderr.write(`preservd replicas: unknown argument ${argv[0]}\nusage: preservd replicas\n`);
    return 2;
  }
  if (config.replicas.length === 0) {
    io.stdout.write('no replicas are configured (see docs/replicas.md)\n');
    return 0;
  }
  let catalog: Catalog;
  try {
    catalog = Catalog.open(new DataLayout(config.dataDir), { readOnly: true });
  } catch (err) {
    io.stderr.write(
      `preservd replicas: cannot read the catalog in ${config.dataDir}: ${(err as Error).message}\n`,
    );
    return 2;
  }
  try {
    const { lines, short } = replicaLines(catalog, config, Date.now());
    io.stdout.write(lines.join('\n') + '\n');
    const failed = [...catalog.replication.unverified()].filter((c) => c.status === 'failed');
    for (const copy of failed.slice(0, FAILED_SHOWN))
      io.stdout.write(`  failed: ${copy.bagId} on ${copy.replica}: ${copy.error ?? 'failed'}\n`);
    if (failed.length > FAILED_SHOWN)
      io.stdout.write(`  … and ${failed.length - FAILED_SHOWN} more failed copies\n`);
    return short ? 1 : 0;
  } finally {
    await catalog.close();
  }
}

/** One line per replica; `short` when any stored package lacks a verified copy on one. */
export function replicaLines(
  catalog: Catalog,
  config: Pick<Config, 'replicas'>,
  now: number,
): { lines: string[]; short: boolean } {
  const stored = catalog.packages.count({ stored: true });
  let short = false;
  const lines = summarizeReplicas(
    catalog,
    config.replicas.map((r) => r.name),
  ).map((r) => {
    const replica = config.replicas.find((c) => c.name === r.name)!;
    const where =
      replica.kind === 's3' ? `s3, bucket ${replica.bucket} at ${replica.endpoint}` : `dir, ${replica.path}`;
    if (r.verified < stored) short = true;
    const oldest =
      r.oldestUnverifiedAt === undefined
        ? ''
        : `; oldest not verified owed for ${formatDuration((now - r.oldestUnverifiedAt) / 1000)}`;
    return `replica ${r.name} (${where}): ${r.verified} of ${stored} packages verified (${formatBytes(r.verifiedBytes)}), ${r.pending} pending, ${r.failed} failed${oldest}`;
  });
  return { lines, short };
}
