/**
 * The hashers one read feeds. Native: node:crypto (OpenSSL with SHA-NI, several times faster than
 * hash-wasm; docs/performance.md, "Fixity"). Resumable: hash-wasm, whose hasher state can be saved
 * and loaded, for huge files that must survive a restart.
 *
 * CRC-32 comes from Node's native zlib.crc32 in both: faster than hash-wasm's crc32 (bench/fixity.ts
 * prints both), and its whole running state is one uint32, which a checkpoint stores as is.
 */
import { createHash, type Hash } from 'node:crypto';
import { crc32 } from 'node:zlib';
import type { IHasher } from 'hash-wasm';
import type { Algorithm } from './algorithms.js';

export interface DigestResult {
  crc32?: string;
  digests: Partial<Record<Algorithm, string>>;
}

function crc32Hex(value: number): string {
  return (value >>> 0).toString(16).padStart(8, '0');
}

/** node:crypto digests (algorithm names are OpenSSL's, the same as ours) plus an optional CRC-32. */
export class NativeDigester {
  private readonly hashes: [Algorithm, Hash][];
  private crc: number | undefined;

  constructor(algorithms: readonly Algorithm[], withCrc32: boolean) {
    this.hashes = algorithms.map((a) => [a, createHash(a)]);
    this.crc = withCrc32 ? 0 : undefined;
  }

  update(chunk: Uint8Array): void {
    for (const [, hash] of this.hashes) hash.update(chunk);
    if (this.crc !== undefined) this.crc = crc32(chunk, this.crc);
  }

  finish(): DigestResult {
    const digests: Partial<Record<Algorithm, string>> = {};
    for (const [algorithm, hash] of this.hashes) digests[algorithm] = hash.digest('hex');
    return this.crc === undefined ? { digests } : { crc32: crc32Hex(this.crc), digests };
  }
}

/** One hash-wasm hasher per algorithm, made once (instantiating WebAssembly is async) and reused. */
export type WasmHasherSet = Record<Algorithm, IHasher>;

export async function createWasmHasherSet(): Promise<WasmHasherSet> {
  // Loaded here, not at the worker's start: only resumable jobs need it, and every worker (every
  // `preservd validate`) paid for loading it before.
  const { createMD5, createSHA1, createSHA224, createSHA256, createSHA384, createSHA512 } =
    await import('hash-wasm');
  const wasmFactories: Record<Algorithm, () => Promise<IHasher>> = {
    md5: createMD5,
    sha1: createSHA1,
    sha224: createSHA224,
    sha256: createSHA256,
    sha384: createSHA384,
    sha512: createSHA512,
  };
  const entries = await Promise.all(
    (Object.keys(wasmFactories) as Algorithm[]).map(async (a) => [a, await wasmFactories[a]()] as const),
  );
  return Object.fromEntries(entries) as WasmHasherSet;
}

/** hash-wasm digests whose running state can be saved and loaded. */
export class ResumableDigester {
  private readonly hashers: [Algorithm, IHasher][];
  private crc: number | undefined;

  constructor(set: WasmHasherSet, algorithms: readonly Algorithm[], withCrc32: boolean) {
    this.hashers = algorithms.map((a) => [a, set[a].init()]);
    this.crc = withCrc32 ? 0 : undefined;
  }

  update(chunk: Uint8Array): void {
    for (const [, hasher] of this.hashers) hasher.update(chunk);
    if (this.crc !== undefined) this.crc = crc32(chunk, this.crc);
  }

  save(): { crc32: number | null; states: Partial<Record<Algorithm, string>> } {
    const states: Partial<Record<Algorithm, string>> = {};
    for (const [algorithm, hasher] of this.hashers)
      states[algorithm] = Buffer.from(hasher.save()).toString('base64');
    return { crc32: this.crc ?? null, states };
  }

  /** Throws if a state does not load (another hash-wasm build, say); the caller then starts over. */
  load(saved: { crc32: number | null; states: Partial<Record<Algorithm, string>> }): void {
    for (const [algorithm, hasher] of this.hashers) {
      const state = saved.states[algorithm];
      if (state === undefined) throw new Error(`checkpoint has no ${algorithm} state`);
      hasher.load(Buffer.from(state, 'base64'));
    }
    if (this.crc !== undefined) this.crc = saved.crc32 ?? 0;
  }

  /** Back to the empty-input state, after a failed load. */
  reset(): void {
    for (const [, hasher] of this.hashers) hasher.init();
    if (this.crc !== undefined) this.crc = 0;
  }

  finish(): DigestResult {
    const digests: Partial<Record<Algorithm, string>> = {};
    for (const [algorithm, hasher] of this.hashers) digests[algorithm] = hasher.digest('hex');
    return this.crc === undefined ? { digests } : { crc32: crc32Hex(this.crc), digests };
  }
}
