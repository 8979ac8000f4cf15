/**
 * Recording finished fixity checks in the catalog: per package ONE `fixity check` event, its
 * count and its removal from the audit's to-do set (`catalog.audits.record`), all in one
 * transaction. Checks finishing within RECORD_BATCH_MS of each other share that transaction.
 * Each failed check is logged with its first findings.
 *
 * It does not verify packages, decide what to check next or announce a finished audit: it hands
 * each recorded check to `onRecorded`, and the runner does the rest. It never throws: a failed
 * commit is kept in `failure` and the runner pauses the audit; those packages stay to do.
 */
import type { Catalog } from '../catalog/catalog.js';
import type { Audit, PreservationEvent } from '../catalog/types.js';
import { failpoint } from '../failpoints.js';
import type { Logger } from '../logger.js';
import type { ProgressTracker } from './progress.js';
import { findingsDetail, type Finding } from './findings.js';

export interface PackageChecked {
  auditId: number;
  bagId: string;
  outcome: 'success' | 'failure';
  bytes: number;
  findings: Finding[];
}

/**
 * Results that finish within this window are recorded in one catalog transaction: each commit
 * is an fsync on the event-loop thread, which otherwise starves the pool of jobs when packages
 * are small. Each package's event, count and to-do removal stay atomic; a crash loses at most
 * this window's checks, which are simply done again.
 */
const RECORD_BATCH_MS = 50;

export interface RecorderOptions {
  catalog: Catalog;
  logger: Logger;
  progress: ProgressTracker;
  /** Told, in commit order, of each check recorded by this process, with the audit's counts after it. */
  onRecorded: (checked: PackageChecked, audit: Audit) => void;
}

export class CheckRecorder {
  private readonly catalog: Catalog;
  private readonly logger: Logger;
  private readonly progress: ProgressTracker;
  private readonly onRecorded: RecorderOptions['onRecorded'];
  /** Checks finished but not yet recorded (see RECORD_BATCH_MS). */
  private unrecorded: PackageChecked[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** Set when recording failed: the audit pauses. */
  failure: { reason: unknown } | undefined;

  constructor(opts: RecorderOptions) {
    this.catalog = opts.catalog;
    this.logger = opts.logger;
    this.progress = opts.progress;
    this.onRecorded = opts.onRecorded;
  }

  /** Records `checked` (as done by `user`) with whatever else finishes within RECORD_BATCH_MS. */
  recordSoon(checked: PackageChecked, user: string): void {
    this.unrecorded.push(checked);
    this.timer ??= setTimeout(() => this.flush(user), RECORD_BATCH_MS);
  }

  /** Records every finished check now, in one transaction. Never throws (see `failure`). */
  flush(user: string): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.unrecorded.splice(0);
    if (batch.length === 0) return;
    let results: Array<{
      checked: PackageChecked;
      detail: string | null;
      recorded: ReturnType<Catalog['audits']['record']>;
    }>;
    try {
      results = this.catalog.transaction(() =>
        batch.map((checked) => {
          const { auditId, bagId, outcome } = checked;
          const detail = outcome === 'success' ? null : findingsDetail(checked.findings);
          const recorded = this.catalog.audits.record(auditId, bagId, (): PreservationEvent =>
            this.catalog.events.add({
              bagId,
              type: 'fixity check',
              executor: user,
              outcome,
              detail,
              auditId,
            }),
          );
          if (recorded !== undefined) this.catalog.fixity.checked(bagId, recorded.event.date, outcome);
          return { checked, detail, recorded };
        }),
      );
    } catch (reason) {
      for (const { bagId } of batch) this.progress.forget(bagId);
      this.failure ??= { reason };
      return;
    }
    failpoint('audit:after-record');
    for (const { checked, detail, recorded } of results) {
      const { auditId, bagId, findings } = checked;
      this.progress.forget(bagId);
      if (recorded === undefined) continue; // another runner got there first: nothing written
      this.progress.recorded(recorded.audit);
      if (checked.outcome === 'failure')
        this.logger.warn(
          { auditId, bagId, findings: findings.length },
          `fixity check of ${bagId} failed: ${detail!.split('\n').slice(0, 3).join('; ')}${findings.length > 3 ? `; and ${findings.length - 3} more` : ''}`,
        );
      this.onRecorded(checked, recorded.audit);
    }
  }
}
