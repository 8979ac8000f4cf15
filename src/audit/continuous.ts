/**
 * Continuous audits (`audit.everyDays`), after sul-dlss's preservation_catalog and APTrust:
 * instead of (or besides) a full sweep, the daemon checks a steady share of the stored packages
 * all the time, the least recently verified first, so that each is verified at least once per
 * period and the load stays flat.
 *
 * The share accrues with time: `packages / period` per millisecond, kept in the catalog with
 * the time it was last brought up to date, so a restart neither loses it nor checks anything
 * twice; it never exceeds one period's worth. Each round checks the stalest packages while the
 * share lasts, and any that are overdue (last verified more than a period ago) even when it does
 * not. Each check is one `fixity check` event, recorded with the package's new verification
 * date in one transaction. Reads go through the fixity pool at audit priority, so they share
 * `audit.rateLimitMBps` with full audits; while a full audit runs, rounds wait for it.
 *
 * It does not run full audits (runner.ts) and knows no HTTP.
 */
import type { Catalog } from '../catalog/catalog.js';
import type { Config } from '../config/config.js';
import type { Logger } from '../logger.js';
import { ServiceLoop, type Service } from '../service/service.js';
import type { Storage } from '../storage/storage.js';
import type { AuditedReplicas } from './copies.js';
import { findingsDetail, type Finding } from './findings.js';
import { storedPackageFindings, type StoredCheck } from './stored.js';
import type { PackageHasher } from './verify.js';

const DAY_MS = 86_400_000;
/** Packages read from the schedule per round: memory stays bounded however many are due. */
const ROUND_SIZE = 500;
/** How often the daemon looks for due packages. */
const TICK_MS = 10 * 60_000;
/** The executor of continuous checks' events: the daemon itself, not a user. */
export const CONTINUOUS_EXECUTOR = 'preservd';

export interface ContinuousAuditOptions {
  catalog: Catalog;
  storage: Storage;
  hasher: PackageHasher;
  config: Pick<Config, 'audit'>;
  logger: Logger;
  /** The clock (injected by tests). */
  now?: () => number;
  /** The replicas whose copies each check also reads back, as full audits do (copies.ts). */
  replicas?: AuditedReplicas | undefined;
  /** Whether a full audit is running: rounds wait for it. */
  fullAuditRunning?: () => boolean;
  tickMs?: number;
}

export class ContinuousAudit implements Service {
  private readonly catalog: Catalog;
  /** What a package's check reads with. */
  private readonly stored: StoredCheck;
  private readonly config: Pick<Config, 'audit'>;
  private readonly logger: Logger;
  private readonly now: () => number;
  private readonly fullAuditRunning: () => boolean;
  private readonly replicas: AuditedReplicas | undefined;
  private readonly tickMs: number;
  /** One pass is one round; the next is due a tick after it ended. */
  private readonly loop: ServiceLoop<number>;

  constructor(opts: ContinuousAuditOptions) {
    this.catalog = opts.catalog;
    this.replicas = opts.replicas;
    this.stored = {
      catalog: opts.catalog,
      storage: opts.storage,
      hasher: opts.hasher,
      replicas: opts.replicas,
    };
    this.config = opts.config;
    this.logger = opts.logger;
    this.now = opts.now ?? Date.now;
    this.fullAuditRunning = opts.fullAuditRunning ?? (() => false);
    this.tickMs = opts.tickMs ?? TICK_MS;
    this.loop = new ServiceLoop(
      'continuous audits',
      (signal) => this.round(signal),
      (err: unknown) => this.logger.error({ err }, 'continuous audit round failed; trying again at the next'),
    );
  }

  /** The period in milliseconds, or undefined when continuous audits are off. */
  get periodMs(): number | undefined {
    const days = this.config.audit.everyDays;
    return days === undefined ? undefined : days * DAY_MS;
  }

  /** Runs a round now and then every tick, until stop(). */
  start(signal?: AbortSignal): void {
    if (this.periodMs === undefined) return;
    this.loop.start(signal);
  }

  /** Stops: a check in flight is abandoned (not recorded); its package stays due. */
  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** Stored packages last verified more than a period ago (0 when continuous audits are off). */
  overdue(): number {
    const period = this.periodMs;
    return period === undefined ? 0 : this.catalog.fixity.countVerifiedBefore(this.now() - period);
  }

  /** Checks what is due now; resolves with how many packages were checked. One round at a time. */
  runOnce(): Promise<number> {
    return this.loop.runPass();
  }

  /** One round, the next one set for a tick later, whether this one finished or failed. */
  private async round(signal: AbortSignal): Promise<number> {
    try {
      return await this.checkDue(signal);
    } finally {
      this.loop.wakeIn(this.tickMs);
    }
  }

  private async checkDue(signal: AbortSignal): Promise<number> {
    const period = this.periodMs;
    if (period === undefined || this.fullAuditRunning()) return 0;
    let checked = 0;
    for (;;) {
      const now = this.now();
      const { fixity } = this.catalog;
      const total = fixity.count();
      const saved = fixity.schedule();
      const credit = Math.min(
        total,
        (saved?.credit ?? 0) + (Math.max(0, now - (saved?.at ?? now)) * total) / period,
      );
      let left = credit;
      const due = fixity.stalest(ROUND_SIZE).filter((p) => {
        if (left >= 1 || p.verifiedAt <= now - period) {
          left = Math.max(0, left - 1);
          return true;
        }
        return false;
      });
      // The share accrued so far is spent on these; what is left carries over.
      fixity.saveSchedule({ at: now, credit: left });
      for (const p of due) {
        if (signal.aborted || this.fullAuditRunning()) return checked;
        await this.check(p.bagId, signal);
        checked++;
      }
      if (due.length < ROUND_SIZE) return checked;
    }
  }

  /** Verifies one package and records the outcome; an abandoned check records nothing. */
  private async check(bagId: string, signal: AbortSignal): Promise<void> {
    const pkg = this.catalog.packages.get(bagId);
    let findings: Finding[];
    if (pkg?.storagePath === undefined) findings = [{ code: 'package-not-in-catalog' }];
    else {
      try {
        findings = await storedPackageFindings(this.stored, bagId, this.catalog.files.list(bagId), {
          algorithms: this.config.audit.algorithms,
          signal,
        });
      } catch (err) {
        if (signal.aborted) return;
        throw err;
      }
      if (signal.aborted) return;
    }
    // Deaccessioned before or during the check: out of the schedule, and its removal is no damage.
    if (this.catalog.packages.get(bagId)?.deaccessioned !== undefined) return;
    const outcome = findings.length === 0 ? 'success' : 'failure';
    const date = this.now();
    const detail = `continuous audit (every ${this.config.audit.everyDays} days)${outcome === 'failure' ? `:\n${findingsDetail(findings)}` : ''}`;
    this.catalog.transaction(() => {
      this.catalog.events.add({
        bagId,
        type: 'fixity check',
        executor: CONTINUOUS_EXECUTOR,
        outcome,
        detail,
        date,
      });
      this.catalog.fixity.checked(bagId, date, outcome);
    });
    if (outcome === 'failure' && this.config.audit.repair === 'auto') this.replicas?.repair(bagId);
    if (outcome === 'failure')
      this.logger.warn(
        { bagId, findings: findings.length },
        `continuous fixity check of ${bagId} failed: ${findingsDetail(findings.slice(0, 3)).replaceAll('\n', '; ')}`,
      );
  }
}
