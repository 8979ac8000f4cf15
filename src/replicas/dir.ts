/**
 * A replica in a folder on another filesystem (a second disk, an NFS mount), an OCFL storage
 * root (root.ts). Each file is written to a temporary name in the scratch folder beside the root
 * (`<path>.preservd-tmp/`, on the same filesystem, so nothing but whole files ever appears under
 * the root, even after a kill), hashed on the way, fsync'ed, then linked to its name (which fails
 * if something is already there: never an overwrite unless asked) or, when a replacement is asked
 * for, renamed over it; the folder is fsync'ed after. The start-up write check writes there too.
 * Temporary files left by a killed daemon are removed by `abandonUnfinished`; besides them, only
 * `preservd migrate` deletes here (`removeOld`: files of the layout before OCFL).
 */
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { access, link, mkdir, open, readdir, rename, rm, rmdir, stat, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import type { DirReplicaConfig } from '../config/replicas.js';
import { failpoint } from '../failpoints.js';
import { errorCode } from '../fs/errors.js';
import { Storage } from '../storage/storage.js';
import { CheckedPassThrough, digestOf } from './hashing.js';
import {
  ReplicaDown,
  ReplicaUnusable,
  streamOf,
  type ExpectedFile,
  type ReadBack,
  type ReplicaTarget,
  type WriteOptions,
  type WriteSource,
} from './target.js';

/** Our temporary files in the scratch folder: `<pid>-<hex>.tmp`, the pid of the daemon writing it. */
const TEMPORARY = /^([0-9]+)-[0-9a-f]{16}\.tmp$/;
/** An object folder on its way out (`removeObject`), in the scratch folder: `<pid>-<hex>.removing`. */
const REMOVING = /^([0-9]+)-[0-9a-f]{16}\.removing$/;
/** The scratch folder's name beside the root: `<root>` + this. */
const SCRATCH_SUFFIX = '.preservd-tmp';

/** Errors that say the folder as a whole is unavailable (unmounted, full, read-only), not one file. */
const DOWN_CODES = new Set([
  'EIO',
  'ENOTCONN',
  'ESTALE',
  'EHOSTDOWN',
  'ETIMEDOUT',
  'ENOSPC',
  'EDQUOT',
  'EROFS',
  'EACCES',
  'EPERM',
]);

export class DirTarget implements ReplicaTarget {
  readonly kind = 'dir';
  readonly name: string;
  readonly where: string;
  private readonly root: string;
  /** Where files are written before they are linked into the root. */
  private readonly scratch: string;
  private scratchMade = false;

  constructor(config: DirReplicaConfig) {
    this.name = config.name;
    this.root = config.path;
    this.scratch = `${config.path.replace(/\/+$/, '')}${SCRATCH_SUFFIX}`;
    this.where = `folder ${config.path}`;
  }

  private path(key: string): string {
    return Storage.resolveInside(this.root, key);
  }

  private down(err: unknown): unknown {
    const code = errorCode(err);
    return DOWN_CODES.has(code) ? new ReplicaDown(this.name, code, { cause: err }) : err;
  }

  async check(): Promise<void> {
    const info = await stat(this.root).catch(() => undefined);
    if (info === undefined || !info.isDirectory())
      throw new ReplicaUnusable(
        `replica ${this.name}: folder ${this.root} does not exist; create it (and mount the filesystem it is on) first`,
      );
    try {
      await access(this.root, constants.W_OK);
    } catch (err) {
      throw new ReplicaUnusable(
        `replica ${this.name}: folder ${this.root} cannot be written (${errorCode(err)})`,
        { cause: err },
      );
    }
    // The write check in the scratch folder, never under the root.
    try {
      await mkdir(this.scratch, { recursive: true, mode: 0o750 });
      const probe = this.temporaryName();
      const handle = await open(probe, 'wx', 0o640);
      await handle.close();
      await unlink(probe);
    } catch (err) {
      throw new ReplicaUnusable(
        `replica ${this.name}: its scratch folder ${this.scratch}, beside ${this.root}, cannot be made or written (${errorCode(err)}); preservd writes each file there first`,
        { cause: err },
      );
    }
    if ((await stat(this.scratch)).dev !== info.dev)
      throw new ReplicaUnusable(
        `replica ${this.name}: its scratch folder ${this.scratch} is on another filesystem than ${this.root}, so files cannot be renamed from it; make the replica's path a folder inside the mounted filesystem (e.g. ${join(this.root, 'preservd')}; docs/replicas.md)`,
      );
  }

  /**
   * A root that is not there (its volume not mounted) is down: a write never makes it again, and
   * a removal never takes its absence for a copy removed.
   */
  private async rootThere(): Promise<void> {
    if (
      !(await stat(this.root).then(
        (s) => s.isDirectory(),
        () => false,
      ))
    )
      throw new ReplicaDown(this.name, `folder ${this.root} is not there`);
  }

  private temporaryName(): string {
    return join(this.scratch, `${process.pid}-${randomBytes(8).toString('hex')}.tmp`);
  }

  async write(
    key: string,
    from: WriteSource,
    expected: ExpectedFile,
    opts: WriteOptions,
  ): Promise<'written' | 'exists'> {
    const source = streamOf(from, expected.size + 1);
    const target = this.path(key);
    const folder = dirname(target);
    const temporary = this.temporaryName();
    try {
      if (
        !opts.replace &&
        opts.absent !== true &&
        (await stat(target).then(
          () => true,
          () => false,
        ))
      ) {
        source.destroy();
        return 'exists';
      }
      await this.rootThere();
      await mkdir(folder, { recursive: true, mode: 0o750 });
      if (!this.scratchMade) await mkdir(this.scratch, { recursive: true, mode: 0o750 });
      this.scratchMade = true;
      const handle = await open(temporary, 'wx', 0o640);
      try {
        const checked = source.pipe(new CheckedPassThrough(expected));
        source.once('error', (err) => checked.destroy(err));
        for await (const chunk of checked) {
          opts.signal?.throwIfAborted();
          await handle.write(chunk as Buffer);
        }
        await handle.sync();
      } finally {
        await handle.close();
      }
      let outcome: 'written' | 'exists' = 'written';
      if (opts.replace) await rename(temporary, target);
      else {
        try {
          await link(temporary, target);
        } catch (err) {
          if (errorCode(err) !== 'EEXIST') throw err;
          outcome = 'exists';
        }
        await unlink(temporary);
      }
      await syncFolder(folder);
      return outcome;
    } catch (err) {
      source.destroy();
      await unlink(temporary).catch(() => undefined);
      opts.signal?.throwIfAborted();
      throw this.down(err);
    }
  }

  async readBack(
    key: string,
    expected: ExpectedFile,
    opts: { signal?: AbortSignal | undefined; bytesPerSec?: number },
  ): Promise<ReadBack> {
    let stream: Readable | undefined;
    try {
      stream = await this.open(key, undefined);
      if (stream === undefined) return { kind: 'missing' };
      const found = await digestOf(stream, { bytesPerSec: opts.bytesPerSec, signal: opts.signal });
      return found.size === expected.size && found.sha256 === expected.sha256.toLowerCase()
        ? { kind: 'match' }
        : { kind: 'differs', ...found };
    } catch (err) {
      opts.signal?.throwIfAborted();
      const code = errorCode(err);
      if (code === 'EIO' || code === 'EACCES' || code === 'EISDIR' || code === 'ELOOP')
        return { kind: 'unreadable', reason: code };
      throw this.down(err);
    } finally {
      stream?.destroy();
    }
  }

  async open(key: string, range?: { start: number; end: number }): Promise<Readable | undefined> {
    let handle;
    try {
      handle = await open(this.path(key), constants.O_RDONLY | constants.O_NOFOLLOW);
    } catch (err) {
      const code = errorCode(err);
      if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
      throw err;
    }
    return handle.createReadStream({
      highWaterMark: 1 << 20,
      ...(range ? { start: range.start, end: range.end } : {}),
    });
  }

  async *list(prefix: string): AsyncIterable<{ key: string; size: number }> {
    const start = prefix.replace(/\/+$/, '');
    const walk = async function* (root: string, rel: string): AsyncGenerator<{ key: string; size: number }> {
      let entries;
      try {
        entries = await readdir(join(root, rel), { withFileTypes: true });
      } catch (err) {
        if (errorCode(err) === 'ENOENT' || errorCode(err) === 'ENOTDIR') return;
        throw err;
      }
      entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      for (const entry of entries) {
        const key = `${rel}/${entry.name}`;
        if (entry.isDirectory()) yield* walk(root, key);
        else yield { key, size: entry.isFile() ? (await stat(join(root, key))).size : -1 };
      }
    };
    try {
      yield* walk(this.root, start);
    } catch (err) {
      throw this.down(err);
    }
  }

  async removeOld(key: string): Promise<{ retainedUntil?: Date }> {
    const path = this.path(key);
    try {
      await unlink(path).catch((err: unknown) => {
        if (errorCode(err) !== 'ENOENT') throw err;
      });
      for (let folder = dirname(path); folder.startsWith(`${this.root}/`); folder = dirname(folder)) {
        const left = await readdir(folder).catch(() => ['?']);
        if (left.length > 0) break;
        await rmdir(folder);
      }
    } catch (err) {
      throw this.down(err);
    }
    return {};
  }

  /**
   * The object folder renamed whole into the scratch folder (the root holds all of it or none),
   * the layout's folders it leaves empty removed at once (the root stays a valid OCFL root), then
   * deleted there. A root that is not there (a volume not mounted) is down, not a removal done.
   */
  async removeObject(prefix: string): Promise<{ retainedUntil?: Date }> {
    const folder = this.path(prefix.replace(/\/+$/, ''));
    const removing = join(this.scratch, `${process.pid}-${randomBytes(8).toString('hex')}.removing`);
    try {
      await this.rootThere();
      await mkdir(this.scratch, { recursive: true, mode: 0o750 });
      await rename(folder, removing).catch((err: unknown) => {
        if (errorCode(err) !== 'ENOENT') throw err;
      });
      failpoint('deaccession:replica-renamed');
      for (let up = dirname(folder); up.startsWith(`${this.root}/`); up = dirname(up)) {
        if ((await readdir(up).catch(() => ['?'])).length > 0) break;
        await rmdir(up);
      }
      // This one, and any an earlier run was killed before it could delete.
      for (const name of await readdir(this.scratch))
        if (
          REMOVING.test(name) &&
          (name === basename(removing) || Number(REMOVING.exec(name)![1]) !== process.pid)
        )
          await rm(join(this.scratch, name), { recursive: true, force: true });
    } catch (err) {
      throw this.down(err);
    }
    return {};
  }

  /**
   * Removes the temporary files an earlier run (another pid) left in the scratch folder, whatever
   * package they were for (they are never under the root, so `prefix` does not narrow them down);
   * this run's own, in flight, stay.
   */
  async abandonUnfinished(): Promise<number> {
    let removed = 0;
    let names: string[];
    try {
      names = await readdir(this.scratch);
    } catch (err) {
      if (errorCode(err) === 'ENOENT') return 0;
      throw this.down(err);
    }
    for (const name of names) {
      const leftOver = REMOVING.exec(name)?.[1];
      if (leftOver !== undefined && Number(leftOver) !== process.pid) {
        // An object a crash left half deleted: it is out of the root already.
        await rm(join(this.scratch, name), { recursive: true, force: true });
        continue;
      }
      const pid = TEMPORARY.exec(name)?.[1];
      if (pid === undefined || Number(pid) === process.pid) continue;
      await unlink(join(this.scratch, name)).catch((err: unknown) => {
        if (errorCode(err) !== 'ENOENT') throw this.down(err);
      });
      removed++;
    }
    return removed;
  }

  close(): void {}
}

/** fsync of a folder, so that a rename or link in it survives a power cut. */
async function syncFolder(folder: string): Promise<void> {
  const handle = await open(folder, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
