/**
 * What the audit tests share: a temporary data directory with a real catalog, storage layout
 * and fixity pool, stored packages made by `createStoredPackage`, a logger that keeps its lines,
 * and a runner over all of it.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AuditRunner, type AuditHasher, type AuditLogger, type AuditRunnerOptions } from '../../src/audit/runner.js';
import { Catalog } from '../../src/catalog/catalog.js';
import type { PreservationEvent } from '../../src/catalog/types.js';
import { defaults, type Config } from '../../src/config/config.js';
import { FixityPool } from '../../src/fixity/index.js';
import { Storage } from '../../src/storage/storage.js';
import { createStoredPackage, type StoredPackage, type StoredPackageSpec } from '../helpers/stored-package.js';

export interface Teardown {
  teardown(fn: () => unknown): void;
}

export interface LogLine {
  level: 'info' | 'warn' | 'error';
  fields: Record<string, unknown>;
  message: string;
}

export class MemoryLogger implements AuditLogger {
  readonly lines: LogLine[] = [];
  info(fields: Record<string, unknown>, message: string): void {
    this.lines.push({ level: 'info', fields, message });
  }
  warn(fields: Record<string, unknown>, message: string): void {
    this.lines.push({ level: 'warn', fields, message });
  }
  error(fields: Record<string, unknown>, message: string): void {
    this.lines.push({ level: 'error', fields, message });
  }
  matching(re: RegExp): LogLine[] {
    return this.lines.filter((l) => re.test(l.message));
  }
}

export interface AuditWorld {
  dataDir: string;
  catalog: Catalog;
  storage: Storage;
  pool: FixityPool;
  config: Config;
  logger: MemoryLogger;
  packages: StoredPackage[];
  /** A runner over this world (not started); `overrides` replace constructor options. */
  runner(overrides?: Partial<AuditRunnerOptions>): AuditRunner;
  /** Every event of an audit. */
  events(auditId: number): PreservationEvent[];
}

export interface WorldOptions {
  packages?: number;
  spec?: (i: number) => StoredPackageSpec;
  audit?: Partial<Config['audit']>;
  workers?: number;
  /** Reuse a data directory (a restart); it is then not removed at teardown. */
  dataDir?: string;
}

export async function makeWorld(t: Teardown, opts: WorldOptions = {}): Promise<AuditWorld> {
  const ownDir = opts.dataDir === undefined;
  const dataDir = opts.dataDir ?? (await mkdtemp(join(tmpdir(), 'preservd-audit-')));
  const storage = new Storage(dataDir);
  await storage.ensureLayout();
  const catalog = Catalog.open(dataDir);
  const pool = new FixityPool({ workers: opts.workers ?? 2 });
  const config = defaults();
  config.dataDir = dataDir;
  config.audit = { ...config.audit, ...opts.audit };
  const logger = new MemoryLogger();
  const runners: AuditRunner[] = [];
  t.teardown(async () => {
    for (const r of runners) await r.stop();
    await pool.close();
    await catalog.close();
    if (ownDir) await rm(dataDir, { recursive: true, force: true });
  });
  const packages: StoredPackage[] = [];
  for (let i = 0; i < (opts.packages ?? 0); i++) packages.push(await createStoredPackage(catalog, storage, opts.spec?.(i) ?? {}));
  return {
    dataDir,
    catalog,
    storage,
    pool,
    config,
    logger,
    packages,
    runner(overrides = {}) {
      const runner = new AuditRunner({ catalog, storage, hasher: pool as AuditHasher, config, logger, ...overrides });
      runners.push(runner);
      return runner;
    },
    events: (auditId) => [...catalog.events.forAudit(auditId)],
  };
}

/** Starts an audit with the runner and waits until it is finished. */
export async function auditAll(runner: AuditRunner, user = 'admin'): Promise<number> {
  runner.start();
  const result = runner.startAudit(user);
  const audit = 'created' in result ? result.created : result.existing;
  await runner.idle();
  return audit.id;
}

/** Polls until `check` is true (or throws after `ms`). */
export async function until(check: () => boolean, ms = 20_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
