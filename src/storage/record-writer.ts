/**
 * Keeps the preservd record in the primary storage root (ocfl/record.ts) up with the catalog: the
 * packages whose record is behind (marked in the catalog in the transaction of each change,
 * catalog/storage-records.ts) have their `logs/` rewritten within `storage.recordDelayMs`, and all
 * of them at a graceful stop. Everything written is read from the committed catalog, so storage
 * never holds an event the catalog lacks. The same bytes go to every replica too
 * (replicas/record-copies.ts): the repository's record to each, a package's logs to each whose
 * copy is verified; a replica that cannot take them leaves the record marked, tried again.
 *
 * Each file is written outside the root (in `staging/`), flushed, then renamed into place: under
 * the root there is only ever a whole old file or a whole new one.
 */
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { mkdir, open, readdir, rename, stat, unlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Logger } from 'pino';
import type { Catalog } from '../catalog/catalog.js';
import type { RecordKey } from '../catalog/storage-records.js';
import { OBJECT_DECLARATION } from '../ocfl/layout.js';
import {
  EVENTS_RECORD,
  eventsRecordOf,
  type KeptVersion,
  LOGS,
  PACKAGE_RECORD,
  packageRecordOf,
  recordBytes,
  REPOSITORY_RECORD,
  repositoryRecordOf,
  TOMBSTONES_RECORD,
  tombstoneOf,
  tombstonesRecordOf,
} from '../ocfl/record.js';
import { writeRecordToReplicas, type RecordFile, type ReplicaTarget } from '../replicas/index.js';
import { ServiceLoop, type Service } from '../service/service.js';
import type { Storage } from './storage.js';

/** Records read from the catalog's set per step. */
const BATCH = 256;
/** Our temporary files in `staging/` (a crash may leave one; start() removes them). */
const TEMPORARY = /^\.preservd-record-[0-9a-f]{16}\.tmp$/;

export interface RecordWriterOptions {
  catalog: Catalog;
  storage: Storage;
  contentTypes: readonly string[];
  /** The replicas, which carry the record too. */
  targets?: readonly ReplicaTarget[];
  /** Longest a change waits before its record is written. */
  delayMs: number;
  logger: Logger;
}

export class RecordWriter implements Service {
  private readonly loop: ServiceLoop;
  /** Packages already reported as having no object in storage (reported once per run). */
  private readonly reported = new Set<string>();

  constructor(private readonly o: RecordWriterOptions) {
    this.loop = new ServiceLoop(
      'record writer',
      (signal) => this.pass(signal),
      (err) => o.logger.error({ err }, 'writing the preservd record to storage failed; trying again'),
    );
  }

  async start(signal: AbortSignal): Promise<void> {
    for (const name of await readdir(this.o.storage.stagingRoot).catch(() => [] as string[]))
      if (TEMPORARY.test(name)) await unlink(join(this.o.storage.stagingRoot, name)).catch(() => undefined);
    // The content types come from the configuration, which may have changed since the last run.
    this.o.catalog.records.markRepository();
    this.loop.start(signal);
  }

  /** Stops the timer, then writes every record still behind: a graceful stop leaves storage up to date. */
  async stop(): Promise<void> {
    await this.loop.stop();
    await this.writeBehind(undefined);
  }

  /** Writes what is behind now (tests, and the pass). */
  async flush(): Promise<void> {
    await this.loop.runPass();
  }

  private async pass(signal: AbortSignal): Promise<void> {
    try {
      await this.writeBehind(signal);
    } finally {
      this.loop.wakeIn(this.o.delayMs);
    }
  }

  private async writeBehind(signal: AbortSignal | undefined): Promise<void> {
    for (let after: string | undefined, done = false; !done;) {
      const batch = this.o.catalog.records.pending(BATCH, after);
      for (const { key, generation } of batch) {
        if (signal?.aborted === true) return;
        try {
          if (await this.write(key)) this.o.catalog.records.written(key, generation);
        } catch (err) {
          // Left marked: the next pass tries again; the others are not held up by it.
          this.o.logger.error({ err, record: key }, 'could not write a preservd record to storage');
        }
      }
      after = batch.at(-1)?.cursor;
      done = batch.length < BATCH;
    }
  }

