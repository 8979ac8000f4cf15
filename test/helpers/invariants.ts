/**
 * The invariants a data directory and its catalog must hold once the daemon has stopped (after
 * a crash and a restart that settled): what the catalog says is stored is on disk, byte for
 * byte; what is on disk belongs to the catalog; nothing is left half-done.
 *
 * - every stored package's OCFL object exists where the layout puts it, a valid OCFL object (our
 *   validator, structure and inventories) with its declaration, a folder and an inventory for
 *   each of its versions v1..v<head> (each sidecar the sha256 of its inventory, the root's that
 *   of the head); the content folders hold exactly the content its versions' recorded files are
 *   kept at, each with its recorded size and sha256; each version's recorded files are the state
 *   of its inventory, path for path and digest for digest; a revised package keeps every
 *   version's files and record; it has one DONE queue item and one successful ingestion event
 *   per version;
 * - storage is an OCFL root (declaration, layout files) whose every other entry is a stored
 *   package's object (no orphans, no temporary files); staging is empty;
 * - every unstored request, and every stored package with a revision open, has its landing
 *   folder, open to uploads (a failed upload is recoverable); no other package has one, and no
 *   landing folder belongs to nobody;
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
import type { FileRecord } from '../../src/catalog/types.js';
import { INVENTORY, INVENTORY_SIDECAR, type Inventory } from '../../src/ocfl/inventory.js';
import { fsReader, validateObject } from '../../src/ocfl/validate/index.js';
import {
  contentPathOf,
  layoutFiles,
  OBJECT_DECLARATION,
  packageObjectPath,
  ROOT_DECLARATION,
  versionName,
} from '../../src/ocfl/layout.js';
import { DataLayout } from '../../src/storage/layout.js';
import { Storage } from '../../src/storage/storage.js';
import { filesUnder } from './walk.js';

type ViolationCode =
  | 'stored-folder-missing'
  | 'object-invalid'
  | 'version-state'
  | 'version-record'
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
 * What is wrong with a stored package's object beside its content: its declaration, its version
 * folders v1..v<head> and nothing else at its top (`logs/` aside, the preservd record's), every
 * inventory beside its sidecar, the root's that of the head; and what our OCFL validator finds
 * (structure and inventories: the content's digests are checked against the catalog's below).
 */
async function objectViolations(storage: Storage, bagId: string, head: number): Promise<Violation[]> {
  const dir = storage.objectDir(bagId);
  if (!existsSync(dir)) return []; // reported as stored-folder-missing
  const found: Violation[] = [];
  const wrong = (detail: string): void => void found.push({ code: 'object-files', bagId, detail });
  const top = (await readdir(dir)).sort();
  const versions = Array.from({ length: head }, (_, i) => versionName(i + 1));
  const expected = [OBJECT_DECLARATION.name, INVENTORY, INVENTORY_SIDECAR, ...versions];
  if (top.filter((n) => n !== 'logs').join() !== [...expected].sort().join()) wrong(`top: ${top.join(', ')}`);
  if (!existsSync(join(dir, OBJECT_DECLARATION.name))) return found;
  if (readFileSync(join(dir, OBJECT_DECLARATION.name), 'utf8') !== OBJECT_DECLARATION.text)
    wrong('object declaration');
  const inventories = [dir, ...versions.map((v) => join(dir, v))].map((d) => {
    const json = existsSync(join(d, INVENTORY)) ? readFileSync(join(d, INVENTORY)) : undefined;
    const sidecar = existsSync(join(d, INVENTORY_SIDECAR))
      ? readFileSync(join(d, INVENTORY_SIDECAR), 'utf8')
      : '';
    if (json === undefined) wrong(`no ${d}/${INVENTORY}`);
    else if (sidecar !== `${createHash('sha256').update(json).digest('hex')} ${INVENTORY}\n`)
      wrong(`sidecar of ${d}/${INVENTORY}`);
    return json;
  });
  const [root, last] = [inventories[0], inventories.at(-1)];
  if (root !== undefined && last !== undefined && !root.equals(last))
    wrong(`root and ${versionName(head)} inventories differ`);
  const report = await validateObject(fsReader(dir), '', { digests: false });
  for (const p of report.problems)
    if (p.severity === 'error')
      found.push({ code: 'object-invalid', bagId, detail: `${p.code} ${p.message}` });
  return found;
}

/** The inventory of version n as stored in its folder, if it can be read. */
function inventoryOf(storage: Storage, bagId: string, n: number): Inventory | undefined {
  try {
    return JSON.parse(
      readFileSync(join(storage.objectDir(bagId), versionName(n), INVENTORY), 'utf8'),
    ) as Inventory;
  } catch {
    return undefined; // reported by objectViolations
  }
}

/**
 * Every version's recorded files against its inventory's state (path for path, sha256 for
 * sha256), and a revised package's version records; returns each version's files.
 */
