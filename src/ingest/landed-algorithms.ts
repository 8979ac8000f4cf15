/**
 * Which digests a file landing in an upload is hashed for (landed-hasher.ts): sha256, which
 * storage keeps, and the algorithms of the upload's manifests, so that the validation at complete
 * finds every digest it compares.
 */
import { readdir } from 'node:fs/promises';
import { ALGORITHMS, type Algorithm } from '../fixity/index.js';

/** What is computed for a landed file while its upload has no manifest yet (docs/decisions.md). */
export const LANDED_ALGORITHMS: readonly Algorithm[] = ['md5', 'sha1', 'sha256', 'sha512'];

/** Uploads' answers kept at once, at most (then forgotten together). */
const KEPT = 1_000;

export class LandedAlgorithms {
  private readonly seen = new Map<string, { at: number; algorithms: Algorithm[] }>();

  /**
   * sha256 and the algorithms of the manifests at the root of the upload at `dir` (rsync sends
   * the root's files before data/'s, so they are mostly there); all of LANDED_ALGORITHMS while
   * there is none. Looked up at most once a second per upload.
   */
  async of(dir: string): Promise<Algorithm[]> {
    const cached = this.seen.get(dir);
    if (cached !== undefined && Date.now() - cached.at < 1_000) return cached.algorithms;
    const names = await readdir(dir).catch(() => [] as string[]);
    const named = new Set<string>(['sha256']);
    for (const name of names) {
      const match = /^(?:tag)?manifest-(\w+)\.txt$/.exec(name);
      if (match !== null) named.add(match[1]!);
    }
    const algorithms = named.size > 1 ? ALGORITHMS.filter((a) => named.has(a)) : [...LANDED_ALGORITHMS];
    if (this.seen.size > KEPT) this.seen.clear();
    this.seen.set(dir, { at: Date.now(), algorithms });
    return algorithms;
  }
}
