/**
 * Repairing a package from its copies: every file is checked on the primary (read and hashed)
 * and on each replica holding a copy (read back), against the catalog's size and sha256. A file
 * damaged or missing on the primary is restored from a replica whose copy matches; a damaged or
 * missing replica object is rewritten from the primary (or from another replica that matches).
 * Every restored file is one `recovery` event; a file with no good copy anywhere is one `recovery`
 * failure and nothing is overwritten. Files the catalog does not know are left alone.
 *
 * A primary file is restored through a scratch file (primary-files.ts); a primary object that lost
 * its own files comes back whole from a replica (restore-primary.ts). One repair per package at a time.
 */
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import type { Catalog } from '../catalog/catalog.js';
import type { FileRecord } from '../catalog/types.js';
import type { Logger } from '../logger.js';
import { ServiceLoop, type Service } from '../service/service.js';
import type { Storage } from '../storage/storage.js';
import { exists } from '../fs/exists.js';
import { INVENTORY_SIDECAR } from '../ocfl/inventory.js';
import { contentKey, objectKey } from './keys.js';
import { objectFilesOf, type ObjectFile } from './object-files.js';
import { primaryMatches, restorePrimary } from './primary-files.js';
import { restoreObject } from './restore-primary.js';
import { ReplicaDown, type ReplicaTarget } from './target.js';

export interface RepairOptions {
  catalog: Catalog;
  storage: Storage;
  targets: readonly ReplicaTarget[];
  logger: Logger;
}

/** What one repair did. */
export interface RepairReport {
  restored: number;
  /** Files damaged somewhere with no good copy to restore them from. */
  unrecoverable: number;
}

/** Where a file is good: 'primary' or a replica's name. */
type Copy = string;
const PRIMARY = 'primary';

export class Repairer implements Service {
  private readonly running = new Map<string, Promise<RepairReport>>();
  /** Repairs come on demand (audits, the API): no pass of its own, only the run they belong to. */
  private readonly loop: ServiceLoop;

  constructor(private readonly opts: RepairOptions) {
    this.loop = new ServiceLoop(
      'repairs',
      () => Promise.resolve(),
      () => undefined,
    );
  }

  start(signal?: AbortSignal): void {
    this.loop.start(signal);
  }

  /** Repairs the package unless a repair of it is under way (then joins that one). */
  repair(bagId: string, executor: string): Promise<RepairReport> {
    const existing = this.running.get(bagId);
    if (existing !== undefined) return existing;
    const run = this.loop.hold(
      this.repairNow(bagId, executor, this.loop.signal).finally(() => this.running.delete(bagId)),
    );
    this.running.set(bagId, run);
    return run;
  }

  /** Whether a repair of the package is under way (a deaccession's removals wait for it). */
  isRepairing(bagId: string): boolean {
    return this.running.has(bagId);
  }

  /** Starts a repair in the background; its failure is logged. */
  repairSoon(bagId: string, executor: string): void {
    this.repair(bagId, executor).catch((err: unknown) => {
      if (!this.loop.signal.aborted)
        this.opts.logger.error(
          { err, bagId },
          `repair of ${bagId} could not be done: ${(err as Error).message}`,
        );
    });
  }

  /** Stops: repairs under way are abandoned; what they restored stays restored. */
  stop(): Promise<void> {
    return this.loop.stop();
  }

  private async repairNow(bagId: string, executor: string, signal: AbortSignal): Promise<RepairReport> {
    const { catalog, storage, logger } = this.opts;
    const pkg = catalog.packages.get(bagId);
    if (pkg?.storagePath === undefined) throw new Error(`package ${bagId} is not stored`);
    // A tombstone's content is being removed: nothing is restored, and no folder made, for it.
    if (pkg.deaccessioned !== undefined) return { restored: 0, unrecoverable: 0 };
    // Replicas whose copy was made (or was, before it was found damaged); a pending copy is the replicator's.
    const copies = catalog.replication.forPackage(bagId);
    const targets = this.opts.targets.filter((t) =>
      copies.some((c) => c.replica === t.name && c.status !== 'pending'),
    );
    const unavailable = new Set<string>();
    const whole = new Set(targets.map((t) => t.name));
    const report: RepairReport = { restored: 0, unrecoverable: 0 };
    const record = (outcome: 'success' | 'failure', detail: string) =>
      catalog.events.add({ bagId, type: 'recovery', executor, outcome, detail });
    report.restored += await this.restoreIfLost(bagId, targets, executor, signal);

    for (const file of catalog.files.list(bagId)) {
      signal.throwIfAborted();
      const sha256 = file.digests.sha256;
      if (sha256 === undefined) continue;
      const expected = { size: file.size, sha256 };
      const good = new Set<Copy>();
      const bad = new Set<Copy>();
      if (await primaryMatches(storage.storedFilePath(bagId, file), file, signal)) good.add(PRIMARY);
      else bad.add(PRIMARY);
      for (const target of targets) {
        if (unavailable.has(target.name)) continue;
        try {
          const back = await target.readBack(contentKey(bagId, file), expected, { signal });
          (back.kind === 'match' ? good : bad).add(target.name);
        } catch (err) {
          if (!(err instanceof ReplicaDown)) throw err;
          unavailable.add(target.name);
          whole.delete(target.name);
          logger.warn(
            { bagId, replica: target.name, reason: err.reason },
            `repair of ${bagId}: replica ${target.name} unavailable (${err.reason})`,
          );
        }
      }
      for (const place of bad) {
        const from = good.has(PRIMARY) ? PRIMARY : [...good][0];
        if (from === undefined) {
          report.unrecoverable++;
          whole.delete(place);
          record(
            'failure',
            `${file.path}: damaged or missing on ${describePlace(place)}, and no copy matches the catalog; nothing was overwritten`,
          );
          continue;
        }
        const source = await this.openSource(from, bagId, file, signal);
        if (place === PRIMARY)
          await restorePrimary(storage.layout, storage.storedFilePath(bagId, file), source, expected, signal);
        else {
          const target = this.opts.targets.find((t) => t.name === place)!;
          await target.write(contentKey(bagId, file), source, expected, { replace: true, signal });
          const back = await target.readBack(contentKey(bagId, file), expected, { signal });
          if (back.kind !== 'match') {
            whole.delete(place);
            report.unrecoverable++;
            record(
              'failure',
              `${file.path}: rewritten on ${describePlace(place)} from ${describePlace(from)}, but it still does not read back as the catalog records`,
            );
            continue;
          }
        }
        good.add(place);
        report.restored++;
        record('success', `${file.path}: restored on ${describePlace(place)} from ${describePlace(from)}`);
        logger.info(
          { bagId, path: file.path, to: place, from },
          `repair of ${bagId}: ${file.path} restored on ${describePlace(place)} from ${describePlace(from)}`,
        );
      }
    }
    await this.repairObjectFiles(bagId, whole, { record, report, signal });
    return report;
  }

