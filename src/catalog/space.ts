/**
 * Disk blocks claimed ahead of the catalog's LMDB data file, so that LMDB itself never meets a
 * full disk. lmdb-js does not survive ENOSPC inside a commit: the write fails, and a later one can
 * abort the whole process on a corrupted heap (docs/decisions.md, "The catalog claims its disk
 * space first"). So before every write transaction the room it may need is claimed with
 * `fallocate --keep-size`, which allocates blocks past the end of the file without changing its
 * size: it either succeeds whole, or fails with ENOSPC before LMDB has written a byte, and the
 * write is refused as out of space (507) with nothing changed. Blocks claimed this way cannot be
 * taken by an upload that fills the disk afterwards.
 *
 * The last headroom's worth of that room is kept for writes that end work (`outcome`): an ingest
 * recording that it FAILED for lack of space, an upload given back under a new link. Any other
 * write is refused while the claimed room is below two headrooms, so that no writer can use up
 * what an ingest needs to say it ended; without it an ingest on a full disk could stay PENDING,
 * retried until space came back. Writes that only save work later (`background`: the digests of
 * files hashed as they land, which complete otherwise reads again) stop at three, so that they
 * cannot leave a depositor's complete or new request without room either.
 *
 * Where the filesystem cannot preallocate (fallocate unsupported), it falls back to refusing
 * writes while the filesystem's free space is below the headroom: racy against another writer,
 * but the best such a filesystem allows.
 *
 * This module does not write to LMDB and knows nothing of its pages: it sees one file's size.
 */
import { spawnSync } from 'node:child_process';
import { statSync, statfsSync } from 'node:fs';

const MB = 1024 * 1024;

/** A write refused before it began: the catalog could not claim the disk space it may need. */
class CatalogSpaceError extends Error {
  readonly code: 'ENOSPC' | 'EDQUOT';

  constructor(code: 'ENOSPC' | 'EDQUOT', detail: string) {
    super(`the catalog cannot claim disk space for a write: ${detail}`);
    this.name = 'CatalogSpaceError';
    this.code = code;
  }
}

/** Whose room a write may use (above): headrooms kept back from it, besides its own. */
const KEPT_BACK = { outcome: 0, normal: 1, background: 2 } as const;
export type WriteKind = keyof typeof KEPT_BACK;

export interface SpaceClaimOptions {
  /** Bytes of claimed blocks kept past the end of the file before every write. */
  headroomBytes?: number;
}

/**
 * Keeps `headroom` bytes (more when a write says it needs more) of allocated blocks past the end
 * of one file.
 */
export class SpaceClaim {
  private mode: 'fallocate' | 'statfs' = 'fallocate';
  /** Why the last claim failed, until one succeeds. */
  private refused: 'ENOSPC' | 'EDQUOT' | undefined;
  readonly headroom: number;

  constructor(
    private readonly file: string,
    options: SpaceClaimOptions = {},
  ) {
    this.headroom = options.headroomBytes ?? defaultHeadroom(file);
  }

  /**
   * Makes sure `extraBytes` (at least the headroom) can be written past the file's end without a
   * new block from the filesystem, and the headrooms kept back from this kind of write after it
   * (the reserve); throws CatalogSpaceError when that room cannot be had.
   */
  ensure(extraBytes = 0, kind: WriteKind = 'normal'): void {
    const need = Math.max(this.headroom, extraBytes) + KEPT_BACK[kind] * this.headroom;
    const { size, allocated } = fileSpace(this.file);
    if (size + need <= allocated) return;
    if (this.mode === 'statfs') return this.checkFree(need);
    // Refused before and the disk still cannot give the blocks missing: say so without asking
    // fallocate again.
    if (this.refused && freeBytes(this.file) < size + need - allocated)
      throw new CatalogSpaceError(this.refused, `${need} bytes past the end of ${this.file}`);
    // A headroom more than this write needs, so that fallocate runs once per many writes; if the
    // disk cannot give that much, exactly what this write needs.
    let refusal: 'ENOSPC' | 'EDQUOT' = 'ENOSPC';
    for (const target of [size + need + this.headroom, size + need]) {
      const outcome = preallocate(this.file, target);
      if (outcome === 'done') {
        this.refused = undefined;
        return;
      }
      if (outcome === 'unsupported') {
        this.mode = 'statfs';
        return this.checkFree(need);
      }
      refusal = outcome;
    }
    this.refused = refusal;
    throw new CatalogSpaceError(refusal, `${need} bytes past the end of ${this.file}`);
  }

  private checkFree(need: number): void {
    const free = freeBytes(this.file);
    if (free < need)
      throw new CatalogSpaceError('ENOSPC', `${free} bytes free where ${need} are kept in reserve`);
  }
}

/**
 * 1/256 of the filesystem, between 256 kB and 64 MB: room for any ordinary transaction (the big
 * ones say what they need), and a big disk can spare more per claim.
 */
function defaultHeadroom(file: string): number {
  try {
    const fs = statfsSync(file);
    return Math.min(64 * MB, Math.max(MB / 4, Math.floor((fs.blocks * fs.bsize) / 256)));
  } catch {
    return 16 * MB;
  }
}

function freeBytes(file: string): number {
  const fs = statfsSync(file);
  return fs.bavail * fs.bsize;
}

/** The file's size, and the bytes of blocks allocated to it (past its end too, once claimed). */
function fileSpace(file: string): { size: number; allocated: number } {
  try {
    const st = statSync(file);
    return { size: st.size, allocated: st.blocks * 512 };
  } catch {
    return { size: 0, allocated: 0 };
  }
}

/** `fallocate --keep-size` of [0, length): done, refused for space or quota, or unsupported here. */
function preallocate(file: string, length: number): 'done' | 'ENOSPC' | 'EDQUOT' | 'unsupported' {
  const r = spawnSync('fallocate', ['--keep-size', '--offset', '0', '--length', String(length), file], {
    encoding: 'utf8',
  });
  if (r.error !== undefined) return 'unsupported'; // no fallocate(1) on this machine
  if (r.status === 0) return 'done';
  if (/No space left/i.test(r.stderr)) return 'ENOSPC';
  if (/Disk quota exceeded/i.test(r.stderr)) return 'EDQUOT';
  return 'unsupported';
}
