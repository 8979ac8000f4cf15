/**
 * The daemon: starts the pieces in order, reconciles disk and catalog, and stops them in reverse
 * (one registry, service/lifecycle.ts, for a graceful stop and for a start that fails part-way).
 *
 *   OCFL root → replica check → catalog → first admin → fixity pool → landing zone, rsync daemon, watcher →
 *   reconcile → replicator, repairs → ingest worker → audit runner, continuous audits → HTTP
 */
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { ContinuousAudit } from './audit/continuous.js';
import { AuditRunner } from './audit/runner.js';
import { Catalog } from './catalog/catalog.js';
import type { FileRecord, Package } from './catalog/types.js';
import type { Config } from './config/config.js';
import { FixityPool } from './fixity/index.js';
import { writeAtomically } from './fs/atomic.js';
import type { HttpContext } from './http/context.js';
import { gracefulCloser } from './http/close.js';
import { buildServer } from './http/server.js';
import { IngestWorker } from './ingest/ingest.js';
import { reconcile } from './ingest/recovery.js';
import { abandonRevision, prefillRevision } from './ingest/revision-upload.js';
import { RotationSweeper } from './ingest/rotation.js';
import { uploadLink } from './ingest/upload-link.js';
import type { LandedHasher } from './ingest/landed-hasher.js';
import type { LandingZone } from './ingest/landing.js';
import type { LandingWatcher } from './ingest/watcher.js';
import { createLogger } from './logger.js';
import { Metrics } from './metrics.js';
import {
  checkTargets,
  openFromReplica,
  PRIMARY,
  Remover,
  Repairer,
  Replicator,
  REPLICATION_EXECUTOR,
  restoreLostObjects,
  targetsFor,
  type ReplicaTarget,
} from './replicas/index.js';
import { Lifecycle } from './service/lifecycle.js';
import { DataLayout } from './storage/layout.js';
import { RecordWriter } from './storage/record-writer.js';
import { prepareStorageRoot } from './storage/ocfl-root.js';
import { Storage } from './storage/storage.js';
import { startUploads } from './uploads.js';
import { DownloadsInFlight } from './download/index.js';

export interface DaemonOptions {
  logger?: Logger;
}

export class Daemon {
  private constructor(
    readonly config: Config,
    private readonly logger: Logger,
    private readonly lifecycle: Lifecycle,
    private readonly http: FastifyInstance,
  ) {}

  static async start(config: Config, options: DaemonOptions = {}): Promise<Daemon> {
    const logger = options.logger ?? createLogger(config);
    const lifecycle = new Lifecycle();
    try {
      return await Daemon.startPieces(config, logger, lifecycle);
    } catch (err) {
      // What had started is stopped in reverse, as stop() does.
      await lifecycle
        .stop()
        .catch((stopErr: unknown) => logger.error({ err: stopErr }, 'while undoing a failed start'));
      throw err;
    }
  }

  private static async startPieces(config: Config, logger: Logger, lifecycle: Lifecycle): Promise<Daemon> {
    const layout = new DataLayout(config.dataDir);
    const where = whereToFind(config, layout);
    logger.info(
      where,
      `preservd starting: API ${where.api}, rsync ${where.rsync ?? 'off'}, admin token in ${where.adminToken}`,
    );
    await layout.ensure();
    // A storage in the layout before OCFL is refused here, before anything reads or writes it.
    await prepareStorageRoot(layout);
    // A replica that is missing or refuses writes stops the start, before anything runs.
    const targets = await targetsFor(config.replicas);
    lifecycle.onStop('replica targets', () => targets.forEach((t) => t.close()));
    await checkTargets(targets);
    const storage = new Storage(layout);
    const catalog = Catalog.open(layout);
    lifecycle.onStop('catalog', () => catalog.close());
    refuseHalfRebuilt(catalog);
    await ensureFirstAdmin(catalog, layout.adminToken, logger);
    // Started before every service that changes the catalog, so it stops after them and writes their last changes.
    const records = await lifecycle.start(
      'record writer',
      new RecordWriter({
        catalog,
        storage,
        contentTypes: Object.keys(config.contentTypes),
        targets,
        delayMs: config.storage.recordDelayMs,
        logger,
      }),
    );

    const metrics = new Metrics(catalog);
    const pool = new FixityPool({
      workers: config.fixity.workers,
      readSize: config.fixity.readSize,
      maxOpenFiles: config.fixity.maxOpenFiles,
      auditRateLimitBytesPerSec: config.audit.rateLimitMBps * 1e6,
    });
    lifecycle.onStop('fixity pool', () => pool.close());
    metrics.watchPool(pool);
    const downloads = new DownloadsInFlight();
    const { landing, watcher, landed } = await startUploads(config, {
      layout,
      catalog,
      pool,
      logger,
      lifecycle,
      metrics,
      downloads,
    });

    await reconcile(catalog, storage, landing, logger);
    // Rotations `preservd revoke` recorded but could not finish itself.
    const rotations = new RotationSweeper(catalog, landing, logger);
    rotations.start();
    lifecycle.onStop('rotation sweeper', () => rotations.stop());

    const services = await startServices(lifecycle, {
      config,
      logger,
      catalog,
      storage,
      pool,
      landing,
      watcher,
      ...(landed === undefined ? {} : { landed }),
      targets,
      metrics,
      downloads,
      records,
    });
    const app = await buildServer(
      httpContext({ config, catalog, storage, landing, watcher, targets, metrics, downloads, ...services }),
      logger,
    );
    lifecycle.onStop('HTTP server', gracefulCloser(app, config.http.shutdownGraceSeconds * 1000));
    await app.listen({ host: config.http.host, port: config.http.port });
    const daemon = new Daemon(config, logger, lifecycle, app);
    const serving = { ...where, api: daemon.url };
    logger.info(
      serving,
      `preservd is serving: API ${serving.api}, rsync ${serving.rsync ?? 'off'}, admin token in ${serving.adminToken}`,
    );
    warnIfInsecureCookies(config, logger);
    return daemon;
  }

