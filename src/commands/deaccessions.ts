/**
 * `preservd deaccessions` (CLI.md): every deaccession request, oldest first, one per line: id,
 * bag_id, status, who asked, who decided, when asked, what is left to remove of an approved one,
 * and the reason. Deciding stays an API or web action of a second admin. It reads the catalog
 * read-only, so it works beside the daemon and without it. Exit 0, or 2 when the catalog cannot
 * be read.
 */
import { Catalog } from '../catalog/catalog.js';
import type { AbandonedRemoval, Removal } from '../catalog/deaccessions.js';
import type { Config } from '../config/config.js';
import { DataLayout } from '../storage/layout.js';
import type { CommandIO } from './users.js';

export async function runDeaccessions(argv: string[], io: CommandIO, config: Config): Promise<number> {
  if (argv.length > 0) {
    io.stderr.write(`preservd deaccessions: unknown argument ${argv[0]}\nusage: preservd deaccessions\n`);
    return 2;
  }
  let catalog: Catalog;
  try {
    catalog = Catalog.open(new DataLayout(config.dataDir), { readOnly: true });
  } catch (err) {
    io.stderr.write(
      `preservd deaccessions: cannot read the catalog in ${config.dataDir}: ${(err as Error).message}\n`,
    );
    return 2;
  }
  try {
    const lines = ['id\tbag_id\tstatus\trequested_by\tdecided_by\trequested_at\tcontent\treason'];
    for (let after = 0; ;) {
      const page = catalog.deaccessions.page(after, 256, () => true);
      for (const d of page.items) {
        const content =
          d.status === 'approved'
            ? removalState(
                catalog.deaccessions.removalsOf(d.bagId),
                catalog.deaccessions.abandonedOf(d.bagId),
              )
            : 'kept';
        lines.push(
          [
            d.id,
            d.bagId,
            d.status,
            d.requestedBy,
            d.decidedBy ?? '-',
            new Date(d.requestedAt).toISOString(),
            content,
            d.reason.replace(/\s+/g, ' '),
          ].join('\t'),
        );
      }
      if (page.next === undefined) break;
      after = page.next;
    }
    io.stdout.write(`${lines.join('\n')}\n`);
    return 0;
  } finally {
    await catalog.close();
  }
}

/**
 * What is left of an approved deaccession's content: removed, or the copies still holding it,
 * and those whose removal was given up (never called removed).
 */
function removalState(removals: readonly Removal[], abandoned: readonly AbandonedRemoval[]): string {
  const left = [
    ...removals.map((r) =>
      r.retainedUntil === undefined
        ? `removing from ${r.copy}`
        : `${r.copy} retained until ${new Date(r.retainedUntil).toISOString()}`,
    ),
    ...abandoned.map((a) => `${a.copy} unknown (${a.reason})`),
  ];
  return left.length === 0 ? 'removed' : left.join(', ');
}
