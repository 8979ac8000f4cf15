/**
 * `preservd audit [--wait]`: asks the running daemon for a fixity audit (POST /v1/audits; an
 * audit already in progress is joined, not duplicated) and prints its id. With `--wait` it
 * follows the audit until every package is checked: on a terminal a one-line progress bar
 * redrawn in place, otherwise a plain line every ~10 s (journal, cron mail).
 *
 * Exit codes: 0 every package passed, 1 some package failed (they are listed with what was
 * wrong), 2 the audit could not be run or followed (daemon down, bad token, bad arguments).
 */
import { formatBytes } from '../format.js';
import type { Config } from '../config/config.js';
import { DataLayout } from '../storage/layout.js';
import { DaemonClient, DaemonError } from './daemon-client.js';
import type { CommandIO } from './users.js';

export interface AuditCommandIO extends CommandIO {
  /** Defaults to process.env. */
  env?: NodeJS.ProcessEnv;
}

export interface AuditCommandOptions {
  /** Between polls of the audit; default 1 s. */
  pollMs?: number;
  /** Between plain progress lines when stdout is not a terminal; default 10 s. */
  plainEveryMs?: number;
  /** How long --wait keeps trying while the daemon cannot be reached (it may be restarting); default 120 s. */
  unreachableGraceMs?: number;
}

/** An audit as GET /v1/audits lists it. */
export interface AuditSummary {
  id: number;
  user: string;
  packages: number;
  successes: number;
  failures: number;
  bytes?: number;
  total_bytes?: number;
  finished_at?: string | null;
  created_at: string;
  updated_at: string;
}

interface AuditEventView {
  bag_id: string;
  external_id: string | null;
  detail: string | null;
}

const USAGE = 'usage: preservd audit [--wait]\n';

