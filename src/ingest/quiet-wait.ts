/**
 * The ingest's first stage: the upload link closed, then the wait until the upload is quiet
 * (watcher.ts), with what our rsync says of its transfers into it.
 */
import type { Package } from '../catalog/types.js';
import { exists } from '../fs/exists.js';
import type { IngestDeps } from './deps.js';
import { latestPendingTransfer } from './rsync/index.js';
import type { QuietOutcome } from './watcher.js';

/**
 * Closes the upload link, then waits until no rsync runs into it and nothing was written
 * lately, for at most `upload.quietTimeoutMs`. With our rsync's gate closed and no transfer
 * running nothing can write any more, so a file named like an rsync temp file is just a file.
 */
export async function waitForQuietUpload(
  deps: IngestDeps,
  pkg: Package,
  signal: AbortSignal,
): Promise<QuietOutcome> {
  const { landing, watcher, config } = deps;
  await landing.close(pkg.capability);
  if (!(await exists(landing.path(pkg.capability)))) return 'quiet';
  return watcher.waitForQuiet(pkg.capability, {
    quietMs: config.upload.quietMs,
    timeoutMs: config.upload.quietTimeoutMs,
    ...(config.upload.rsync.enabled ? { tempFileTimeoutMs: 0 } : {}),
    activeTransfers: () => landing.activeTransfers(pkg.capability),
    lastTransferEndedAt: () => lastTransferEndedAt(deps, pkg),
    signal,
  });
}

/**
 * When our rsync's last transfer into the upload ended: a record the transfer log has not
 * delivered yet, or a `transfer` event it already made of one (read in that order, so that a
 * delivery in between is not missed).
 */
async function lastTransferEndedAt(deps: IngestDeps, pkg: Package): Promise<number | undefined> {
  const { landing, catalog } = deps;
  const pending = await latestPendingTransfer(landing.layout.transfers, pkg.capability);
  let delivered: number | undefined;
  for (const event of catalog.events.forPackage(pkg.bagId)) {
    if (event.type === 'transfer') delivered = Math.max(delivered ?? 0, event.date);
  }
  if (pending === undefined) return delivered;
  return Math.max(pending, delivered ?? 0);
}
