/**
 * The data directory, in one place: every folder preservd keeps under `<dataDir>`, with the mode
 * each must have. `ensure()` creates what is missing and corrects the mode of what exists, so an
 * upgrade from a version that made a folder more open than documented closes it again.
 *
 *   catalog/           LMDB environment                                    0700
 *   landing/           one folder per open request; names are secrets      0700
 *     <capability>/    made per request by `LandingZone.open`              0700
 *   rsyncd/            rsync's configuration, hooks, log, and below:       0700
 *     closed/ active/ transfers/   the gate's and recorder's files         0700
 *   staging/           uploads being validated                             0750
 *     <bag_id>/        an upload, moved out of landing/                    0700
 *     <bag_id>.object/ an OCFL object being assembled (storage/assembly.ts)
 *     .<purpose>-….tmp a file on its way into storage/ (`scratchFile`)
 *   storage/           the OCFL 1.1 storage root (storage/ocfl-root.ts)    0750
 *     0=ocfl_1.1, ocfl_layout.json, extensions/…   written at start-up
 *     abc/def/012/     made by `ensureStored` as packages arrive           0750
 *       urn%3auuid%3a<bag_id>/   one object, renamed in whole              0750
 *         v1/content/  the upload folder, moved in as it was               0700
 *   admin.token        the first admin's token                             0600 (a file)
 *
 * One `DataLayout` is built where the data directory is named (`Daemon.start`, a CLI command) and
 * handed to every part that uses a folder of it; nothing else makes a folder there with a mode
 * of its own but `LandingZone.open` (with `uploadFolderMode`, below).
 *
 * What lives in each folder and who may change it is for its owner module to say (`Storage`,
 * `LandingZone`, `RsyncDaemon`, `Catalog`); this module only names and creates them.
 */
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, readdir, unlink } from 'node:fs/promises';
import { join, resolve, sep } from 'node:path';

export class DataLayout {
  readonly dataDir: string;
  readonly catalog: string;
  readonly landing: string;
  readonly rsyncd: string;
  readonly closed: string;
  readonly active: string;
  readonly transfers: string;
  readonly staging: string;
  readonly storage: string;
  readonly adminToken: string;
  /** The mode of `landing/<capability>/`: the folder's name is the upload's secret. */
  readonly uploadFolderMode = 0o700;
  /** The mode of the folders made below `storage/` (`ensureStored`), as of `storage/` itself. */
  readonly storedFolderMode = 0o750;

  constructor(dataDir: string) {
    this.dataDir = resolve(dataDir);
    this.catalog = join(this.dataDir, 'catalog');
    this.landing = join(this.dataDir, 'landing');
    this.rsyncd = join(this.dataDir, 'rsyncd');
    this.closed = join(this.rsyncd, 'closed');
    this.active = join(this.rsyncd, 'active');
    this.transfers = join(this.rsyncd, 'transfers');
    this.staging = join(this.dataDir, 'staging');
    this.storage = join(this.dataDir, 'storage');
    this.adminToken = join(this.dataDir, 'admin.token');
  }

  /** Every folder with its mode, parents first. */
  get folders(): Array<[path: string, mode: number]> {
    return [
      [this.dataDir, 0o750],
      [this.catalog, 0o700],
      [this.landing, 0o700],
      [this.rsyncd, 0o700],
      [this.closed, 0o700],
      [this.active, 0o700],
      [this.transfers, 0o700],
      [this.staging, 0o750],
      [this.storage, this.storedFolderMode],
    ];
  }

  /** Creates the folders that are missing and sets the mode of every one (the umask aside). */
  async ensure(): Promise<void> {
    for (const [path, mode] of this.folders) {
      await mkdir(path, { recursive: true, mode });
      await chmod(path, mode);
    }
  }

  /**
   * A new name for a file on its way into `storage/` (a repair's restored file, a root file):
   * in staging/, on the same filesystem, so that nothing but whole files ever appears in the root.
   */
  scratchFile(purpose: string): string {
    return join(this.staging, `.${purpose}-${process.pid}-${randomBytes(6).toString('hex')}.tmp`);
  }

  /** Removes the scratch files a crash left in staging/ (start-up, before anything writes one). */
  async clearScratch(): Promise<void> {
    for (const name of await readdir(this.staging)) {
      if (isScratch(name)) await unlink(join(this.staging, name)).catch(() => undefined);
    }
  }

  /** Creates a folder below `storage/`: an object's `abc/def/012/` parents, or one a repair restores. */
  async ensureStored(folder: string): Promise<void> {
    if (!resolve(folder).startsWith(this.storage + sep))
      throw new Error(`${folder} is not below ${this.storage}`);
    await mkdir(folder, { recursive: true, mode: this.storedFolderMode });
  }
}

/** Whether a name in staging/ is a scratch file (`scratchFile`), not an upload or an assembly. */
export function isScratch(name: string): boolean {
  return name.startsWith('.') && name.endsWith('.tmp');
}