export async function runAudit(
  argv: string[],
  io: AuditCommandIO,
  config: Config,
  opts: AuditCommandOptions = {},
): Promise<number> {
  const unknown = argv.filter((a) => a !== '--wait');
  if (unknown.length > 0) {
    io.stderr.write(`preservd audit: unknown argument ${unknown[0]}\n${USAGE}`);
    return 2;
  }
  const wait = argv.includes('--wait');
  try {
    const client = DaemonClient.fromConfig(config, new DataLayout(config.dataDir), io.env ?? process.env);
    const { audit, created } = await requestAudit(client);
    io.stdout.write(
      created
        ? `audit ${audit.id} started: ${audit.packages} packages${audit.total_bytes === undefined ? '' : `, ${formatBytes(audit.total_bytes)}`}\n`
        : `audit ${audit.id} is already in progress (started ${audit.created_at} by ${audit.user}): ${audit.successes + audit.failures} of ${audit.packages} packages checked\n`,
    );
    if (!wait) return 0;
    const done = await follow(client, audit, io, opts);
    return report(client, done, io);
  } catch (err) {
    if (err instanceof DaemonError) {
      io.stderr.write(`preservd audit: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
}

/** POST /v1/audits: 201 with the new audit, or 303 to the one in progress. */
async function requestAudit(client: DaemonClient): Promise<{ audit: AuditSummary; created: boolean }> {
  const res = await client.post('/v1/audits');
  const id = /\/v1\/audits\/(\d+)$/.exec(res.location ?? '')?.[1];
  if ((res.status !== 201 && res.status !== 303) || id === undefined)
    throw new DaemonError(
      `unexpected answer to POST /v1/audits: ${res.status}${res.location ? ` (Location ${res.location})` : ''}`,
    );
  if (res.status === 201 && isAuditSummary(res.body)) return { audit: res.body, created: true };
  return { audit: await fetchSummary(client, Number(id)), created: res.status === 201 };
}

/** The summary of one audit from the list (the single-audit view carries every event: too big to poll). */
async function fetchSummary(client: DaemonClient, id: number): Promise<AuditSummary> {
  const res = await client.get('/v1/audits');
  const found = Array.isArray(res.body)
    ? res.body.find((a: unknown) => isAuditSummary(a) && a.id === id)
    : undefined;
  if (found === undefined) throw new DaemonError(`audit ${id} is not in GET /v1/audits`);
  return found as AuditSummary;
}

function isAuditSummary(v: unknown): v is AuditSummary {
  const a = v as Partial<AuditSummary> | null;
  return (
    typeof a === 'object' &&
    a !== null &&
    typeof a.id === 'number' &&
    typeof a.packages === 'number' &&
    typeof a.successes === 'number' &&
    typeof a.failures === 'number'
  );
}

export const isComplete = (a: AuditSummary): boolean => a.successes + a.failures >= a.packages;

/** Polls until the audit is complete, drawing progress; tolerates the daemon restarting for a while. */
async function follow(
  client: DaemonClient,
  first: AuditSummary,
  io: AuditCommandIO,
  opts: AuditCommandOptions,
): Promise<AuditSummary> {
  const pollMs = opts.pollMs ?? 1000;
  const plainEveryMs = opts.plainEveryMs ?? 10_000;
  const graceMs = opts.unreachableGraceMs ?? 120_000;
  const tty = (io.stdout as { isTTY?: boolean }).isTTY === true;
  const meter = new RateMeter();
  let audit = first;
  let lastPlain = 0;
  let unreachableSince: number | undefined;
  let drawn = false;
  for (;;) {
    meter.add(Date.now(), audit.bytes ?? 0);
    if (isComplete(audit)) break;
    if (tty) {
      const columns = (io.stdout as { columns?: number }).columns ?? 80;
      io.stdout.write(`\r${progressBar(audit, meter.rate(), columns)}\x1b[K`);
      drawn = true;
    } else if (Date.now() - lastPlain >= plainEveryMs) {
      io.stdout.write(`${progressLine(audit, meter.rate())}\n`);
      lastPlain = Date.now();
    }
    await sleep(pollMs);
    try {
      audit = await fetchSummary(client, audit.id);
      if (unreachableSince !== undefined)
        io.stderr.write(
          `${drawn ? '\n' : ''}preservd audit: the daemon answers again; still following audit ${audit.id}\n`,
        );
      unreachableSince = undefined;
    } catch (err) {
      if (!(err instanceof DaemonError) || !err.unreachable) throw err;
      const now = Date.now();
      if (unreachableSince === undefined) {
        unreachableSince = now;
        io.stderr.write(
          `${drawn ? '\n' : ''}preservd audit: ${err.message}; waiting up to ${Math.round(graceMs / 1000)} s for it to come back (the audit resumes after a restart)\n`,
        );
        drawn = false;
      } else if (now - unreachableSince > graceMs) {
        throw new DaemonError(
          `${err.message}; gave up following audit ${audit.id} after ${Math.round(graceMs / 1000)} s`,
        );
      }
    }
  }
  if (drawn)
    io.stdout.write(
      `\r${progressBar(audit, meter.rate(), (io.stdout as { columns?: number }).columns ?? 80)}\x1b[K\n`,
    );
  return audit;
}

/** Prints the outcome; lists the failed packages with their details. */
async function report(client: DaemonClient, audit: AuditSummary, io: AuditCommandIO): Promise<number> {
  const seconds = audit.finished_at
    ? (Date.parse(audit.finished_at) - Date.parse(audit.created_at)) / 1000
    : undefined;
  io.stdout.write(
    `audit ${audit.id} finished: ${audit.packages} packages, ${audit.successes} passed, ${audit.failures} failed` +
      `${audit.bytes === undefined ? '' : `, ${formatBytes(audit.bytes)}`}${seconds === undefined ? '' : ` in ${formatDuration(seconds)}`}\n`,
  );
  if (audit.failures === 0) return 0;
  const res = await client.get(`/v1/audits/${audit.id}`);
  const failures = (res.body as { failures?: AuditEventView[] } | undefined)?.failures ?? [];
  io.stdout.write('failed packages:\n');
  for (const f of failures) {
    io.stdout.write(`  ${f.bag_id}${f.external_id ? ` (${f.external_id})` : ''}\n`);
    for (const line of (f.detail ?? 'no detail recorded').split('\n')) io.stdout.write(`    ${line}\n`);
  }
  return 1;
}

/** Bytes per second over the last ~30 s of samples. */
export class RateMeter {
  private samples: Array<[number, number]> = [];
  add(time: number, bytes: number): void {
    this.samples.push([time, bytes]);
    while (this.samples.length > 2 && time - this.samples[0]![0] > 30_000) this.samples.shift();
  }
  rate(): number {
    if (this.samples.length < 2) return 0;
    const [t0, b0] = this.samples[0]!;
    const [t1, b1] = this.samples.at(-1)!;
    return t1 > t0 ? ((b1 - b0) * 1000) / (t1 - t0) : 0;
  }
}

function etaText(audit: AuditSummary, rate: number): string {
  if (audit.total_bytes === undefined || audit.bytes === undefined || rate <= 0) return 'ETA --:--';
  return `ETA ${formatClock(Math.max(0, audit.total_bytes - audit.bytes) / rate)}`;
}

/** `[=====>      ]  120/200 packages  640 MB/1.07 GB  85.3 MB/s  ETA 0:07`, fitted to `columns`. */
export function progressBar(audit: AuditSummary, rate: number, columns: number): string {
  const done = audit.successes + audit.failures;
  const fraction = audit.total_bytes
    ? (audit.bytes ?? 0) / audit.total_bytes
    : audit.packages
      ? done / audit.packages
      : 1;
  const parts = [
    `${done}/${audit.packages} packages${audit.failures > 0 ? ` (${audit.failures} failed)` : ''}`,
    ...(audit.total_bytes === undefined
      ? []
      : [`${formatBytes(audit.bytes ?? 0)}/${formatBytes(audit.total_bytes)}`]),
    `${(rate / 1e6).toFixed(1)} MB/s`,
    etaText(audit, rate),
  ];
  const text = parts.join('  ');
  const width = Math.min(40, columns - text.length - 5);
  if (width < 10) return text.slice(0, Math.max(0, columns - 1));
  const filled = Math.min(width, Math.floor(Math.min(1, Math.max(0, fraction)) * width));
  const bar = filled >= width ? '='.repeat(width) : `${'='.repeat(filled)}>${' '.repeat(width - filled - 1)}`;
  return `[${bar}]  ${text}`;
}

/** `audit 3: 120/200 packages checked (1 failed), 640 MB of 1.07 GB, 85.3 MB/s, ETA 0:07` */
export function progressLine(audit: AuditSummary, rate: number): string {
  const done = audit.successes + audit.failures;
  const bytes =
    audit.total_bytes === undefined
      ? ''
      : `, ${formatBytes(audit.bytes ?? 0)} of ${formatBytes(audit.total_bytes)}`;
  return `audit ${audit.id}: ${done}/${audit.packages} packages checked${audit.failures > 0 ? ` (${audit.failures} failed)` : ''}${bytes}, ${(rate / 1e6).toFixed(1)} MB/s, ${etaText(audit, rate)}`;
}

/** h:mm:ss or m:ss */
export function formatClock(seconds: number): string {
  const s = Math.round(seconds);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const ss = String(s % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${ss}` : `${m}:${ss}`;
}

export function formatDuration(seconds: number): string {
  return seconds < 60 ? `${seconds.toFixed(1)} s` : formatClock(seconds);
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
