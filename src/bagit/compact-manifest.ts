/**
 * A payload manifest held compactly, for bags of many files: an entry whose path is a file on
 * disk as written (nearly all of them) is a digest in one buffer and a line number in one array,
 * at the file's index in the scan; only the other entries (missing files, other spellings) are
 * objects. A manifest of 200,000 lines costs a few megabytes instead of an object, a map entry
 * and a hex string per line. Entries come back in the order the manifest first lists them.
 *
 * It only stores what `readManifest` finds; it checks nothing itself.
 */
import { DIGEST_LENGTH, type Algorithm } from '../fixity/index.js';
import type { ManifestEntry, ManifestTable } from './manifest.js';

/** What a loaded manifest offers the validator: Map's `has` and `values`. */
export interface ManifestView {
  has(path: string): boolean;
  values(): Iterable<ManifestEntry>;
}

const UNLISTED = 0;
const WELL_FORMED = 1;
const MALFORMED = 2;

export class CompactManifest implements ManifestTable, ManifestView {
  /** Bytes of one digest. */
  private readonly width: number;
  private readonly digests: Buffer;
  private readonly lines: Uint32Array;
  /** Per file: UNLISTED, WELL_FORMED (digest in `digests`) or MALFORMED (in `malformed`). */
  private readonly state: Uint8Array;
  private readonly malformed = new Map<number, string>();
  private readonly conflicts = new Map<number, string[]>();
  /** Entries whose path is not a file on disk as written, by path and in order. */
  private readonly others = new Map<string, ManifestEntry>();
  private readonly otherList: ManifestEntry[] = [];
  /** Entries in the order listed: a file's index, or -(k + 1) for `otherList[k]`. */
  private readonly order: number[] = [];

  /**
   * `fileIndex`: each file's index in `paths` (the scan's files, which the entries are held
   * against).
   */
  constructor(
    algorithm: Algorithm,
    private readonly fileIndex: ReadonlyMap<string, number>,
    private readonly paths: (index: number) => string,
    count: number,
  ) {
    this.width = DIGEST_LENGTH[algorithm] / 2;
    this.digests = Buffer.alloc(count * this.width);
    this.lines = new Uint32Array(count);
    this.state = new Uint8Array(count);
  }

  digestOf(path: string): string | undefined {
    const i = this.fileIndex.get(path);
    if (i === undefined) return this.others.get(path)?.digest;
    return this.digestAt(i);
  }

  add(entry: Omit<ManifestEntry, 'conflictingDigests'>): void {
    const i = this.fileIndex.get(entry.path);
    if (i === undefined) {
      const other = { ...entry, conflictingDigests: [] };
      this.others.set(entry.path, other);
      this.order.push(-this.otherList.push(other)); // -(k + 1) for otherList[k]
      return;
    }
    if (entry.digestWellFormed) {
      this.digests.write(entry.digest, i * this.width, this.width, 'hex');
      this.state[i] = WELL_FORMED;
    } else {
      this.malformed.set(i, entry.digest);
      this.state[i] = MALFORMED;
    }
    this.lines[i] = entry.line;
    this.order.push(i);
  }

  addConflict(path: string, digest: string): void {
    const i = this.fileIndex.get(path);
    if (i === undefined) {
      this.others.get(path)?.conflictingDigests.push(digest);
      return;
    }
    const list = this.conflicts.get(i);
    if (list === undefined) this.conflicts.set(i, [digest]);
    else list.push(digest);
  }

  has(path: string): boolean {
    const i = this.fileIndex.get(path);
    return i === undefined ? this.others.has(path) : this.state[i] !== UNLISTED;
  }

  /** Every entry in the order listed, each made as it is reached. */
  *values(): Generator<ManifestEntry> {
    for (const at of this.order) {
      if (at < 0) {
        yield this.otherList[-at - 1]!;
        continue;
      }
      yield {
        path: this.paths(at),
        digest: this.digestAt(at)!,
        line: this.lines[at]!,
        digestWellFormed: this.state[at] === WELL_FORMED,
        conflictingDigests: this.conflicts.get(at) ?? [],
      };
    }
  }

  private digestAt(i: number): string | undefined {
    const state = this.state[i];
    if (state === WELL_FORMED) return this.digests.toString('hex', i * this.width, (i + 1) * this.width);
    return state === MALFORMED ? this.malformed.get(i) : undefined;
  }
}
