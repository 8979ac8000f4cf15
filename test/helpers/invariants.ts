/**
 * The invariants a data directory and its catalog must hold once the daemon has stopped (after
 * a crash and a restart that settled): what the catalog says is stored is on disk, byte for
 * byte; what is on disk belongs to the catalog; nothing is left half-done.
 *
 * - every stored package's OCFL object exists where the layout puts it, with its declaration and
 *   its root and v1 inventories (identical, each sidecar the sha256 of its inventory), and its
 *   `v1/content/` holds exactly its recorded files, each with its recorded size and sha256; it
 *   has one DONE queue item and one successful ingestion event;
 * - storage is an OCFL root (declaration, layout files) whose every other entry is a stored
 *   package's object (no orphans, no temporary files); staging is empty;
 * - every unstored request has its landing folder, open to uploads (a failed upload is
 *   recoverable); no landing folder belongs to nobody;
 * - no hashing checkpoint outlives its ingest (none for a bag without a PENDING item);
 * - no queue item is PENDING; every audit finished, its counts add up, with exactly one
 *   fixity check event per package and nothing left to do.
 *
 * The catalog is opened read-only: the check never changes what it checks. Problems come back
 * as typed values, all of them, so a failing test shows every broken invariant at once.
 */
import { createHash } from 'node:crypto';
import { createReadStream, existsSync, readFileSync } from 'node:fs';
import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Test } from 'tap';
import { Catalog } from '../../src/catalog/catalog.js';
import { INVENTORY, INVENTORY_SIDECAR } from '../../src/ocfl/inventory.js';
import {
  layoutFiles,
  OBJECT_DECLARATION,
  packageObjectPath,
  ROOT_DECLARATION,
} from '../../src/ocfl/layout.js';
import { DataLayout } from '../../src/storage/layout.js';
import { Storage } from '../../src/storage/storage.js';
import { filesUnder } from './walk.js';

type ViolationCode =
  | 'stored-folder-missing'
  | 'object-files'
  | 'root-files'
  | 'stored-file-missing'
  | 'stored-file-extra'
  | 'stored-file-size'
  | 'stored-file-digest'
  | 'stored-without-done-item'
  | 'stored-ingestion-events'
  | 'stored-upload-left'
  | 'done-item-not-stored'
  | 'storage-orphan'
  | 'staging-leftover'
  | 'queue-pending'
  | 'checkpoint-left'
  | 'upload-missing'
  | 'upload-closed'
  | 'landing-orphan'
  | 'audit-unfinished'
  | 'audit-counts'
  | 'audit-events';

export interface Violation {
  code: ViolationCode;
  bagId?: string;
  /** Relative to the data directory or the bag, whichever the code is about. */
  path?: string;
  detail?: string;
}

