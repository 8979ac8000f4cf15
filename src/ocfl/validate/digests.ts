/**
 * The digest algorithms OCFL names (spec §3.5.1, and extension 0001-digest-algorithms for fixity),
 * their hex lengths, and one streamed read of a file feeding every digest asked of it.
 * node:crypto for all but blake2b's shorter variants, which OpenSSL lacks (hash-wasm has them).
 */
import { createHash } from 'node:crypto';
import { createBLAKE2b } from 'hash-wasm';
import type { OcflReader } from './reader.js';

interface Hasher {
  update(chunk: Uint8Array): void;
  digest(): string;
}

const native = (name: string) => async (): Promise<Hasher> => {
  const hash = createHash(name);
  return { update: (c) => void hash.update(c), digest: () => hash.digest('hex') };
};

const blake2b = (bits: number) => async (): Promise<Hasher> => {
  const hash = await createBLAKE2b(bits);
  hash.init();
  return { update: (c) => void hash.update(c), digest: () => hash.digest('hex') };
};

/** Every algorithm this validator knows: its hex length and how to compute it. */
const ALGORITHMS: Record<string, { hexLength: number; hasher: () => Promise<Hasher> }> = {
  md5: { hexLength: 32, hasher: native('md5') },
  sha1: { hexLength: 40, hasher: native('sha1') },
  sha256: { hexLength: 64, hasher: native('sha256') },
  sha512: { hexLength: 128, hasher: native('sha512') },
  'blake2b-512': { hexLength: 128, hasher: native('blake2b512') },
  'blake2b-160': { hexLength: 40, hasher: blake2b(160) },
  'blake2b-256': { hexLength: 64, hasher: blake2b(256) },
  'blake2b-384': { hexLength: 96, hasher: blake2b(384) },
  'sha512/256': { hexLength: 64, hasher: native('sha512-256') },
};

/** The algorithms content may be addressed with (E025). */
export const CONTENT_ALGORITHMS: readonly string[] = ['sha512', 'sha256'];

export const isKnownAlgorithm = (name: string): boolean => Object.hasOwn(ALGORITHMS, name);

/** Whether `value` is a hex digest of `algorithm`'s length (upper or lower case: OCFL allows both). */
export function isDigestOf(algorithm: string, value: string): boolean {
  const entry = ALGORITHMS[algorithm];
  return entry !== undefined && value.length === entry.hexLength && /^[0-9a-fA-F]+$/.test(value);
}

/** Digests are compared case-insensitively (E096, E097). */
export const normalDigest = (value: string): string => value.toLowerCase();

/** One read of `path`, every algorithm of `algorithms` computed from it: algorithm → lower-case hex. */
export async function digestFile(
  reader: OcflReader,
  path: string,
  algorithms: Iterable<string>,
): Promise<Map<string, string>> {
  const hashers: Array<[string, Hasher]> = [];
  for (const name of algorithms) {
    const entry = ALGORITHMS[name];
    if (entry !== undefined) hashers.push([name, await entry.hasher()]);
  }
  for await (const chunk of reader.stream(path)) for (const [, h] of hashers) h.update(chunk);
  return new Map(hashers.map(([name, h]) => [name, h.digest()]));
}

/** The digest of bytes already read (an inventory, for its sidecar). */
export async function digestBytes(algorithm: string, bytes: Uint8Array): Promise<string | undefined> {
  const entry = ALGORITHMS[algorithm];
  if (entry === undefined) return undefined;
  const hasher = await entry.hasher();
  hasher.update(bytes);
  return hasher.digest();
}