  /**
   * A primary object that lost its own files (its sidecar, written last, is gone: a volume lost)
   * comes back whole, declaration and inventories too, from a replica whose copy matches; the
   * number of files restored.
   */
  private async restoreIfLost(
    bagId: string,
    targets: readonly ReplicaTarget[],
    executor: string,
    signal: AbortSignal,
  ): Promise<number> {
    const { catalog, storage, logger } = this.opts;
    if (targets.length === 0 || (await exists(join(storage.objectDir(bagId), INVENTORY_SIDECAR)))) return 0;
    return (await restoreObject({ catalog, storage, targets, logger, signal }, bagId, executor)).restored;
  }

  /**
   * After the content, a replica object's declaration and inventories that are missing or differ
   * from the primary's are rewritten from the primary's (read and checked by objectFilesOf), the
   * root inventory last. A primary object whose own are not right restores nothing. Then the
   * replicas whose copy is whole again are marked repaired.
   */
  private async repairObjectFiles(
    bagId: string,
    replicas: ReadonlySet<string>,
    run: {
      record: (outcome: 'success' | 'failure', detail: string) => void;
      report: RepairReport;
      signal: AbortSignal;
    },
  ): Promise<void> {
    const { record, report, signal } = run;
    const whole = new Set(replicas);
    const targets = this.opts.targets.filter((t) => whole.has(t.name));
    const files =
      targets.length === 0
        ? []
        : await objectFilesOf(this.opts.storage, bagId, this.opts.catalog.files.list(bagId));
    if (!Array.isArray(files))
      this.opts.logger.warn(
        { bagId, ...files },
        `repair of ${bagId}: the primary object's ${files.path} cannot be sent (${files.detail})`,
      );
    for (const target of Array.isArray(files) ? targets : [])
      for (const file of files as ObjectFile[]) {
        signal.throwIfAborted();
        const key = objectKey(bagId, file.path);
        if ((await target.readBack(key, file, { signal })).kind === 'match') continue;
        await target.write(key, Readable.from([file.bytes]), file, { replace: true, signal });
        const where = describePlace(target.name);
        if ((await target.readBack(key, file, { signal })).kind !== 'match') {
          whole.delete(target.name);
          report.unrecoverable++;
          record(
            'failure',
            `${file.path}: rewritten on ${where} from the primary copy, but it still does not read back as written`,
          );
          break;
        }
        report.restored++;
        record('success', `${file.path}: restored on ${where} from the primary copy`);
      }
    for (const name of whole) {
      const copy = this.opts.catalog.replication.get(bagId, name);
      if (copy !== undefined && copy.status !== 'verified')
        this.opts.catalog.replication.repaired(bagId, name);
    }
  }

  private async openSource(
    from: Copy,
    bagId: string,
    file: FileRecord,
    signal: AbortSignal,
  ): Promise<Readable> {
    if (from === PRIMARY) {
      const handle = await open(
        this.opts.storage.storedFilePath(bagId, file),
        constants.O_RDONLY | constants.O_NOFOLLOW,
      );
      return handle.createReadStream({ highWaterMark: 1 << 20 });
    }
    const stream = await this.opts.targets
      .find((t) => t.name === from)!
      .open(contentKey(bagId, file), undefined, signal);
    if (stream === undefined)
      throw new Error(`${file.path} vanished from replica ${from} while it was being repaired`);
    return stream;
  }
}

const describePlace = (place: Copy): string => (place === PRIMARY ? 'the primary copy' : `replica ${place}`);
