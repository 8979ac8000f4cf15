/**
 * The stages of one ingest, named after what they do, each safe to run again after a crash:
 *
 *   waitForQuiet → stage → validate → record intent → store → record result
 *
 * The first (`awaitQuiet`) holds no ingest slot and has a deadline (`upload.quietTimeoutMs`):
 * the worker runs it apart, so an upload still being written delays only its own item.
 *
 * Validation hashes huge files resumably (checkpointed-hasher.ts): a crash in the middle of one
 * costs the bytes since its last checkpoint, not the whole file. The transaction that ends an
 * ingest, DONE or FAILED, drops the bag's checkpoints.
 *
 * The catalog's intent is written before the disk changes and its result after, so start-up can
 * always tell where an item was: a bag is in landing/, in staging/ (as uploaded, or as the content
 * of an OCFL object being assembled), or in storage/ as a whole object, never in two places and
 * never half-moved (moves are renames within one filesystem; storage/assembly.ts).
 */
import { rename } from 'node:fs/promises';
import { errorsOf, warningsOf, type Package, type QueueItem, type StoredProblem } from '../catalog/types.js';
import { failpoint } from '../failpoints.js';
import { exists } from '../fs/exists.js';
import { firstInventory } from '../ocfl/inventory.js';
import { objectIdOf } from '../ocfl/layout.js';
import { assembleObject, commitObject } from '../storage/assembly.js';
import { Storage } from '../storage/storage.js';
import { CheckpointedHasher } from './checkpointed-hasher.js';
import { checkUploadHere, CHECKED_HERE_MAX_ENTRIES, holdsAtMost } from './check-here.js';
import { checkUploadIsolated, type CheckedUpload, type PreparedCheck } from './isolated-check.js';
import { KnownDigestsHasher } from './known-digests.js';
import { ingestProblem } from './problems.js';
import { waitForQuietUpload } from './quiet-wait.js';
import { returnUpload } from './recovery.js';
import {
  recordRevisionIntent,
  recordRevisionResult,
  storedAlready,
  storeRevisionVersion,
  versionOf,
} from './revision-steps.js';
import type { IngestDeps } from './deps.js';

/** What a step that may find the upload unusable returns: go on, or end with this problem. */
type StepOutcome = { ok: true } | { ok: false; problem: StoredProblem };

/**
 * Which events a failed ingest records: none (the item was replayed or its request is gone),
 * the ingestion's failure, or the validation's and the ingestion's.
 */
type FailureEvents = 'none' | 'ingestion' | 'validation-and-ingestion';

export class IngestStages {
  constructor(
    private readonly deps: IngestDeps,
    /** The ingest worker's run: aborted when it stops. */
    readonly signal: AbortSignal,
  ) {}

  /**
   * Closes the upload link and waits until the upload is quiet: true when the item may go on to
   * `ingest`, false when it ended here (FAILED `upload-still-writing` after the deadline, the
   * upload given back and its link opened again; or an error). Throws only when shutting down.
   */
  async awaitQuiet(item: QueueItem): Promise<boolean> {
    const pkg = this.deps.catalog.packages.get(item.bagId);
    if (pkg === undefined || storedAlready(pkg, item)) return true; // ingest() ends it at once
    const started = Date.now();
    try {
      if ((await waitForQuietUpload(this.deps, pkg, this.signal)) === 'quiet') return true;
      this.deps.logger.warn(
        { queueItem: item.id, bagId: pkg.bagId },
        'ingest failed: the upload was still being written at the deadline',
      );
      await this.giveBack(
        item,
        pkg,
        ingestProblem({
          code: 'upload-still-writing',
          bagId: pkg.bagId,
          waitedMs: this.deps.config.upload.quietTimeoutMs,
        }),
        started,
      );
    } catch (err) {
      if (this.signal.aborted) throw err; // shutting down: it waits again at the next start
      if (this.deps.storage.isOutOfSpace(err)) {
        this.deps.logger.error(
          { err, queueItem: item.id, bagId: pkg.bagId },
          'ingest failed: the disk is full',
        );
        await this.giveBack(item, pkg, ingestProblem({ code: 'disk-full', bagId: pkg.bagId }), started);
      } else {
        this.deps.logger.error({ err, queueItem: item.id, bagId: pkg.bagId }, 'ingest failed unexpectedly');
        await this.giveBack(item, pkg, ingestProblem({ code: 'internal-error' }), started);
      }
    }
    return false;
  }