  /** Where the API answers (with the real port when the configured one was 0). */
  get url(): string {
    const address = this.http.server.address();
    const port = typeof address === 'object' && address !== null ? address.port : this.config.http.port;
    return `http://${this.config.http.host}:${port}`;
  }

  uploadLink(pkg: Package): string {
    return uploadLink(this.config.upload, pkg);
  }

  /** Graceful stop: no new connections, in-flight work parked, LMDB closed last (the reverse of the start). */
  async stop(): Promise<void> {
    await this.lifecycle.stop();
    this.logger.info('preservd stopped');
  }
}

/** What the background services are made of (the pieces started before them). */
interface ServiceParts {
  config: Config;
  logger: Logger;
  catalog: Catalog;
  storage: Storage;
  pool: FixityPool;
  landing: LandingZone;
  watcher: LandingWatcher;
  landed?: LandedHasher;
  targets: readonly ReplicaTarget[];
  metrics: Metrics;
  downloads: DownloadsInFlight;
  records: RecordWriter;
}

/** The services the routes call. */
interface Services {
  ingest: IngestWorker;
  repairer: Repairer;
  audits: AuditRunner;
  remover: Remover;
}

/** Starts the background services, each after those it calls, so the reverse walk stops it before them. */
async function startServices(lifecycle: Lifecycle, parts: ServiceParts): Promise<Services> {
  const { config, logger, catalog, storage, pool, landing, watcher, landed, targets, metrics, records } =
    parts;
  // A lost primary (after `preservd rebuild --from` a replica) comes back before anything reads or copies it.
  await restoreLostObjects({ catalog, storage, targets, logger });
  const replicator = await lifecycle.start(
    'replicator',
    new Replicator({
      catalog,
      storage,
      targets,
      logger,
      onBytes: (replica, bytes) => metrics.replicated(replica, bytes),
    }),
  );
  const repairer = await lifecycle.start('repairs', new Repairer({ catalog, storage, targets, logger }));
  // Deaccessioned content a crash left in storage goes first, before audits could look at it.
  const remover = await lifecycle.start(
    'deaccession removals',
    new Remover({
      catalog,
      storage,
      targets,
      logger,
      writeRecords: () => records.flush(),
      writing: (bagId) => replicator.isCopying(bagId) || repairer.isRepairing(bagId),
    }),
  );
  const ingest = await lifecycle.start(
    'ingest',
    new IngestWorker({
      catalog,
      storage,
      hasher: pool,
      landing,
      watcher,
      ...(landed === undefined ? {} : { landed }),
      config,
      logger,
      observer: metrics.ingestObserver(),
      replication: replicator,
    }),
  );
  const rates = new Map(config.replicas.map((r) => [r.name, (r.rateLimitMBps ?? 0) * 1e6]));
  const auditedReplicas =
    targets.length > 0
      ? {
          targets,
          bytesPerSec: (name: string) => rates.get(name) ?? 0,
          repair: (bagId: string) => repairer.repairSoon(bagId, REPLICATION_EXECUTOR),
        }
      : undefined;
  const audits = await lifecycle.start(
    'audit runner',
    new AuditRunner({
      catalog,
      storage,
      hasher: pool,
      config,
      logger,
      ...(auditedReplicas === undefined ? {} : { replicas: auditedReplicas }),
      onContentLeft: () => remover.wake(),
    }),
  );
  metrics.watchAudits(audits);
  metrics.watchReplicas(replicator.names);
  const continuous = new ContinuousAudit({
    catalog,
    storage,
    hasher: pool,
    config,
    logger,
    replicas: auditedReplicas,
    fullAuditRunning: () => catalog.audits.inProgress() !== undefined,
  });
  await lifecycle.start('continuous audits', continuous);
  metrics.watchContinuousAudits(continuous);
  return { ingest, repairer, audits, remover };
}