async function sha256(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

const listOrEmpty = (dir: string): Promise<string[]> => readdir(dir).catch(() => [] as string[]);

/** Files a root may hold beside the layout's, written by the preservd record (STORAGE.md). */
const ROOT_RECORDS = new Set(['preservd-repository.json']);

/**
 * What is wrong with a stored package's object beside its content: its declaration, its two
 * inventories (identical, for this object, with their sidecars) and nothing else at its top
 * (`logs/` aside, the preservd record's).
 */
async function objectViolations(storage: Storage, bagId: string): Promise<Violation[]> {
  const dir = storage.objectDir(bagId);
  if (!existsSync(dir)) return []; // reported as stored-folder-missing
  const found: Violation[] = [];
  const wrong = (detail: string): void => void found.push({ code: 'object-files', bagId, detail });
  const top = (await readdir(dir)).sort();
  const expected = [OBJECT_DECLARATION.name, INVENTORY, INVENTORY_SIDECAR, 'v1'];
  if (top.filter((n) => n !== 'logs').join() !== [...expected].sort().join()) wrong(`top: ${top.join(', ')}`);
  if (!existsSync(join(dir, OBJECT_DECLARATION.name))) return found;
  if (readFileSync(join(dir, OBJECT_DECLARATION.name), 'utf8') !== OBJECT_DECLARATION.text)
    wrong('object declaration');
  const inventories = [dir, join(dir, 'v1')].map((d) => {
    const json = existsSync(join(d, INVENTORY)) ? readFileSync(join(d, INVENTORY)) : undefined;
    const sidecar = existsSync(join(d, INVENTORY_SIDECAR))
      ? readFileSync(join(d, INVENTORY_SIDECAR), 'utf8')
      : '';
    if (json === undefined) wrong(`no ${d}/${INVENTORY}`);
    else if (sidecar !== `${createHash('sha256').update(json).digest('hex')} ${INVENTORY}\n`)
      wrong(`sidecar of ${d}/${INVENTORY}`);
    return json;
  });
  if (inventories[0] !== undefined && inventories[1] !== undefined && !inventories[0].equals(inventories[1]))
    wrong('root and v1 inventories differ');
  return found;
}

/** Every broken invariant of the stopped daemon's data directory; [] when all hold. */
async function findViolations(dataDir: string): Promise<Violation[]> {
  const violations: Violation[] = [];
  const layout = new DataLayout(dataDir);
  const storage = new Storage(layout);
  const catalog = Catalog.open(layout, { readOnly: true });
  try {
    const expectedInStorage = new Set<string>();
    const capabilities = new Set<string>();
    const items = [...catalog.queue.list()];
    for (const item of items) {
      if (item.status === 'PENDING')
        violations.push({
          code: 'queue-pending',
          bagId: item.bagId,
          detail: `queue item ${item.id} at stage ${item.stage}`,
        });
    }
    const pendingBags = new Set(items.filter((i) => i.status === 'PENDING').map((i) => i.bagId));
    for (const checkpoint of catalog.checkpoints.list()) {
      if (!pendingBags.has(checkpoint.bagId))
        violations.push({
          code: 'checkpoint-left',
          bagId: checkpoint.bagId,
          path: checkpoint.path,
          detail: 'a hashing checkpoint of an ingest that ended',
        });
    }

    for (const pkg of catalog.packages.list()) {
      capabilities.add(pkg.capability);
      const landingDir = join(layout.landing, pkg.capability);
      const done = items.filter((i) => i.bagId === pkg.bagId && i.status === 'DONE');
      if (!pkg.stored) {
        if (done.length > 0)
          violations.push({
            code: 'done-item-not-stored',
            bagId: pkg.bagId,
            detail: `queue item ${done[0]!.id} is DONE`,
          });
        if (items.some((i) => i.bagId === pkg.bagId && i.status === 'PENDING')) continue; // reported above
        if (!existsSync(landingDir))
          violations.push({ code: 'upload-missing', bagId: pkg.bagId, path: `landing/${pkg.capability}` });
        if (existsSync(join(layout.closed, pkg.capability)))
          violations.push({
            code: 'upload-closed',
            bagId: pkg.bagId,
            detail: 'the upload link of an unstored request stays closed',
          });
        continue;
      }

      if (done.length !== 1)
        violations.push({
          code: 'stored-without-done-item',
          bagId: pkg.bagId,
          detail: `${done.length} DONE queue items`,
        });
      const ingestions = [...catalog.events.forPackage(pkg.bagId)].filter(
        (e) => e.type === 'ingestion' && e.outcome === 'success',
      );
      if (ingestions.length !== 1)
        violations.push({
          code: 'stored-ingestion-events',
          bagId: pkg.bagId,
          detail: `${ingestions.length} successful ingestion events`,
        });
      if (existsSync(landingDir))
        violations.push({ code: 'stored-upload-left', bagId: pkg.bagId, path: `landing/${pkg.capability}` });
      if (pkg.storagePath === undefined) {
        violations.push({
          code: 'stored-folder-missing',
          bagId: pkg.bagId,
          detail: 'stored without a storage path',
        });
        continue;
      }
      expectedInStorage.add(pkg.storagePath);
      if (pkg.storagePath !== packageObjectPath(pkg.bagId))
        violations.push({ code: 'stored-folder-missing', bagId: pkg.bagId, detail: `at ${pkg.storagePath}` });
      violations.push(...(await objectViolations(storage, pkg.bagId)));
      const dir = storage.firstContentDir(pkg.bagId);
      if (!existsSync(dir)) {
        violations.push({
          code: 'stored-folder-missing',
          bagId: pkg.bagId,
          path: `storage/${pkg.storagePath}`,
        });
        continue;
      }
      const recorded = catalog.files.list(pkg.bagId);
      const onDisk = new Set(filesUnder(dir));
      for (const file of recorded) {
        if (!onDisk.delete(file.path)) {
          violations.push({ code: 'stored-file-missing', bagId: pkg.bagId, path: file.path });
          continue;
        }
        const abs = Storage.resolveInside(dir, file.path);
        const size = (await lstat(abs)).size;
        if (size !== file.size) {
          violations.push({
            code: 'stored-file-size',
            bagId: pkg.bagId,
            path: file.path,
            detail: `catalog ${file.size}, disk ${size}`,
          });
          continue;
        }
        const digest = await sha256(abs);
        if (digest !== file.digests.sha256)
          violations.push({
            code: 'stored-file-digest',
            bagId: pkg.bagId,
            path: file.path,
            detail: `catalog ${file.digests.sha256}, disk ${digest}`,
          });
      }
      for (const extra of onDisk)
        violations.push({ code: 'stored-file-extra', bagId: pkg.bagId, path: extra });
    }

    // storage/abc/def/012/urn%3auuid%3a<bag_id>: anything that is not a stored package's object
    // or the root's own files is an orphan. Empty parent folders are harmless (a crash between
    // mkdir and rename leaves them).
    const rootFiles = new Set([ROOT_DECLARATION.name, ...layoutFiles().map((f) => f.path)]);
    for (const path of rootFiles) {
      const found = existsSync(join(storage.storageRoot, path));
      if (!found) violations.push({ code: 'root-files', path: `storage/${path}`, detail: 'missing' });
    }
    const visit = async (rel: string, depth: number): Promise<void> => {
      for (const entry of await readdir(join(storage.storageRoot, rel), { withFileTypes: true })) {
        const path = rel === '' ? entry.name : `${rel}/${entry.name}`;
        if (depth === 0 && (rootFiles.has(path) || ROOT_RECORDS.has(path))) continue;
        if (depth === 0 && path === 'extensions') continue; // its files checked above
        if (depth < 3 && entry.isDirectory() && /^[0-9a-f]{3}$/.test(entry.name))
          await visit(path, depth + 1);
        else if (depth < 3 || !expectedInStorage.has(path))
          violations.push({ code: 'storage-orphan', path: `storage/${path}` });
      }
    };
    await visit('', 0);

    for (const name of await listOrEmpty(storage.stagingRoot))
      violations.push({ code: 'staging-leftover', path: `staging/${name}` });
    for (const name of await listOrEmpty(layout.landing)) {
      if (!capabilities.has(name)) violations.push({ code: 'landing-orphan', path: `landing/${name}` });
    }

    for (const audit of catalog.audits.list()) {
      const label = `audit ${audit.id}`;
      if (audit.finishedAt === undefined) {
        violations.push({
          code: 'audit-unfinished',
          detail: `${label}: ${audit.successes + audit.failures} of ${audit.packages} packages checked`,
        });
        continue;
      }
      const left = catalog.audits.remaining(audit.id).length;
      if (audit.successes + audit.failures !== audit.packages || left !== 0)
        violations.push({
          code: 'audit-counts',
          detail: `${label}: ${audit.successes} + ${audit.failures} of ${audit.packages}, ${left} left to do`,
        });
      const perPackage = new Map<string, number>();
      for (const e of catalog.events.forAudit(audit.id))
        perPackage.set(e.bagId, (perPackage.get(e.bagId) ?? 0) + (e.type === 'fixity check' ? 1 : 0));
      const twice = [...perPackage].filter(([, n]) => n !== 1).map(([bagId]) => bagId);
      if (perPackage.size !== audit.packages || twice.length > 0)
        violations.push({
          code: 'audit-events',
          detail: `${label}: events for ${perPackage.size} of ${audit.packages} packages${twice.length > 0 ? `; not exactly one for ${twice.join(', ')}` : ''}`,
        });
    }
  } finally {
    await catalog.close();
  }
  return violations;
}

/** One assertion: no invariant is broken (the list of violations is the diagnostic). */
export async function assertInvariants(
  t: Test,
  dataDir: string,
  message = 'catalog and data directory agree',
): Promise<Violation[]> {
  const violations = await findViolations(dataDir);
  t.same(violations, [], message);
  return violations;
}
