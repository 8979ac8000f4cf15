/**
 * The bytes a resumable job hands to its ResumeStore: where it got to in which file, and every
 * hasher's saved state. JSON inside, so a stuck run can be inspected; opaque to callers.
 */
import type { BigIntStats } from 'node:fs';
import type { Algorithm } from './algorithms.js';

const FORMAT = 'preservd-fixity-checkpoint/1';

export interface Checkpoint {
  format: typeof FORMAT;
  /** The file as fstat saw it when hashing started; any change means start over. */
  size: string;
  mtimeNs: string;
  ino: string;
  dev: string;
  /** Bytes hashed so far; the states below cover exactly bytes [0, offset). */
  offset: number;
  algorithms: Algorithm[];
  /** Running zlib CRC-32, or null when the job has no CRC. */
  crc32: number | null;
  /** hash-wasm `save()` output per algorithm, base64. */
  states: Partial<Record<Algorithm, string>>;
}

export type FileIdentity = Pick<Checkpoint, 'size' | 'mtimeNs' | 'ino' | 'dev'>;

export function fileIdentity(stat: BigIntStats): FileIdentity {
  return {
    size: String(stat.size),
    mtimeNs: String(stat.mtimeNs),
    ino: String(stat.ino),
    dev: String(stat.dev),
  };
}

export function encodeCheckpoint(checkpoint: Omit<Checkpoint, 'format'>): Uint8Array {
  return new TextEncoder().encode(JSON.stringify({ format: FORMAT, ...checkpoint }));
}

/** The checkpoint, if `bytes` is one of ours; undefined for anything else (the job then starts over). */
export function decodeCheckpoint(bytes: Uint8Array | undefined): Checkpoint | undefined {
  if (!bytes || bytes.length === 0) return undefined;
  try {
    const value: unknown = JSON.parse(new TextDecoder().decode(bytes));
    if (typeof value !== 'object' || value === null) return undefined;
    const c = value as Checkpoint;
    if (c.format !== FORMAT || !Number.isSafeInteger(c.offset) || c.offset < 0) return undefined;
    if (!Array.isArray(c.algorithms) || typeof c.states !== 'object' || c.states === null) return undefined;
    return c;
  } catch {
    return undefined;
  }
}

/** Whether `checkpoint` was taken on this very file, unchanged, for the same set of digests. */
export function checkpointFits(
  checkpoint: Checkpoint,
  identity: FileIdentity,
  algorithms: readonly Algorithm[],
  crc32: boolean,
): boolean {
  return (
    checkpoint.size === identity.size &&
    checkpoint.mtimeNs === identity.mtimeNs &&
    checkpoint.ino === identity.ino &&
    checkpoint.dev === identity.dev &&
    checkpoint.offset <= Number(identity.size) &&
    (checkpoint.crc32 !== null) === crc32 &&
    checkpoint.algorithms.length === algorithms.length &&
    algorithms.every((a) => checkpoint.algorithms.includes(a) && typeof checkpoint.states[a] === 'string')
  );
}