  /**
   * Drives one PENDING item to DONE or FAILED, from whatever stage it had reached; an item still
   * `waiting` has been through `awaitQuiet`. `prepared`: a check worker started for it (used or closed by the caller).
   */
  async ingest(item: QueueItem, prepared?: PreparedCheck): Promise<void> {
    const { catalog, logger } = this.deps;
    const started = Date.now();
    const pkg = catalog.packages.get(item.bagId);
    if (pkg === undefined) {
      const errors = [ingestProblem({ code: 'request-missing', bagId: item.bagId })];
      catalog.outcomeTransaction(() => catalog.queue.finish(item.id, { status: 'FAILED', errors }));
      return;
    }
    if (storedAlready(pkg, item) && item.stage !== 'validated') {
      this.fail(item, pkg, [ingestProblem({ code: 'already-stored', bagId: pkg.bagId })], started, 'none');
      return;
    }
    logger.info({ queueItem: item.id, bagId: pkg.bagId, stage: item.stage }, 'ingest started');
    let stage = item.stage;
    /** The upload's files flushed while it was validated (the store need not flush them again). */
    let flushed: Promise<ReadonlySet<string>> | undefined;
    /** Its files the validation found as they were flushed on landing (known-digests.ts). */
    const onDisk = new Set<string>();
    try {
      if (stage === 'waiting') {
        failpoint('ingest:before-stage');
        const staged = await this.stage(pkg);
        if (!staged.ok) return await this.giveBack(item, pkg, staged.problem, started);
        failpoint('ingest:after-stage');
        stage = catalog.queue.advance(item.id, 'staged').stage;
      }
      if (stage === 'staged') {
        // Again after a crash: the bag may be back in landing/.
        const staged = await this.stage(pkg);
        if (!staged.ok) return await this.giveBack(item, pkg, staged.problem, started);
        flushed = this.deps.landed?.takeOver(pkg.bagId, this.deps.storage.stagingDir(pkg.bagId), {
          recorded: versionOf(item) === 1, // a revision's store flushes what it writes itself
        });
        const checked = await this.validate(pkg, onDisk, prepared);
        try {
          if (!checked.valid) {
            await this.returnUpload(pkg);
            failpoint('ingest:after-return');
            this.fail(item, pkg, checked.problems, started, 'validation-and-ingestion');
            return;
          }
          failpoint('ingest:after-validate');
          await this.recordIntent(item, pkg, checked);
        } finally {
          await checked.close();
        }
        failpoint('ingest:after-intent');
        stage = 'validated';
      }
      if (stage === 'validated') {
        const storagePath = Storage.storagePath(pkg.bagId);
        if (versionOf(item) > 1) await storeRevisionVersion(this.deps, item, pkg);
        else {
          for (const path of (await flushed) ?? []) onDisk.add(path);
          await this.store(item, pkg, onDisk);
        }
        failpoint('ingest:after-store');
        this.recordResult(item, pkg, storagePath, started);
        failpoint('ingest:after-result');
      }
    } catch (err) {
      if (this.signal.aborted) throw err; // shutting down: park at the recorded stage
      if (this.deps.storage.isOutOfSpace(err)) {
        // The operator's problem, but the depositor must know why and that nothing is lost.
        logger.error({ err, queueItem: item.id, bagId: pkg.bagId }, 'ingest failed: the disk is full');
        const full = ingestProblem({ code: 'disk-full', bagId: pkg.bagId });
        return await this.giveBack(item, pkg, full, started);
      }
      logger.error({ err, queueItem: item.id, bagId: pkg.bagId }, 'ingest failed unexpectedly');
      await this.giveBack(item, pkg, ingestProblem({ code: 'internal-error' }), started);
    }
  }

