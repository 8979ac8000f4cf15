/**
 * Upload capabilities: the unguessable name of a request's landing folder and the secret part of
 * its upload link (`rsync://host:port/module/<capability>/`). Whoever knows one may write into
 * that folder while the request is open, so it is 128 random bits and nothing else: no bag_id,
 * no user, no time. Checking the shape here is what lets the rest of ingest join it to a path.
 */
import { randomBytes } from 'node:crypto';

const CAPABILITY = /^[0-9a-f]{32}$/;

/** A fresh capability: 128 bits from the OS's CSPRNG as 32 lower-case hex characters. */
export function newCapability(): string {
  return randomBytes(16).toString('hex');
}

/** True when `s` has the exact shape of a capability (and so is safe as one path component). */
export function isCapability(s: unknown): s is string {
  return typeof s === 'string' && CAPABILITY.test(s);
}

/** Throws unless `s` is a capability; for the places that are about to build a path from it. */
export function assertCapability(s: unknown): asserts s is string {
  if (!isCapability(s)) {
    throw new TypeError('not an upload capability (expected 32 lower-case hex characters)');
  }
}
