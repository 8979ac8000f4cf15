/**
 * Audits and their progress. The packages of an audit are fixed when it starts (its to-do set);
 * recording a package's result removes it from the set, adds the event and bumps the count in
 * one transaction, so after a crash the audit goes on with what is left and nothing is counted
 * twice.
 */
import type { Database, RootDatabase } from 'lmdb';
import { MAX_PAGE, takePage, type Page } from './scan.js';
import type { Transactor } from './transaction.js';
import type { Audit, PreservationEvent } from './types.js';

export type StartResult = { created: Audit } | { existing: Audit };

export class AuditStore {
  private readonly audits: Database<Audit, number>;
  private readonly todo: Database<number, [number, string]>;

  constructor(
    root: RootDatabase,
    private readonly catalog: Transactor,
    private readonly nextId: () => number,
  ) {
    this.audits = root.openDB({ name: 'audits' });
    this.todo = root.openDB({ name: 'auditTodo' });
  }

  get(id: number): Audit | undefined {
    return this.audits.get(id);
  }

  *list(): Generator<Audit> {
    for (const { value } of this.audits.getRange()) yield value;
  }

  /** One page of audits, oldest first, after the id `after`. */
  page(query: { after?: number | undefined; limit?: number }): Page<Audit> {
    const after = query.after ?? 0;
    return takePage(
      this.audits.getKeys({ start: after + 1 }),
      Math.min(query.limit ?? MAX_PAGE, MAX_PAGE),
      (id) => this.audits.get(id),
    );
  }

  /** The newest audit, or undefined before the first. */
  latest(): Audit | undefined {
    for (const { value } of this.audits.getRange({ reverse: true, limit: 1 })) return value;
    return undefined;
  }

  /** The newest finished audit, or undefined before one has finished. */
  latestFinished(): Audit | undefined {
    for (const { value } of this.audits.getRange({ reverse: true }))
      if (value.finishedAt !== undefined) return value;
    return undefined;
  }

  /** Audits run one at a time (start() sees to it), so only the newest can be in progress. */
  inProgress(): Audit | undefined {
    const audit = this.latest();
    return audit?.finishedAt === undefined ? audit : undefined;
  }

  /**
   * Starts an audit of the given stored packages (bag_id → bytes) unless one is in progress.
   * An audit of nothing is finished at once.
   */
  start(user: string, packages: Map<string, number>): StartResult {
    this.catalog.reserve(packages.size * 200); // a to-do entry per package
    return this.catalog.transaction(() => {
      const running = this.inProgress();
      if (running !== undefined) return { existing: running };
      const now = Date.now();
      let totalBytes = 0;
      const id = this.nextId();
      for (const [bagId, bytes] of packages) {
        this.todo.putSync([id, bagId], bytes);
        totalBytes += bytes;
      }
      const audit: Audit = {
        id,
        user,
        packages: packages.size,
        successes: 0,
        failures: 0,
        bytes: 0,
        totalBytes,
        createdAt: now,
        updatedAt: now,
        ...(packages.size === 0 ? { finishedAt: now } : {}),
      };
      this.audits.putSync(id, audit);
      return { created: audit };
    });
  }

  /** Packages of this audit not yet checked, in bag_id order. */
  remaining(auditId: number): Array<{ bagId: string; bytes: number }> {
    return [...this.todo.getRange({ start: [auditId], end: [auditId, '\uffff'] })].map((e) => ({
      bagId: e.key[1],
      bytes: e.value,
    }));
  }

  /**
   * Records one package's fixity check: the event, the count, and the package leaves the to-do
   * set, all at once. Returns undefined (and writes nothing) if it was already recorded.
   */
  record(
    auditId: number,
    bagId: string,
    addEvent: () => PreservationEvent,
  ): { audit: Audit; event: PreservationEvent } | undefined {
    return this.catalog.transaction(() => {
      const bytes = this.todo.get([auditId, bagId]);
      const audit = this.audits.get(auditId);
      if (bytes === undefined || audit === undefined) return undefined;
      const event = addEvent();
      this.todo.removeSync([auditId, bagId]);
      const now = Date.now();
      const next: Audit = {
        ...audit,
        successes: audit.successes + (event.outcome === 'success' ? 1 : 0),
        failures: audit.failures + (event.outcome === 'failure' ? 1 : 0),
        bytes: audit.bytes + bytes,
        updatedAt: now,
      };
      if (next.successes + next.failures >= next.packages) next.finishedAt = now;
      this.audits.putSync(auditId, next);
      return { audit: next, event };
    });
  }
}
