/**
 * What the routes need from the rest of the daemon. `http` calls into these; nothing below calls
 * back into `http`.
 */
import type { Catalog } from '../catalog/catalog.js';
import type { Readable } from 'node:stream';
import type { Audit, FileRecord, Package } from '../catalog/types.js';
import type { Config } from '../config/config.js';
import type { Storage } from '../storage/storage.js';
import type { UploadProgress } from '../ingest/watcher.js';
import type { DownloadsInFlight } from '../download/index.js';

export interface HttpContext {
  config: Config;
  catalog: Catalog;
  storage: Storage;
  /** Where the client uploads this request's bag. */
  uploadLink(pkg: Package): string;
  /** Creates the landing folder of a new request. */
  openLanding(pkg: Package): Promise<void>;
  /** (Absent offline.) Makes an open revision's landing folder, pre-filled with the package's current version. */
  prefillRevision?: (pkg: Package) => Promise<void>;
  /** Abandons the open revision `version` of the package: its upload closed and removed. */
  abandonRevision?: (pkg: Package, version: number) => Promise<void>;
  /** Upload progress of an open request, from the landing watcher (a scan when it is not watched). */
  uploadProgress(pkg: Package): Promise<UploadProgress | undefined>;
  /** Tells the ingest worker a queue item is waiting. */
  wakeIngest(): void;
  /** Starts an audit (or returns the one in progress) and wakes the audit runner. */
  startAudit(user: string): { created: Audit } | { existing: Audit };
  /** Where an approved deaccession removes content: `primary` and each replica's name (default: the primary only). */
  deaccessionCopies?: readonly string[];
  /** Tells the remover an approved deaccession's content is to go (replicas/removals.ts). */
  wakeRemover?: () => void;
  /** Starts a repair of the package from its copies (replicas), recorded as done by `user`. */
  repairPackage?: (bagId: string, user: string) => void;
  /**
   * Bytes of a stored file from a replica whose copy is verified, for a download when the
   * primary cannot be read; undefined when no replica has one.
   */
  openFromReplica?: (
    bagId: string,
    record: FileRecord,
    range: { start: number; end: number },
  ) => Promise<Readable | undefined>;
  /** Prometheus text for /metrics, if metrics are on. */
  metrics?: () => Promise<{ contentType: string; body: string }>;
  /** Downloads being answered, counted for the landed hasher, which waits while there are any. */
  downloads?: DownloadsInFlight;
  /** Records an HTTP response for metrics. */
  observeResponse?: (route: string, method: string, status: number, seconds: number) => void;
}
