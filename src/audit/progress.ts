/**
 * Progress accounting for the audit the runner is working on: the catalog counts recorded
 * packages and their bytes; this adds the bytes already read in packages still being checked,
 * so progress moves within a large package too (metrics read it through `AuditRunner.progress`).
 *
 * It does not measure rates or estimate times (the CLI does, from successive readings), and
 * writes nothing: what it holds is lost with the process, which resumes from the catalog's counts.
 */
import type { Audit } from '../catalog/types.js';

export interface AuditProgress {
  auditId: number;
  packages: number;
  /** Packages recorded (successes + failures). */
  done: number;
  /** Bytes verified: recorded packages plus files already read in packages being checked. */
  bytes: number;
  totalBytes: number;
}

export class ProgressTracker {
  /** The audit being worked on, as last recorded by this process. */
  private audit: Audit | undefined;
  /** Bytes read in packages not yet recorded, per bag. */
  private readonly partial = new Map<string, number>();

  get current(): Audit | undefined {
    return this.audit;
  }

  /** The runner starts (or resumes) working on `audit`. */
  begin(audit: Audit): void {
    this.audit = audit;
    this.partial.clear();
  }

  /** The runner stopped working on the audit (it finished, stopped or paused). */
  end(): void {
    this.partial.clear();
    this.audit = undefined;
  }

  /** The catalog recorded a package of an audit: its counts as of that commit. */
  recorded(audit: Audit): void {
    if (this.audit?.id === audit.id) this.audit = audit;
  }

  /** A package's check starts. */
  checking(bagId: string): void {
    this.partial.set(bagId, 0);
  }

  /** A file of a package being checked was read. */
  read(bagId: string, bytes: number): void {
    this.partial.set(bagId, (this.partial.get(bagId) ?? 0) + bytes);
  }

  /** A package's bytes are no longer partial: recorded (the catalog counts them), or stopped. */
  forget(bagId: string): void {
    this.partial.delete(bagId);
  }

  /** Progress of `audit` (the one in progress), or undefined when there is none. */
  of(audit: Audit | undefined): AuditProgress | undefined {
    if (audit === undefined || audit.finishedAt !== undefined) return undefined;
    let bytes = audit.bytes;
    if (audit === this.audit) for (const b of this.partial.values()) bytes += b;
    return {
      auditId: audit.id,
      packages: audit.packages,
      done: audit.successes + audit.failures,
      bytes,
      totalBytes: audit.totalBytes,
    };
  }
}
