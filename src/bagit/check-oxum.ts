/**
 * Validation step: the payload's size (octets and files, as read) against bag-info.txt's
 * Payload-Oxum, when it gives one.
 */
import type { ScannedBag } from './bag-context.js';
import type { HashedBag } from './hash-bag.js';
import { isPayloadPath } from './paths.js';
import { makeProblem, type BagProblem } from './problems.js';
import type { BagInfo } from './read-bag-info.js';

export interface PayloadSize {
  bytes: number;
  files: number;
}

/** Octets as read (as scanned where a file could not be read) and files under data/. */
export function payloadSize(bag: ScannedBag, hashed: HashedBag): PayloadSize {
  const size = { bytes: 0, files: 0 };
  bag.scan.files.forEach((f, i) => {
    if (!isPayloadPath(f.path)) return;
    size.bytes += hashed[i]?.size ?? f.size;
    size.files++;
  });
  return size;
}

export function checkOxum(bag: ScannedBag, bagInfo: BagInfo, payload: PayloadSize): BagProblem[] {
  const { oxum, fileName } = bagInfo;
  // With part of the payload out of reach its size is unknown, and that was reported already.
  const payloadKnown = !bag.scan.unreachable.some((u) => isPayloadPath(u));
  if (oxum === undefined || fileName === undefined || !payloadKnown) return [];
  const m = /^(\d+)\.(\d+)$/.exec(oxum);
  if (!m) return [makeProblem({ code: 'payload-oxum-malformed', path: fileName, value: oxum })];
  if (BigInt(m[1]!) !== BigInt(payload.bytes) || BigInt(m[2]!) !== BigInt(payload.files)) {
    return [
      makeProblem({
        code: 'payload-oxum-mismatch',
        path: fileName,
        expected: oxum,
        actual: `${payload.bytes}.${payload.files}`,
      }),
    ];
  }
  return [];
}
