/**
 * The daemon: starts the pieces in order, reconciles disk and catalog, and stops them in reverse.
 *
 *   replica check → catalog → first admin → fixity pool → landing zone, rsync daemon, watcher →
 *   reconcile → ingest worker → replicator → audit runner, continuous audits → HTTP
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
import { buildServer } from './http/server.js';
import { IngestWorker } from './ingest/ingest.js';
import { LandingZone } from './ingest/landing.js';
import { reconcile } from './ingest/recovery.js';
import { finishRotations, RotationSweeper } from './ingest/rotation.js';
import { RsyncDaemon, type Transfer } from './ingest/rsync/index.js';
import { uploadLink } from './ingest/upload-link.js';
import { LandingWatcher } from './ingest/watcher.js';
import { createLogger } from './logger.js';
import { Metrics } from './metrics.js';
import { checkTargets, openFromReplica, Repairer, Replicator, REPLICATION_EXECUTOR, targetsFor, type ReplicaTarget } from './replicas/index.js';
import { DataLayout } from './storage/layout.js';
import { Storage } from './storage/storage.js';

export interface DaemonOptions {
  logger?: Logger;
}

export class Daemon {
  private constructor(
    readonly config: Config,
    readonly logger: Logger,
    readonly catalog: Catalog,
    readonly storage: Storage,
    readonly pool: FixityPool,
    readonly landing: LandingZone,
    readonly rsync: RsyncDaemon | undefined,
    readonly watcher: LandingWatcher,
    readonly ingest: IngestWorker,
    readonly audits: AuditRunner,
    readonly replicator: Replicator,
    readonly continuous: ContinuousAudit,
    readonly repairer: Repairer,
    readonly targets: readonly ReplicaTarget[],
    readonly metrics: Metrics,
    private http: FastifyInstance | undefined,
  ) {}

  private rotations: RotationSweeper | undefined;

  static async start(config: Config, options: DaemonOptions = {}): Promise<Daemon> {
    const logger = options.logger ?? createLogger(config);
    // What has been started so far, stopped in reverse if a later step fails.
    const started: Array<() => Promise<unknown>> = [];
    try {
      return await Daemon.startPieces(config, logger, started);
    } catch (err) {
      for (const stop of started.reverse()) await stop().catch(() => undefined);
      throw err;
    }
  }

  private static async startPieces(config: Config, logger: Logger, started: Array<() => Promise<unknown>>): Promise<Daemon> {
    const layout = new DataLayout(config.dataDir);
    const where = whereToFind(config, layout);
    logger.info(where, `preservd starting: API ${where.api}, rsync ${where.rsync ?? 'off'}, admin token in ${where.adminToken}`);
    await layout.ensure();
    // A replica that is missing or refuses writes stops the start, before anything runs.
    const targets = targetsFor(config.replicas);
    started.push(async () => targets.forEach((t) => t.close()));
    await checkTargets(targets);
    const storage = new Storage(layout);
    const catalog = Catalog.open(layout);
    started.push(() => catalog.close());
    await ensureFirstAdmin(catalog, layout.adminToken, logger);

    const metrics = new Metrics(catalog);
    const pool = new FixityPool({
      workers: config.fixity.workers,
      readSize: config.fixity.readSize,
      maxOpenFiles: config.fixity.maxOpenFiles,
      auditRateLimitBytesPerSec: config.audit.rateLimitMBps * 1e6,
    });
    started.push(() => pool.close());
    metrics.watchPool(pool);
    const landing = new LandingZone(layout);
    // Before rsync listens: an old link a crash left unretired is refused from the first connection.
    await finishRotations(catalog, landing, logger);
    let rsync: RsyncDaemon | undefined;
    if (config.upload.rsync.enabled) {
      const r = config.upload.rsync;
      rsync = new RsyncDaemon({ landing, host: r.host, port: r.port, module: r.module, binary: r.binary, maxConnections: r.maxConnections, logger });
      const child = rsync;
      started.push(() => child.stop());
      await rsync.start();
      metrics.watchRsync(rsync);
    }
    // Only uploads our rsync is receiving are followed; the rest are scanned when asked.
    const watcher = new LandingWatcher(layout, {
      logger,
      ...(rsync === undefined ? {} : { transfers: { dir: landing.layout.active, live: async () => (await landing.liveTransfers()).map((t) => t.capability) } }),
    });
    started.push(() => watcher.stop());
    await watcher.start();
    metrics.watchLanding(watcher);

    await reconcile(catalog, storage, landing, logger);
    // Rotations `preservd revoke` recorded but could not finish itself.
    const rotations = new RotationSweeper(catalog, landing, logger);
    rotations.start();
    started.push(() => rotations.stop());

    let ingestActive = () => 0;
    const replicator = new Replicator({ catalog, storage, targets, logger, ingestBusy: () => ingestActive() > 0, onBytes: (replica, bytes) => metrics.replicated(replica, bytes) });
    const ingest = new IngestWorker({ catalog, storage, hasher: pool, landing, watcher, config, logger, observer: metrics.ingestObserver(), replication: replicator });
    ingestActive = () => ingest.active;
    const repairer = new Repairer({ catalog, storage, targets, logger });
    const rates = new Map(config.replicas.map((r) => [r.name, (r.rateLimitMBps ?? 0) * 1e6]));
    const auditedReplicas = targets.length > 0 ? { targets, bytesPerSec: (name: string) => rates.get(name) ?? 0, repair: (bagId: string) => repairer.repairSoon(bagId, REPLICATION_EXECUTOR) } : undefined;
    const audits = new AuditRunner({ catalog, storage, hasher: pool, config, logger, ...(auditedReplicas === undefined ? {} : { replicas: auditedReplicas }) });
    metrics.watchAudits(audits);
    metrics.watchReplicas(replicator.names);
    const continuous = new ContinuousAudit({ catalog, storage, hasher: pool, config, logger, replicas: auditedReplicas, fullAuditRunning: () => catalog.audits.inProgress() !== undefined });
    metrics.watchContinuousAudits(continuous);
    const daemon = new Daemon(config, logger, catalog, storage, pool, landing, rsync, watcher, ingest, audits, replicator, continuous, repairer, targets, metrics, undefined);
    daemon.rotations = rotations;
    rsync?.onTransfer((t) => daemon.recordTransfer(t));
    started.push(() => ingest.stop(), () => replicator.stop(), () => repairer.stop(), () => audits.stop(), () => continuous.stop());
    ingest.start();
    replicator.start();
    audits.start();
    continuous.start();

    const app = await buildServer(daemon.httpContext(), logger);
    started.push(() => app.close());
    await app.listen({ host: config.http.host, port: config.http.port });
    daemon.http = app;
    const serving = { ...where, api: daemon.url };
    logger.info(serving, `preservd is serving: API ${serving.api}, rsync ${serving.rsync ?? 'off'}, admin token in ${serving.adminToken}`);
    const { host, secureCookies, trustedProxies } = config.http;
    if (!secureCookies && trustedProxies.length === 0 && !['127.0.0.1', '::1', 'localhost'].includes(host))
      logger.warn(
        { host },
        `INSECURE COOKIES: the API listens on ${host}, beyond this host, and the pages' session cookie is not marked Secure: ` +
          'set http.secureCookies to true when the site is served over https, or name the TLS proxy in http.trustedProxies (docs/operators.md)',
      );
    return daemon;
  }

  /** Where the API answers (with the real port when the configured one was 0). */
  get url(): string {
    const address = this.http?.server.address();
    const port = typeof address === 'object' && address !== null ? address.port : this.config.http.port;
    return `http://${this.config.http.host}:${port}`;
  }

  uploadLink(pkg: Package): string {
    return uploadLink(this.config.upload, pkg);
  }

  private httpContext(): HttpContext {
    return {
      config: this.config,
      catalog: this.catalog,
      storage: this.storage,
      uploadLink: (pkg) => this.uploadLink(pkg),
      openLanding: (pkg) => this.landing.open(pkg.capability),
      uploadProgress: (pkg) => this.watcher.progress(pkg.capability),
      wakeIngest: () => this.ingest.wake(),
      startAudit: (user) => this.audits.startAudit(user),
      ...(this.targets.length > 0
        ? {
            repairPackage: (bagId: string, user: string) => this.repairer.repairSoon(bagId, user),
            openFromReplica: (bagId: string, record: FileRecord, range: { start: number; end: number }) =>
              openFromReplica(this.targets, (replica) => this.catalog.replication.get(bagId, replica)?.status === 'verified', bagId, record.path, range),
          }
        : {}),
      metrics: () => this.metrics.render(),
      observeResponse: (route, method, status, seconds) => this.metrics.observeResponse(route, method, status, seconds),
    };
  }

  /** A finished rsync upload becomes a `transfer` event of its package (idempotent by record). */
  private async recordTransfer(t: Transfer): Promise<void> {
    const pkg = this.catalog.packages.byUploadCapability(t.capability);
    if (pkg === undefined) return;
    const ok = t.exitStatus === 0;
    this.catalog.events.add({
      bagId: pkg.bagId,
      type: 'transfer',
      executor: pkg.user,
      outcome: ok ? 'success' : 'failure',
      detail: ok ? 'rsync upload finished' : `rsync upload ended with exit status ${t.exitStatus}`,
      date: t.endedAt,
    });
  }

  /** Graceful stop: no new connections, in-flight work parked, LMDB closed last. */
  async stop(): Promise<void> {
    const grace = this.config.http.shutdownGraceSeconds * 1000;
    if (this.http !== undefined) {
      const server = this.http.server;
      const deadline = setTimeout(() => server.closeAllConnections(), grace);
      deadline.unref();
      await this.http.close();
      clearTimeout(deadline);
    }
    await this.ingest.stop();
    await this.rotations?.stop();
    await this.replicator.stop();
    await this.continuous.stop();
    await this.repairer.stop();
    await this.audits.stop();
    for (const target of this.targets) target.close();
    await this.watcher.stop();
    await this.rsync?.stop();
    await this.pool.close();
    await this.catalog.close();
    this.logger.info('preservd stopped');
  }
}

/** Where people reach the daemon: its API, its rsync daemon (undefined when off), the admin token. */
function whereToFind(config: Config, layout: DataLayout): { api: string; rsync: string | undefined; adminToken: string } {
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
