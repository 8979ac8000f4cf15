/**
 * The daemon's upload side, started as one piece: the landing zone, the rsync daemon (when
 * enabled) with its transfer events and the hashing of files as they land, and the landing
 * watcher, each registered with the daemon's lifecycle to stop in reverse.
 */
import type { Logger } from 'pino';
import type { Catalog } from './catalog/catalog.js';
import type { Config } from './config/config.js';
import type { FixityPool } from './fixity/index.js';
import { LandedHasher } from './ingest/landed-hasher.js';
import { LandingZone } from './ingest/landing.js';
import { finishRotations } from './ingest/rotation.js';
import { RsyncDaemon, type Transfer } from './ingest/rsync/index.js';
import { LandingWatcher } from './ingest/watcher.js';
import type { Metrics } from './metrics.js';
import type { Lifecycle } from './service/lifecycle.js';
import type { DataLayout } from './storage/layout.js';
import type { DownloadsInFlight } from './download/index.js';

/**
 * The landing zone, the rsync daemon (when enabled) and the landing watcher, each registered to
 * stop with the daemon. Unfinished link rotations are finished before rsync listens, so that an
 * old link a crash left unretired is refused from the first connection.
 */
export async function startUploads(
  config: Config,
  {
    layout,
    catalog,
    pool,
    logger,
    lifecycle,
    metrics,
    downloads,
  }: {
    layout: DataLayout;
    catalog: Catalog;
    pool: FixityPool;
    logger: Logger;
    lifecycle: Lifecycle;
    metrics: Metrics;
    /** Downloads being answered: the landed hasher starts nothing while there is one. */
    downloads?: DownloadsInFlight;
  },
): Promise<{ landing: LandingZone; watcher: LandingWatcher; landed: LandedHasher | undefined }> {
  const landing = new LandingZone(layout);
  await finishRotations(catalog, landing, logger);
  let rsync: RsyncDaemon | undefined;
  let landed: LandedHasher | undefined;
  if (config.upload.rsync.enabled) {
    const r = config.upload.rsync;
    rsync = new RsyncDaemon({
      landing,
      host: r.host,
      port: r.port,
      module: r.module,
      binary: r.binary,
      maxConnections: r.maxConnections,
      logger,
    });
    rsync.onTransfer((t) => recordTransfer(catalog, t));
    if (r.hashOnArrival) {
      const hasher = (landed = new LandedHasher({
        catalog,
        landing,
        pool,
        logger,
        ...(downloads === undefined ? {} : { holdWhile: () => downloads.any }),
      }));
      lifecycle.onStop('landed hasher', () => hasher.stop());
      rsync.landed.onLanded(hasher.accept);
      metrics.watchLanded(hasher.stats);
    }
    await lifecycle.start('rsync daemon', rsync);
    metrics.watchRsync(rsync);
  }
  // Only uploads our rsync is receiving are followed; the rest are scanned when asked.
  const watcher = new LandingWatcher(layout, {
    logger,
    ...(rsync === undefined
      ? {}
      : {
          transfers: {
            dir: landing.layout.active,
            live: async () => (await landing.liveTransfers()).map((t) => t.capability),
          },
        }),
  });
  await lifecycle.start('landing watcher', watcher);
  metrics.watchLanding(watcher);

  return { landing, watcher, landed };
}

/** A finished rsync upload becomes a `transfer` event of its package (idempotent by record). */
function recordTransfer(catalog: Catalog, t: Transfer): void {
  const pkg = catalog.packages.byUploadCapability(t.capability);
  if (pkg === undefined) return;
  const ok = t.exitStatus === 0;
  const revision = pkg.stored ? catalog.revisions.open(pkg.bagId) : undefined;
  const version = revision === undefined ? '' : `version ${revision.version}: `;
  catalog.events.add({
    bagId: pkg.bagId,
    type: 'transfer',
    executor: pkg.user,
    outcome: ok ? 'success' : 'failure',
    detail: `${version}${ok ? 'rsync upload finished' : `rsync upload ended with exit status ${t.exitStatus}`}`,
    date: t.endedAt,
  });
}
