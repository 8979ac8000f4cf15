/**
 * `preservd status`: what the running daemon is doing, from its API: queue counts by status
 * (GET /v1/queue) and the latest audit (GET /v1/audits), with its progress while it runs; with
 * `audit.everyDays`, the packages overdue for a fixity check; and, with replicas configured, one
 * line per replica (both from the catalog, read-only, as `preservd replicas` does).
 * Exit 0, or 2 when the daemon cannot be asked (down, bad token).
 */
import { formatBytes } from '../format.js';
import { Catalog } from '../catalog/catalog.js';
import type { Config } from '../config/config.js';
import { DataLayout } from '../storage/layout.js';
import { formatClock, formatDuration, isComplete, type AuditCommandIO, type AuditSummary } from './audit.js';
import { DaemonClient, DaemonError } from './daemon-client.js';
import { replicaLines } from './replicas.js';

export async function runStatus(argv: string[], io: AuditCommandIO, config: Config): Promise<number> {
  if (argv.length > 0) {
    io.stderr.write(`preservd status: unknown argument ${argv[0]}\nusage: preservd status\n`);
    return 2;
  }
  const layout = new DataLayout(config.dataDir);
  try {
    const client = DaemonClient.fromConfig(config, layout, io.env ?? process.env);
    const [queue, audits] = await Promise.all([client.get('/v1/queue'), client.get('/v1/audits')]);
    const counts = { PENDING: 0, DONE: 0, FAILED: 0 };
    for (const item of Array.isArray(queue.body) ? queue.body : []) {
      const status = (item as { status?: string }).status;
      if (status === 'PENDING' || status === 'DONE' || status === 'FAILED') counts[status]++;
    }
    io.stdout.write(`preservd at ${client.baseUrl}\n`);
    io.stdout.write(`queue: ${counts.PENDING} pending, ${counts.DONE} done, ${counts.FAILED} failed\n`);
    const list = Array.isArray(audits.body) ? (audits.body as AuditSummary[]) : [];
    const latest = list.at(-1);
    io.stdout.write(`${latest === undefined ? 'audits: none yet' : describeAudit(latest, Date.now())}\n`);
    if (config.audit.everyDays !== undefined)
      io.stdout.write(`${await describeContinuous(layout, config.audit.everyDays)}\n`);
    if (config.replicas.length > 0) {
      const catalog = Catalog.open(layout, { readOnly: true });
      try {
        io.stdout.write(replicaLines(catalog, config, Date.now()).lines.join('\n') + '\n');
      } finally {
        await catalog.close();
      }
    }
    return 0;
  } catch (err) {
    if (err instanceof DaemonError) {
      io.stderr.write(`preservd status: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
}

/**
 * One line about continuous audits, from the catalog itself (read-only, safe while the daemon
 * writes): how many stored packages are overdue, counted in the verification order's index.
 */
async function describeContinuous(layout: DataLayout, everyDays: number): Promise<string> {
  let catalog: Catalog | undefined;
  try {
    // Loaded here: the command pays for LMDB only when it needs it.
    const { Catalog } = await import('../catalog/catalog.js');
    catalog = Catalog.open(layout, { readOnly: true });
    const overdue = catalog.fixity.countVerifiedBefore(Date.now() - everyDays * 86_400_000);
    const stalest = catalog.fixity.stalest(1)[0];
    const since =
      stalest === undefined ? '' : `, least recently verified ${new Date(stalest.verifiedAt).toISOString()}`;
    return `continuous audits: every ${everyDays} days: ${overdue} of ${catalog.fixity.count()} stored packages overdue${since}`;
  } catch (err) {
    return `continuous audits: every ${everyDays} days (the catalog could not be read: ${(err as Error).message})`;
  } finally {
    await catalog?.close();
  }
}

/** One line about an audit: its outcome, or its progress with the average rate and an ETA. */
export function describeAudit(a: AuditSummary, now: number): string {
  const done = a.successes + a.failures;
  const outcome = `${a.successes} passed, ${a.failures} failed`;
  const started = Date.parse(a.created_at);
  if (isComplete(a)) {
    const finished = a.finished_at ? Date.parse(a.finished_at) : Date.parse(a.updated_at);
    const bytes = a.bytes === undefined ? '' : `, ${formatBytes(a.bytes)}`;
    return `last audit ${a.id}: finished ${new Date(finished).toISOString()}: ${a.packages} packages, ${outcome}${bytes} in ${formatDuration((finished - started) / 1000)}`;
  }
  let bytes = '';
  if (a.bytes !== undefined && a.total_bytes !== undefined) {
    const seconds = Math.max(0.001, (now - started) / 1000);
    const rate = a.bytes / seconds;
    const eta = rate > 0 ? `, ETA ${formatClock((a.total_bytes - a.bytes) / rate)}` : '';
    bytes = `, ${formatBytes(a.bytes)} of ${formatBytes(a.total_bytes)} (average ${(rate / 1e6).toFixed(1)} MB/s${eta})`;
  }
  return `audit ${a.id}: in progress since ${a.created_at} (by ${a.user}): ${done} of ${a.packages} packages checked (${outcome})${bytes}`;
}
