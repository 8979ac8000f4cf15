/** What the ingest works with: the catalog, the disk, the hashing pool, the landing zone, and how to report. */
import type { Catalog } from '../catalog/catalog.js';
import type { StoredProblem } from '../catalog/types.js';
import type { Config } from '../config/config.js';
import type { Logger } from '../logger.js';
import type { Storage } from '../storage/storage.js';
import type { ResumableHasher } from './checkpointed-hasher.js';
import type { LandedHasher } from './landed-hasher.js';
import type { LandingZone } from './landing.js';
import type { LandingWatcher } from './watcher.js';

/** Hooks for metrics. */
export interface IngestObserver {
  finished(outcome: 'DONE' | 'FAILED', seconds: number, bytes: number, problems: StoredProblem[]): void;
}

export interface IngestDeps {
  catalog: Catalog;
  storage: Storage;
  /** The fixity pool; huge files are hashed resumably through it (checkpointed-hasher.ts). */
  hasher: ResumableHasher;
  landing: LandingZone;
  watcher: LandingWatcher;
  /** Files hashed as our rsync received them; without it (no rsync of ours) every file is read at complete. */
  landed?: LandedHasher;
  config: Config;
  logger: Logger;
  observer?: IngestObserver;
  /**
   * Replication hears from the ingest: a package stored (inside the transaction that marks it so,
   * so that its replica copies are owed atomically), and how many ingests run (copies yield to them).
   */
  replication?: {
    packageStored(bagId: string): void;
    /** A revision stored: the package's copies are owed again. */
    packageRevised(bagId: string): void;
    ingestsRunning(count: number): void;
  };
}
