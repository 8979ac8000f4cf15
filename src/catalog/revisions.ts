/**
 * Revisions of stored packages (API.md, "Versions"): a revision is opened on the package's
 * current version, its upload pre-filled; completed, it becomes the next OCFL version. At most one
 * is in flight per package (open, or completed and being ingested): `open(bagId)` says which, so
 * that a deaccession can refuse while one is. Each stored version keeps a record (`VersionRecord`)
 * and, once superseded, its file records (`versionFiles`): a package's current files stay in
 * `FileStore`, where every reader of the current version finds them.
 */
import type { Database, RootDatabase } from 'lmdb';
import type { FileView } from './files.js';
import type { Transactor } from './transaction.js';
import type { FileRecord } from './types.js';

type RevisionStatus = 'open' | 'stored' | 'abandoned';

export interface Revision {
  bagId: string;
  /** The version it becomes once stored: the package's current one + 1. */
  version: number;
  status: RevisionStatus;
  note: string | null;
  /** Who opened it. */
  user: string;
  createdAt: number;
  updatedAt: number;
}

/** One stored version of a package, as the versions list shows it. */
export interface VersionRecord {
  version: number;
  createdAt: number;
  user: string;
  note: string | null;
  files: number;
  bytes: number;
}

export type OpenResult = { created: Revision } | { existing: Revision };

/** File records written per transaction when a version's files are recorded. */
const BATCH = 5_000;

export class RevisionStore {
  private readonly revisions: Database<Revision, [string, number]>;
  /** bag_id → the version of its revision in flight. */
  private readonly inFlight: Database<number, string>;
  private readonly versions: Database<VersionRecord, [string, number]>;
  /** `[bag_id, version, path]`: the files of a version being stored, or of one superseded. */
  private readonly versionFiles: Database<FileRecord, [string, number, string]>;

  constructor(
    root: RootDatabase,
    private readonly catalog: Transactor,
  ) {
    this.revisions = root.openDB({ name: 'revisions' });
    this.inFlight = root.openDB({ name: 'revisionsInFlight' });
    this.versions = root.openDB({ name: 'packageVersions' });
    this.versionFiles = root.openDB({ name: 'versionFiles' });
  }

  /** The package's revision in flight (open, or completed and not yet stored), if any. */
  open(bagId: string): Revision | undefined {
    const n = this.inFlight.get(bagId);
    return n === undefined ? undefined : this.revisions.get([bagId, n]);
  }

  get(bagId: string, version: number): Revision | undefined {
    return Number.isSafeInteger(version) ? this.revisions.get([bagId, version]) : undefined;
  }

  /**
   * Opens revision `version` unless one is in flight (returned instead); check and insert are one
   * transaction. `before` runs inside it (the package's new upload link).
   */
  create(fields: Pick<Revision, 'bagId' | 'version' | 'note' | 'user'>, before: () => void): OpenResult {
    return this.catalog.transaction(() => {
      const existing = this.open(fields.bagId);
      if (existing !== undefined) return { existing };
      const now = Date.now();
      const revision: Revision = { ...fields, status: 'open', createdAt: now, updatedAt: now };
      before();
      this.revisions.putSync([revision.bagId, revision.version], revision);
      this.inFlight.putSync(revision.bagId, revision.version);
      return { created: revision };
    });
  }

  /** Ends the revision in flight as stored or abandoned (inside the caller's transaction, if any). */
  end(bagId: string, version: number, status: 'stored' | 'abandoned'): Revision {
    return this.catalog.transaction(() => {
      const current = this.revisions.get([bagId, version]);
      if (current === undefined) throw new Error(`no revision ${version} of ${bagId}`);
      const ended = { ...current, status, updatedAt: Date.now() };
      this.revisions.putSync([bagId, version], ended);
      if (this.inFlight.get(bagId) === version) this.inFlight.removeSync(bagId);
      return ended;
    });
  }

  /** The record of a stored version (none for a version 1 stored before versions were kept). */
  version(bagId: string, version: number): VersionRecord | undefined {
    return Number.isSafeInteger(version) ? this.versions.get([bagId, version]) : undefined;
  }

  /** Every version record of the package, oldest first. */
  versionsOf(bagId: string): VersionRecord[] {
    return [...this.versions.getRange({ start: [bagId], end: [bagId, Infinity] })].map((e) => e.value);
  }

  /** Records a stored version (inside the transaction that stores it). */
  putVersion(bagId: string, record: VersionRecord): void {
    this.catalog.transaction(() => this.versions.putSync([bagId, record.version], record));
  }

  /** Drops the file records kept for a version (a retried revision's staging), a batch per transaction. */
  clearFiles(bagId: string, version: number): void {
    const range = { start: [bagId, version], end: [bagId, version, '\uffff'], limit: BATCH };
    const removeBatch = () => {
      let n = 0;
      for (const key of this.versionFiles.getKeys(range)) {
        this.versionFiles.removeSync(key);
        n++;
      }
      return n;
    };
    while (this.catalog.transaction(removeBatch) === BATCH);
  }

  /** Records files of a version, a transaction for the batch. */
  putFiles(bagId: string, version: number, files: readonly FileRecord[]): void {
    this.catalog.transaction(() => {
      for (const file of files) this.versionFiles.putSync([bagId, version, file.path], file);
    });
  }

  hasFiles(bagId: string, version: number): boolean {
    for (const _ of this.versionFiles.getKeys({
      start: [bagId, version],
      end: [bagId, version, '\uffff'],
      limit: 1,
    }))
      return true;
    return false;
  }

  /** The files of a version kept here, in path order. */
  *files(bagId: string, version: number): Generator<FileRecord> {
    for (const { value } of this.versionFiles.getRange({
      start: [bagId, version],
      end: [bagId, version, '\uffff'],
    }))
      yield value;
  }

  file(bagId: string, version: number, path: string): FileRecord | undefined {
    return this.versionFiles.get([bagId, version, path]);
  }

  /** A version's files as a view (its zip and downloads), like `FileStore.view` of the current ones. */
  view(bagId: string, version: number): FileView {
    return {
      [Symbol.iterator]: () => this.files(bagId, version),
      has: (path) => this.file(bagId, version, path) !== undefined,
      holdsUnder: (folder) => {
        const range = {
          start: [bagId, version, `${folder}/`],
          end: [bagId, version, `${folder}0`],
          limit: 1,
        };
        for (const _ of this.versionFiles.getKeys(range)) return true;
        return false;
      },
    };
  }

  /**
   * Every content file of a revised package's object, each once, with the content path its bytes
   * are stored under: the current files, then those of superseded versions no later one shares.
   */
  contentFiles(bagId: string, current: Iterable<FileRecord>): FileRecord[] {
    const seen = new Set<string>();
    const out: FileRecord[] = [];
    const add = (file: FileRecord) => {
      const contentPath = file.contentPath ?? `v1/content/${file.path}`;
      if (seen.has(contentPath)) return;
      seen.add(contentPath);
      out.push({ ...file, contentPath });
    };
    for (const file of current) add(file);
    for (const { value } of this.versionFiles.getRange({ start: [bagId], end: [bagId, Infinity] }))
      add(value);
    return out;
  }
}