  /** Ends an ingest whose upload cannot be used: whatever there is goes back to the depositor. */
  private async giveBack(
    item: QueueItem,
    pkg: Package,
    problem: StoredProblem,
    started: number,
  ): Promise<void> {
    await this.returnUpload(pkg);
    this.fail(item, pkg, [problem], started, 'ingestion');
  }

  /** Gives the upload back (recovery.ts); if that fails, it waits in staging/ for the next start. */
  private async returnUpload(pkg: Package): Promise<void> {
    await returnUpload(this.deps, pkg).catch((err: unknown) =>
      this.deps.logger.error({ err, bagId: pkg.bagId }, 'could not return the upload to its landing folder'),
    );
  }

  /** Moves the upload out of the uploader's reach into staging/ (a rename; done once). */
  private async stage(pkg: Package): Promise<StepOutcome> {
    const { landing, storage } = this.deps;
    const staged = storage.stagingDir(pkg.bagId);
    if (await exists(staged)) return { ok: true };
    await landing.close(pkg.capability);
    const upload = landing.path(pkg.capability);
    if (!(await exists(upload)))
      return { ok: false, problem: ingestProblem({ code: 'upload-missing', bagId: pkg.bagId }) };
    await rename(upload, staged);
    return { ok: true };
  }

  /**
   * Checks the staged upload, on this thread if it is small (check-here.ts), else in a worker
   * thread (isolated-check.ts); the caller closes what it returns.
   */
  private async validate(
    pkg: Package,
    onDisk: Set<string>,
    prepared?: PreparedCheck,
  ): Promise<CheckedUpload> {
    const { storage, catalog, config, logger } = this.deps;
    const dir = storage.stagingDir(pkg.bagId);
    const checkpointed = new CheckpointedHasher(
      this.deps.hasher,
      catalog.checkpoints,
      { bagId: pkg.bagId, dir },
      config.ingest.resumeAboveBytes,
      logger,
    );
    const { landed } = this.deps;
    const bag = { bagId: pkg.bagId, dir };
    const hasher =
      landed === undefined ? checkpointed : new KnownDigestsHasher(checkpointed, landed, bag, onDisk);
    const request = { bagId: pkg.bagId, externalId: pkg.externalId, contentType: pkg.contentType };
    const rules = config.contentTypes[pkg.contentType];
    const options = { hasher, request, rules, signal: this.signal };
    const verdict = holdsAtMost(dir, CHECKED_HERE_MAX_ENTRIES)
      ? await checkUploadHere(dir, options)
      : await checkUploadIsolated(dir, options, prepared);
    if (verdict.report.fileCount === 0) {
      // One clear problem instead of "no bagit.txt, no data/, no manifest".
      const empty = ingestProblem({ code: 'upload-empty', bagId: pkg.bagId });
      return { ...verdict, problems: [empty], valid: false };
    }
    return verdict;
  }

  /** The intent: the files about to be stored and the successful validation, before the move. */
  private async recordIntent(item: QueueItem, pkg: Package, checked: CheckedUpload): Promise<void> {
    const { catalog } = this.deps;
    const { report, problems } = checked;
    const warnings = warningsOf(problems);
    const detail = `valid BagIt ${report.version ?? ''} bag: ${report.payloadFiles} payload files, ${report.payloadBytes} bytes, ${report.algorithms.join(', ')} manifests${
      warnings.length > 0 ? `; warnings:\n${warnings.map((w) => w.message).join('\n')}` : ''
    }`;
    if (versionOf(item) > 1) return recordRevisionIntent(this.deps, item, pkg, checked, detail);
    // The records first, a batch to a transaction as the check hands them over (harmless until
    // the intent: unstored), then the intent itself in one.
    catalog.files.unstage(pkg.bagId);
    let totalBytes = 0;
    for await (const files of checked.files()) {
      totalBytes += catalog.files.stageBatch(pkg.bagId, files);
      failpoint('ingest:after-file-batch');
    }
    // The worker's heap goes before the payload list is serialised below, not after.
    await checked.close();
    catalog.transaction(() => {
      catalog.files.staged(pkg.bagId, totalBytes);
      catalog.events.add({
        bagId: pkg.bagId,
        type: 'validation',
        executor: item.user,
        outcome: 'success',
        detail,
      });
      catalog.queue.advance(item.id, 'validated');
    });
  }