  /** Writes one record from the catalog as it is now; false when it must wait (no object yet). */
  private async write(key: RecordKey): Promise<boolean> {
    const { catalog, storage } = this.o;
    if (key.kind === 'repository') {
      const record = repositoryRecordOf(
        catalog.records.ensureRepositoryId(),
        catalog.users.list(),
        catalog.grants.list(),
        this.o.contentTypes,
      );
      const bytes = recordBytes(record);
      await this.place(join(storage.storageRoot, REPOSITORY_RECORD), bytes);
      return this.toReplicas(this.o.targets ?? [], undefined, [{ path: REPOSITORY_RECORD, bytes }]);
    }
    const { bagId } = key;
    // A tombstone's record is the root's tombstones file: its object is (being) removed.
    if (catalog.packages.get(bagId)?.deaccessioned !== undefined) return this.writeTombstones();
    // An open request has no object; storing it marks it again.
    if (catalog.packages.get(bagId)?.stored !== true) return true;
    const object = storage.objectDir(bagId);
    if (!(await isFile(join(object, OBJECT_DECLARATION.name)))) {
      if (!this.reported.has(bagId))
        this.o.logger.warn({ bagId, object }, 'a stored package has no OCFL object yet; its record waits');
      this.reported.add(bagId);
      return false;
    }
    // Everything read in one turn of the event loop: one state of the catalog.
    const pkg = catalog.packages.get(bagId)!;
    const done = catalog.queue.forPackage(bagId).filter((i) => i.status === 'DONE');
    const packageRecord = recordBytes(packageRecordOf(pkg, done, keptVersions(catalog, bagId)));
    const events = recordBytes(eventsRecordOf(bagId, catalog.events.forPackage(bagId)));
    const verified = (this.o.targets ?? []).filter(
      (t) => catalog.replication.get(bagId, t.name)?.status === 'verified',
    );
    const logs = join(object, LOGS);
    await mkdir(logs, { mode: storage.layout.storedFolderMode }).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
    await this.place(join(logs, PACKAGE_RECORD), packageRecord);
    await this.place(join(logs, EVENTS_RECORD), events);
    return this.toReplicas(verified, bagId, [
      { path: `${LOGS}/${PACKAGE_RECORD}`, bytes: packageRecord },
      { path: `${LOGS}/${EVENTS_RECORD}`, bytes: events },
    ]);
  }

  /** Every tombstone, in one root file, to the primary and every replica (each must have it before its copy goes). */
  private async writeTombstones(): Promise<boolean> {
    const { catalog, storage } = this.o;
    const tombstones = [...catalog.packages.tombstones()].map((pkg) =>
      tombstoneOf(
        pkg,
        catalog.queue.forPackage(pkg.bagId).filter((i) => i.status === 'DONE'),
        catalog.deaccessions.get(pkg.deaccessioned!.requestId)!,
        catalog.events.forPackage(pkg.bagId),
        keptVersions(catalog, pkg.bagId),
      ),
    );
    const bytes = recordBytes(tombstonesRecordOf(tombstones));
    await this.place(join(storage.storageRoot, TOMBSTONES_RECORD), bytes);
    return this.toReplicas(this.o.targets ?? [], undefined, [{ path: TOMBSTONES_RECORD, bytes }]);
  }

  /** The record's files to the replicas; false (the record stays marked) when one could not take them. */
  private async toReplicas(
    targets: readonly ReplicaTarget[],
    bagId: string | undefined,
    files: RecordFile[],
  ): Promise<boolean> {
    if (targets.length === 0) return true;
    const behind = await writeRecordToReplicas(targets, bagId, files);
    if (behind.length > 0)
      this.o.logger.warn(
        { bagId, behind },
        `the preservd record could not be written to every replica (${behind.join('; ')}); trying again`,
      );
    return behind.length === 0;
  }

  /** The file written in `staging/`, flushed, renamed to `target`, its folder flushed. */
  private async place(target: string, bytes: Buffer): Promise<void> {
    const tmp = join(this.o.storage.stagingRoot, `.preservd-record-${randomBytes(8).toString('hex')}.tmp`);
    try {
      const handle = await open(tmp, 'wx', 0o640);
      try {
        await handle.writeFile(bytes);
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(tmp, target);
    } catch (err) {
      await unlink(tmp).catch(() => undefined);
      throw err;
    }
    const folder = await open(dirname(target), constants.O_RDONLY | constants.O_DIRECTORY);
    try {
      await folder.sync();
    } finally {
      await folder.close();
    }
  }
}

/** A revised package's versions as the catalog keeps them, each with its revision. */
function keptVersions(catalog: Catalog, bagId: string): KeptVersion[] {
  return catalog.revisions
    .versionsOf(bagId)
    .map((v) => ({ ...v, revision: catalog.revisions.get(bagId, v.version) }));
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}