function versionViolations(
  catalog: Catalog,
  storage: Storage,
  bagId: string,
  head: number,
): { violations: Violation[]; versions: FileRecord[][] } {
  const violations: Violation[] = [];
  const versions: FileRecord[][] = [];
  for (let n = 1; n <= head; n++) {
    const files = n === head ? catalog.files.list(bagId) : [...catalog.revisions.files(bagId, n)];
    versions.push(files);
    if (head > 1) {
      const kept = [...catalog.revisions.files(bagId, n)];
      if (JSON.stringify(kept) !== JSON.stringify(files))
        violations.push({
          code: 'version-record',
          bagId,
          detail: `v${n}: its files not kept as the current ones`,
        });
      const record = catalog.revisions.version(bagId, n);
      if (record?.files !== files.length || record.bytes !== files.reduce((sum, f) => sum + f.size, 0))
        violations.push({ code: 'version-record', bagId, detail: `v${n}: ${JSON.stringify(record)}` });
    }
    const state = inventoryOf(storage, bagId, n)?.versions[versionName(n)]?.state;
    if (state === undefined) continue;
    const inInventory = Object.entries(state)
      .flatMap(([digest, paths]) => paths.map((p) => `${p} ${digest}`))
      .sort();
    const recorded = files.map((f) => `${f.path} ${f.digests.sha256}`).sort();
    for (const extra of recorded.filter((r) => !inInventory.includes(r)))
      violations.push({
        code: 'version-state',
        bagId,
        path: extra,
        detail: `v${n}: recorded, not in its state`,
      });
    for (const missing of inInventory.filter((r) => !recorded.includes(r)))
      violations.push({
        code: 'version-state',
        bagId,
        path: missing,
        detail: `v${n}: in its state, not recorded`,
      });
  }
  return { violations, versions };
}

/**
 * The object's content against every version's recorded files: each content path a recorded file
 * is kept at present with its size and sha256, and no other content.
 */
async function contentViolations(
  storage: Storage,
  bagId: string,
  versions: readonly FileRecord[][],
): Promise<Violation[]> {
  const violations: Violation[] = [];
  const object = storage.objectDir(bagId);
  const onDisk = new Set<string>();
  for (let n = 1; n <= versions.length; n++) {
    const content = join(object, versionName(n), 'content');
    if (existsSync(content))
      for (const p of filesUnder(content)) onDisk.add(`${versionName(n)}/content/${p}`);
  }
  const checked = new Set<string>();
  for (const file of versions.flat()) {
    const contentPath = file.contentPath ?? contentPathOf(1, file.path);
    if (checked.has(contentPath)) continue;
    checked.add(contentPath);
    if (!onDisk.delete(contentPath)) {
      violations.push({ code: 'stored-file-missing', bagId, path: contentPath });
      continue;
    }
    const abs = Storage.resolveInside(object, contentPath);
    const size = (await lstat(abs)).size;
    if (size !== file.size) {
      violations.push({
        code: 'stored-file-size',
        bagId,
        path: contentPath,
        detail: `catalog ${file.size}, disk ${size}`,
      });
      continue;
    }
    const digest = await sha256(abs);
    if (digest !== file.digests.sha256)
      violations.push({
        code: 'stored-file-digest',
        bagId,
        path: contentPath,
        detail: `catalog ${file.digests.sha256}, disk ${digest}`,
      });
  }
  for (const extra of onDisk) violations.push({ code: 'stored-file-extra', bagId, path: extra });
  return violations;
}

/** Every broken invariant of the stopped daemon's data directory; [] when all hold. */
export async function findViolations(dataDir: string): Promise<Violation[]> {
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

      const head = pkg.head ?? 1;
      if (done.length !== head)
        violations.push({
          code: 'stored-without-done-item',
          bagId: pkg.bagId,
          detail: `${done.length} DONE queue items for ${head} version(s)`,
        });
      const ingestions = [...catalog.events.forPackage(pkg.bagId)]
        .filter((e) => e.type === 'ingestion' && e.outcome === 'success')
        .map((e) => Number(/^version (\d+):/.exec(e.detail ?? '')?.[1] ?? 1));
      if (ingestions.join() !== Array.from({ length: head }, (_, i) => i + 1).join())
        violations.push({
          code: 'stored-ingestion-events',
          bagId: pkg.bagId,
          detail: `successful ingestion events of versions ${ingestions.join(', ')} for ${head}`,
        });
      // A revision open (not being ingested) has its upload, pre-filled, under the package's link.
      const revising = catalog.revisions.open(pkg.bagId) !== undefined;
      if (revising && !existsSync(landingDir))
        violations.push({ code: 'upload-missing', bagId: pkg.bagId, path: `landing/${pkg.capability}` });
      if (!revising && existsSync(landingDir))
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
      if (!existsSync(storage.firstContentDir(pkg.bagId))) {
        violations.push({
          code: 'stored-folder-missing',
          bagId: pkg.bagId,
          path: `storage/${pkg.storagePath}`,
        });
        continue;
      }
      violations.push(...(await objectViolations(storage, pkg.bagId, head)));
      const versions = versionViolations(catalog, storage, pkg.bagId, head);
      violations.push(...versions.violations);
      violations.push(...(await contentViolations(storage, pkg.bagId, versions.versions)));
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