/** What the routes may call. */
function httpContext(parts: Omit<ServiceParts, 'logger' | 'pool' | 'records'> & Services): HttpContext {
  const {
    config,
    catalog,
    storage,
    landing,
    watcher,
    targets,
    metrics,
    downloads,
    ingest,
    repairer,
    audits,
    remover,
  } = parts;
  return {
    config,
    catalog,
    storage,
    uploadLink: (pkg) => uploadLink(config.upload, pkg),
    openLanding: (pkg) => landing.open(pkg.capability),
    prefillRevision: (pkg) => prefillRevision({ catalog, storage, landing }, pkg),
    abandonRevision: (pkg, version) => abandonRevision({ catalog, storage, landing }, pkg, version),
    uploadProgress: (pkg) => watcher.progress(pkg.capability),
    wakeIngest: () => ingest.wake(),
    startAudit: (user) => audits.startAudit(user),
    deaccessionCopies: [PRIMARY, ...targets.map((t) => t.name)],
    wakeRemover: () => remover.wake(),
    ...(targets.length > 0
      ? {
          repairPackage: (bagId: string, user: string) => repairer.repairSoon(bagId, user),
          openFromReplica: (bagId: string, record: FileRecord, range: { start: number; end: number }) =>
            openFromReplica(
              targets,
              (replica) => catalog.replication.get(bagId, replica)?.status === 'verified',
              bagId,
              record,
              range,
            ),
        }
      : {}),
    metrics: () => metrics.render(),
    downloads,
    observeResponse: (route, method, status, seconds) =>
      metrics.observeResponse(route, method, status, seconds),
  };
}

/** Where people reach the daemon: its API, its rsync daemon (undefined when off), the admin token. */
function whereToFind(
  config: Config,
  layout: DataLayout,
): { api: string; rsync: string | undefined; adminToken: string } {
  const r = config.upload.rsync;
  return {
    api: `http://${config.http.host}:${config.http.port}`,
    rsync: r.enabled ? `rsync://${r.host}:${r.port}/${r.module}/` : undefined,
    adminToken: layout.adminToken,
  };
}

/** On first start: an `admin` user whose token goes to `<dataDir>/admin.token` (mode 0600). */
async function ensureFirstAdmin(catalog: Catalog, path: string, logger: Logger): Promise<void> {
  if (catalog.users.list().length > 0) return;
  catalog.users.add('admin', true);
  const { secret } = catalog.users.issueToken('admin');
  await writeAtomically(path, `${secret}\n`, { mode: 0o600, fsync: true });
  logger.info({ path }, 'created the first admin user "admin"; its token is in this file');
}

/** A catalog a rebuild left half done is finished by the rebuild, never served. */
function refuseHalfRebuilt(catalog: Catalog): void {
  const rebuild = catalog.records.rebuild();
  if (rebuild !== undefined)
    throw new Error(
      `the catalog is half rebuilt (from ${rebuild.from}); run "preservd rebuild --from ${rebuild.from}" again to finish it`,
    );
}

/** The warning an operator must see when session cookies would travel in clear beyond this host. */
function warnIfInsecureCookies(config: Config, logger: Logger): void {
  const { host, secureCookies, trustedProxies } = config.http;
  if (!secureCookies && trustedProxies.length === 0 && !['127.0.0.1', '::1', 'localhost'].includes(host))
    logger.warn(
      { host },
      `INSECURE COOKIES: the API listens on ${host}, beyond this host, and the pages' session cookie is not marked Secure: ` +
        'set http.secureCookies to true when the site is served over https, or name the TLS proxy in http.trustedProxies (docs/operators.md)',
    );
}
