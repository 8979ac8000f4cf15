/**
 * One object of a storage root read back for the rebuild: its declaration, its inventory (checked
 * against its sidecar), the preservd record in its `logs/`, and every file of every version with
 * its size and digests from the inventory, each content file's bytes read once (checked against the
 * inventory's digests unless told not to; its CRC-32, which the zip download needs, always taken).
 * What is wrong is one sentence, and the object is skipped: nothing of it reaches the catalog.
 */
import { createHash } from 'node:crypto';
import type { FileRecord } from '../catalog/types.js';
import { NativeDigester, type Algorithm } from '../fixity/index.js';
import { INVENTORY, INVENTORY_SIDECAR, type Inventory } from '../ocfl/inventory.js';
import {
  bagIdOf,
  contentPathOf,
  OBJECT_DECLARATION,
  packageObjectPath,
  versionName,
} from '../ocfl/layout.js';
import {
  EVENTS_RECORD,
  LOGS,
  PACKAGE_RECORD,
  readEventsRecord,
  readPackageRecord,
  RecordError,
  type EventsRecord,
  type PackageRecord,
} from '../ocfl/record.js';
import type { RootReader } from './root-reader.js';

/** Why an object is skipped, for the operator. */
export class ObjectSkipped extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ObjectSkipped';
  }
}

/** One version of the object: its files as the catalog keeps them, and its inventory entry. */
export interface ReadVersion {
  version: number;
  files: FileRecord[];
  created: string;
  user: string;
  message: string;
}

export interface ReadObject {
  record: PackageRecord;
  events: EventsRecord;
  /** Every version, oldest first: the last is the head, the package's current files. */
  versions: ReadVersion[];
  bytes: number;
}

/** The package record in an object's `logs/` (read first, to order the packages as they were). */
export async function readRecord(
  reader: RootReader,
  object: string,
  signal?: AbortSignal,
): Promise<PackageRecord> {
  const bytes = await reader.read(`${object}/${LOGS}/${PACKAGE_RECORD}`, signal);
  if (bytes === undefined)
    throw new ObjectSkipped(`no ${LOGS}/${PACKAGE_RECORD}: not a package preservd stored`);
  const record = recordOrSkip(() => readPackageRecord(bytes));
  if (packageObjectPath(record.bag_id) !== object)
    throw new ObjectSkipped(
      `its ${LOGS}/${PACKAGE_RECORD} names bag ${record.bag_id}, whose object lives elsewhere`,
    );
  return record;
}

/** Everything of one object the catalog needs, checked; throws ObjectSkipped with the reason. */
export async function readObject(
  reader: RootReader,
  object: string,
  record: PackageRecord,
  options: { verify: boolean; signal?: AbortSignal | undefined },
): Promise<ReadObject> {
  const { signal } = options;
  const listed = await reader.filesOf(object, signal);
  const declaration = await reader.read(`${object}/${OBJECT_DECLARATION.name}`, signal);
  if (declaration?.toString() !== OBJECT_DECLARATION.text)
    throw new ObjectSkipped(`no OCFL object declaration ${OBJECT_DECLARATION.name} with the right content`);
  const inventory = await readInventory(reader, object, signal);
  if (bagIdOf(inventory.id) !== record.bag_id)
    throw new ObjectSkipped(`the inventory's id ${inventory.id} is not urn:uuid:${record.bag_id}`);
  const heads = versionsOf(inventory);
  const eventsBytes = await reader.read(`${object}/${LOGS}/${EVENTS_RECORD}`, signal);
  if (eventsBytes === undefined) throw new ObjectSkipped(`no ${LOGS}/${EVENTS_RECORD}`);
  const events = recordOrSkip(() => readEventsRecord(eventsBytes));
  if (events.bag_id !== record.bag_id)
    throw new ObjectSkipped(`its ${LOGS}/${EVENTS_RECORD} names bag ${events.bag_id}`);
  if (record.versions.length > heads)
    throw new ObjectSkipped(
      `its ${LOGS}/${PACKAGE_RECORD} lists ${record.versions.length} versions, its inventory ${heads}`,
    );
  const read = new Map<string, Promise<ReadContent>>();
  const content = (digest: string, contentPath: string): Promise<ReadContent> => {
    let got = read.get(contentPath);
    if (got === undefined) {
      got = readContent(reader, object, inventory, digest, contentPath, listed, options);
      read.set(contentPath, got);
    }
    return got;
  };
  const versions: ReadVersion[] = [];
  for (let n = 1; n <= heads; n++) {
    const files: FileRecord[] = [];
    for (const placed of placedFiles(inventory, n)) {
      const { size, crc32, digests } = await content(placed.digest, placed.contentPath);
      files.push({
        path: placed.path,
        size,
        crc32,
        digests,
        ...(n > 1 ? { contentPath: placed.contentPath } : {}),
      });
    }
    const v = inventory.versions[versionName(n)]!;
    versions.push({
      version: n,
      files,
      created: v.created,
      user: v.user?.name ?? '',
      message: v.message ?? '',
    });
  }
  let bytes = 0;
  for (const got of read.values()) bytes += (await got).size;
  return { record, events, versions, bytes };
}

/** One content file read: its size, its CRC-32, and its digests (sha256 and the inventory's fixity). */
interface ReadContent {
  size: number;
  crc32: string;
  digests: Partial<Record<Algorithm, string>>;
}

