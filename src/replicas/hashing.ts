/**
 * Hashing bytes on their way through a stream: `CheckedPassThrough` lets them pass and, at the
 * end, fails the stream with a SourceChanged instead of ending it when they are not what the
 * catalog records. It holds the last chunk back until the check is done, so a writer reading from
 * it (an S3 PUT of known length, a temporary file) never receives a wrong copy whole. `digestOf` hashes a whole stream, for read-backs, optionally at a rate limit.
 */
import { createHash, type Hash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { Transform, type TransformCallback } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { SourceChanged, type ExpectedFile } from './target.js';

export class CheckedPassThrough extends Transform {
  private readonly hash: Hash = createHash('sha256');
  private size = 0;
  private held: Buffer | undefined;

  constructor(private readonly expected: ExpectedFile) {
    super({ highWaterMark: 1 << 20 });
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.hash.update(chunk);
    this.size += chunk.length;
    const previous = this.held;
    this.held = chunk;
    done(null, previous);
  }

  override _flush(done: TransformCallback): void {
    const sha256 = this.hash.digest('hex');
    if (this.size !== this.expected.size || sha256 !== this.expected.sha256.toLowerCase())
      done(new SourceChanged(this.size, sha256));
    else done(null, this.held);
  }
}

/**
 * Size and sha256 of everything `stream` yields. With `bytesPerSec` > 0 it reads no faster (a
 * token bucket: after each chunk it waits until the bytes so far fit the rate).
 */
export async function digestOf(
  stream: Readable,
  opts: { bytesPerSec?: number | undefined; signal?: AbortSignal | undefined } = {},
): Promise<{ size: number; sha256: string }> {
  const hash = createHash('sha256');
  let size = 0;
  const started = performance.now();
  const rate = opts.bytesPerSec ?? 0;
  for await (const chunk of stream) {
    const buf = chunk as Buffer;
    hash.update(buf);
    size += buf.length;
    if (rate > 0) {
      const due = started + (size / rate) * 1000 - performance.now();
      if (due > 1) await sleep(due, undefined, opts.signal ? { signal: opts.signal } : {});
    }
  }
  return { size, sha256: hash.digest('hex') };
}
