/**
 * The landed hasher on its real parts, for tests that drive it directly: a data directory, the
 * catalog, the landing zone and a fixity pool, each torn down with the test, and open requests
 * whose upload folders files are put into (as our rsync would land them).
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Catalog } from '../../src/catalog/catalog.js';
import { FixityPool } from '../../src/fixity/index.js';
import { newCapability } from '../../src/ingest/capability.js';
import { LandedHasher, type LandedPool } from '../../src/ingest/landed-hasher.js';
import { LandingZone } from '../../src/ingest/landing.js';
import { silentLogger } from '../../src/logger.js';
import { DataLayout } from '../../src/storage/layout.js';

interface Teardown {
  teardown(fn: () => unknown): void;
}

export interface LandedWorld {
  dataDir: string;
  catalog: Catalog;
  landing: LandingZone;
  /** The fixity pool itself (the hasher gets it, or `options.pool` made of it). */
  pool: FixityPool;
  landed: LandedHasher;
  /** A new open request: its bag id and the upload capability its folder is under. */
  request(): { bagId: string; capability: string };
}

export async function landedWorld(
  t: Teardown,
  options: {
    workers?: number;
    /** What the hasher reads with, made of the real pool (default: the pool itself). */
    pool?: (real: FixityPool) => LandedPool;
    holdWhile?: () => boolean;
  } = {},
): Promise<LandedWorld> {
  const dataDir = mkdtempSync(join(tmpdir(), 'preservd-landed-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const layout = new DataLayout(dataDir);
  await layout.ensure();
  const catalog = Catalog.open(layout);
  t.teardown(() => catalog.close());
  const pool = new FixityPool({ workers: options.workers ?? 1 });
  t.teardown(() => pool.close());
  const landing = new LandingZone(layout);
  const landed = new LandedHasher({
    catalog,
    landing,
    pool: options.pool?.(pool) ?? pool,
    logger: silentLogger,
    ...(options.holdWhile === undefined ? {} : { holdWhile: options.holdWhile }),
  });
  t.teardown(() => landed.stop());
  const request = () => {
    const capability = newCapability();
    const bagId = randomUUID();
    catalog.packages.create({
      bagId,
      externalId: `ext-${bagId}`,
      contentType: 'digital',
      user: 'alice',
      capability,
    });
    return { bagId, capability };
  };
  return { dataDir, catalog, landing, pool, landed, request };
}
