/**
 * A tiny in-process FileHasher for tests: one streamed read per file feeding every requested
 * digest and the CRC-32. It also counts calls per path, so tests can prove each file is read
 * exactly once.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { crc32 } from 'node:zlib';
import type { Algorithm } from '../../src/fixity/index.js';
import type { FileHasher } from '../../src/bagit/index.js';

export class SimpleHasher implements FileHasher {
  /** Absolute path → number of hashFile calls. */
  readonly calls = new Map<string, number>();
  /** Algorithms asked for, per call, in call order. */
  readonly requested: Algorithm[][] = [];

  async hashFile(
    absPath: string,
    algorithms: Algorithm[],
    opts?: { crc32?: boolean; priority?: 'ingest' | 'audit' },
  ): Promise<{ size: number; crc32?: string; digests: Partial<Record<Algorithm, string>> }> {
    this.calls.set(absPath, (this.calls.get(absPath) ?? 0) + 1);
    this.requested.push([...algorithms]);
    const hashes = algorithms.map((a) => [a, createHash(a)] as const);
    let crc = 0;
    let size = 0;
    for await (const chunk of createReadStream(absPath) as AsyncIterable<Buffer>) {
      size += chunk.length;
      for (const [, h] of hashes) h.update(chunk);
      if (opts?.crc32) crc = crc32(chunk, crc);
    }
    const digests: Partial<Record<Algorithm, string>> = {};
    for (const [a, h] of hashes) digests[a] = h.digest('hex');
    return opts?.crc32 ? { size, crc32: crc.toString(16).padStart(8, '0'), digests } : { size, digests };
  }
}