/** A content file's bytes read once, checked against the inventory unless told not to. */
async function readContent(
  reader: RootReader,
  object: string,
  inventory: Inventory,
  digest: string,
  contentPath: string,
  listed: Map<string, number>,
  options: { verify: boolean; signal?: AbortSignal | undefined },
): Promise<ReadContent> {
  if (!listed.has(contentPath))
    throw new ObjectSkipped(
      `no stored content at ${contentPath} (sha256 ${digest}) among the manifest's paths`,
    );
  const expected = { sha256: digest, ...fixityOf(inventory, contentPath) };
  const found = await hashContent(
    reader,
    `${object}/${contentPath}`,
    options.verify ? expected : {},
    listed.get(contentPath),
    options.signal,
  );
  if (found.size !== listed.get(contentPath))
    throw new ObjectSkipped(
      `${contentPath}: read ${found.size} bytes, the root lists ${listed.get(contentPath)}`,
    );
  if (options.verify)
    for (const [algorithm, want] of Object.entries(expected) as Array<[Algorithm, string]>)
      if (found.digests[algorithm] !== want)
        throw new ObjectSkipped(
          `${contentPath}: ${algorithm} is ${found.digests[algorithm]}, the inventory says ${want}`,
        );
  return { size: found.size, crc32: found.crc32, digests: expected };
}

/** The number of the head version, each version from v1 to it present with a state; else skipped. */
function versionsOf(inventory: Inventory): number {
  const heads = /^v([1-9][0-9]{0,5})$/.exec(inventory.head);
  if (heads === null) throw new ObjectSkipped(`its head ${inventory.head} is not a version preservd writes`);
  const n = Number(heads[1]);
  for (let v = 1; v <= n; v++)
    if (typeof inventory.versions[versionName(v)]?.state !== 'object')
      throw new ObjectSkipped(`its inventory has no state for ${versionName(v)} of ${inventory.head}`);
  return n;
}

/**
 * The files of version n with where the catalog keeps their bytes (as the ingest and a revision
 * record them): a file of v1 at `v1/content/<path>`; a later version's file whose digest an earlier
 * version held at the content path first stored for it, any other at its own path in the version.
 */
function* placedFiles(
  inventory: Inventory,
  n: number,
): Generator<{ path: string; digest: string; contentPath: string }> {
  const version = versionName(n);
  for (const [digest, paths] of Object.entries(inventory.versions[version]!.state)) {
    const stored = inventory.manifest[digest] ?? [];
    const earlier = n > 1 ? stored.find((p) => Number(/^v(\d+)\//.exec(p)?.[1]) < n) : undefined;
    for (const path of paths) {
      const own = contentPathOf(n, path);
      const contentPath =
        earlier ?? (stored.includes(own) ? own : stored.find((p) => p.startsWith(`${version}/`)));
      if (contentPath === undefined)
        throw new ObjectSkipped(`no content for ${path} of ${version} (sha256 ${digest}) in the manifest`);
      yield { path, digest, contentPath };
    }
  }
}

function recordOrSkip<T>(read: () => T): T {
  try {
    return read();
  } catch (err) {
    if (err instanceof RecordError) throw new ObjectSkipped(err.message);
    throw err;
  }
}

/** The root inventory, its bytes checked against its sidecar, its shape enough to be read. */
async function readInventory(reader: RootReader, object: string, signal?: AbortSignal): Promise<Inventory> {
  const json = await reader.read(`${object}/${INVENTORY}`, signal);
  const sidecar = await reader.read(`${object}/${INVENTORY_SIDECAR}`, signal);
  if (json === undefined || sidecar === undefined)
    throw new ObjectSkipped(`no ${INVENTORY} or no ${INVENTORY_SIDECAR}`);
  const digest = createHash('sha256').update(json).digest('hex');
  const [named, file, ...rest] = sidecar
    .toString()
    .trim()
    .split(/[ \t]+/);
  if (named?.toLowerCase() !== digest || file !== INVENTORY || rest.length > 0)
    throw new ObjectSkipped(`${INVENTORY_SIDECAR} does not hold the sha256 of ${INVENTORY} (${digest})`);
  let inventory: Inventory;
  try {
    inventory = JSON.parse(json.toString()) as Inventory;
  } catch (err) {
    throw new ObjectSkipped(`${INVENTORY} is not JSON: ${(err as Error).message}`);
  }
  const head = typeof inventory?.head === 'string' ? inventory.versions?.[inventory.head] : undefined;
  if (
    inventory?.digestAlgorithm !== 'sha256' ||
    typeof inventory.id !== 'string' ||
    typeof inventory.manifest !== 'object' ||
    typeof head?.state !== 'object'
  )
    throw new ObjectSkipped(
      `${INVENTORY} is not an inventory preservd writes (sha256, a head version with a state)`,
    );
  return inventory;
}

/** The inventory's other digests of one content path (its `fixity` block). */
function fixityOf(inventory: Inventory, contentPath: string): Partial<Record<Algorithm, string>> {
  const out: Partial<Record<Algorithm, string>> = {};
  for (const [algorithm, map] of Object.entries(inventory.fixity ?? {}) as Array<
    [Algorithm, Record<string, string[]>]
  >)
    for (const [digest, paths] of Object.entries(map))
      if (paths.includes(contentPath)) out[algorithm] = digest.toLowerCase();
  return out;
}

async function hashContent(
  reader: RootReader,
  key: string,
  expected: Partial<Record<Algorithm, string>>,
  listedSize: number | undefined,
  signal?: AbortSignal,
): Promise<{ size: number; crc32: string; digests: Partial<Record<Algorithm, string>> }> {
  const stream = await reader.open(key, signal, listedSize);
  if (stream === undefined) throw new ObjectSkipped(`${key} is listed but cannot be opened`);
  const digester = new NativeDigester(Object.keys(expected) as Algorithm[], true);
  let size = 0;
  for await (const chunk of stream) {
    digester.update(chunk as Buffer);
    size += (chunk as Buffer).length;
  }
  const { crc32, digests } = digester.finish();
  return { size, crc32: crc32!, digests };
}
