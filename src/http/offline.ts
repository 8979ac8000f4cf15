/**
 * The real HTTP application (buildServer) without a daemon behind it: a throwaway catalog in a
 * temporary folder, and no rsync, watcher, ingest or audits. For writing the OpenAPI document
 * (`npm run openapi`) and for tests that need the route table or fastify's inject; never for
 * serving anyone.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { Catalog } from '../catalog/catalog.js';
import { defaults, type Config } from '../config/config.js';
import { Metrics } from '../metrics.js';
import { uploadLink } from '../ingest/upload-link.js';
import { DataLayout } from '../storage/layout.js';
import { Storage } from '../storage/storage.js';
import type { HttpContext } from './context.js';
import { buildServer } from './server.js';

export interface OfflineServer {
  app: FastifyInstance;
  catalog: Catalog;
  /** Closes the app and the catalog and deletes the temporary folder. */
  close(): Promise<void>;
}

function offline(what: string): never {
  throw new Error(`${what} needs a running daemon`);
}

export async function offlineServer(
  config: Partial<Config> = {},
  overrides: Partial<HttpContext> = {},
): Promise<OfflineServer> {
  const dataDir = mkdtempSync(join(tmpdir(), 'preservd-offline-'));
  const full: Config = { ...defaults(), ...config, dataDir };
  const layout = new DataLayout(dataDir);
  const catalog = Catalog.open(layout);
  const metrics = new Metrics(catalog);
  const ctx: HttpContext = {
    config: full,
    catalog,
    storage: new Storage(layout),
    uploadLink: (pkg) => uploadLink(full.upload, pkg),
    openLanding: async () => offline('an upload'),
    uploadProgress: async () => undefined,
    wakeIngest: () => undefined,
    startAudit: () => offline('an audit'),
    // As the daemon wires them, so that the same routes exist.
    metrics: () => metrics.render(),
    observeResponse: (route, method, status, seconds) =>
      metrics.observeResponse(route, method, status, seconds),
    ...overrides,
  };
  const app = await buildServer(ctx);
  await app.ready();
  return {
    app,
    catalog,
    close: async () => {
      await app.close();
      await catalog.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** The OpenAPI document the daemon would serve with this configuration. */
export async function openapiDocument(config: Partial<Config> = {}): Promise<unknown> {
  const server = await offlineServer(config);
  try {
    return server.app.swagger();
  } finally {
    await server.close();
  }
}