  /**
   * Makes the staged bag an OCFL object in staging/ and renames it into the root; after a crash
   * it may be part-assembled (finished here) or already there. Its inventory is made from the
   * catalog's records, the depositor the version's user.
   */
  /** `onDisk`: the paths of files known to be on disk already (none known after a restart). */
  private async store(item: QueueItem, pkg: Package, onDisk?: ReadonlySet<string>): Promise<void> {
    const { storage, catalog } = this.deps;
    if (await exists(storage.objectDir(pkg.bagId))) return;
    const files = [...catalog.files.iterate(pkg.bagId)].map((f) => {
      if (f.digests.sha256 === undefined) throw new Error(`${f.path} of ${pkg.bagId} has no sha256 recorded`);
      return { path: f.path, digests: { ...f.digests, sha256: f.digests.sha256 } };
    });
    const inventory = firstInventory(objectIdOf(pkg.bagId), files, {
      created: Date.now(),
      user: item.user,
      message: 'deposit',
    });
    const { landed } = this.deps;
    await assembleObject(
      storage,
      pkg.bagId,
      inventory,
      (path, abs) => onDisk?.has(path) === true || (landed?.onDisk(pkg.bagId, path, abs) ?? false),
    );
    failpoint('ingest:after-assembly');
    await commitObject(storage, pkg.bagId);
  }

  private recordResult(item: QueueItem, pkg: Package, storagePath: string, started: number): void {
    const { catalog, landing, logger } = this.deps;
    let bytes = 0;
    if (versionOf(item) > 1) bytes = recordRevisionResult(this.deps, item, pkg);
    else
      catalog.outcomeTransaction(() => {
        catalog.packages.markStored(pkg.bagId, storagePath);
        bytes = catalog.files.bytes(pkg.bagId);
        catalog.events.add({
          bagId: pkg.bagId,
          type: 'ingestion',
          executor: item.user,
          outcome: 'success',
          detail: `stored at ${storagePath}`,
        });
        catalog.queue.finish(item.id, { status: 'DONE' });
        catalog.checkpoints.clearPackage(pkg.bagId);
        catalog.landedHashes.clearPackage(pkg.bagId);
        this.deps.replication?.packageStored(pkg.bagId);
      });
    // The landing folder is gone, so the rsync gate refuses the link anyway; drop its marker.
    landing
      .reopen(pkg.capability)
      .catch((err: unknown) =>
        logger.warn({ err, bagId: pkg.bagId }, 'could not remove the closed marker of a stored upload'),
      );
    const seconds = (Date.now() - started) / 1000;
    logger.info({ queueItem: item.id, bagId: pkg.bagId, bytes, seconds }, 'ingest done');
    this.deps.observer?.finished('DONE', seconds, bytes, []);
  }

  private fail(
    item: QueueItem,
    pkg: Package,
    problems: StoredProblem[],
    started: number,
    events: FailureEvents,
  ): void {
    const { catalog, logger } = this.deps;
    const errors = errorsOf(problems);
    const version = versionOf(item);
    const detail = `${version > 1 ? `version ${version}: ` : ''}${errors.map((p) => p.message).join('\n')}`;
    catalog.outcomeTransaction(() => {
      if (events === 'validation-and-ingestion')
        catalog.events.add({
          bagId: pkg.bagId,
          type: 'validation',
          executor: item.user,
          outcome: 'failure',
          detail,
        });
      if (events !== 'none')
        catalog.events.add({
          bagId: pkg.bagId,
          type: 'ingestion',
          executor: item.user,
          outcome: 'failure',
          detail,
        });
      catalog.queue.finish(item.id, { status: 'FAILED', errors: problems });
      catalog.checkpoints.clearPackage(pkg.bagId);
    });
    const seconds = (Date.now() - started) / 1000;
    logger.info(
      {
        queueItem: item.id,
        bagId: pkg.bagId,
        problems: errors.length,
        codes: [...new Set(errors.map((p) => p.code))],
      },
      'ingest failed',
    );
    this.deps.observer?.finished('FAILED', seconds, 0, errors);
  }
}
