import t from 'tap';
import { createHash } from 'node:crypto';
import { readFileSync, utimesSync } from 'node:fs';
import { crc32 } from 'node:zlib';
import { ALGORITHMS, type Algorithm } from '../../src/fixity/index.js';
import { createHasher, type ResumeStore } from '../../src/fixity/index.js';
import { MiB, scratch } from './files.js';

const files = scratch();
t.teardown(() => files.remove());

const SIZE = 8 * MiB + 777;
const big = files.file('big', SIZE);
const bytes = readFileSync(big);
const expected = {
  size: SIZE,
  crc32: (crc32(bytes) >>> 0).toString(16).padStart(8, '0'),
  digests: Object.fromEntries(
    ALGORITHMS.map((a) => [a, createHash(a).update(bytes).digest('hex')]),
  ) as Record<Algorithm, string>,
};

/** An in-memory store that can "crash" the job (abort it) right after its n-th checkpoint. */
class MemoryStore implements ResumeStore {
  state: Uint8Array | undefined;
  saves = 0;
  loads = 0;
  clears = 0;
  readonly everyBytes = 1 * MiB;
  constructor(private readonly crashAfter?: { saves: number; controller: AbortController }) {}
  async load(): Promise<Uint8Array | undefined> {
    this.loads++;
    return this.state;
  }
  async save(state: Uint8Array): Promise<void> {
    this.state = state.slice();
    this.saves++;
    if (this.crashAfter && this.saves === this.crashAfter.saves) this.crashAfter.controller.abort();
  }
  async clear(): Promise<void> {
    this.clears++;
    this.state = undefined;
  }
}

t.test(
  'hash half, crash, resume in a new pool: same digests as a one-shot hash, second half read only',
  async (t) => {
    const controller = new AbortController();
    const store = new MemoryStore({ saves: 4, controller });
    const first = createHasher({ workers: 2, readSize: 64 * 1024 });
    await t.rejects(
      first.hashFile(big, [...ALGORITHMS], { crc32: true, resume: store, signal: controller.signal }),
      { code: 'ABORT_ERR' },
    );
    await first.close(); // the "restart"
    t.equal(store.saves, 4);
    t.ok(store.state, 'a checkpoint survived the crash');

    const second = createHasher({ workers: 2, readSize: 64 * 1024 });
    t.teardown(() => second.close());
    const result = await second.hashFile(big, [...ALGORITHMS], { crc32: true, resume: store });
    t.same(result, expected, 'digests, CRC-32 and size equal the one-shot ones');
    t.equal(second.stats().bytesHashed, SIZE - 4 * MiB, 'only the bytes after the checkpoint were read');
    t.equal(store.clears, 1, 'the finished checkpoint was cleared');
    t.equal(store.state, undefined);
  },
);

t.test('a checkpoint of a file that changed since (mtime) is ignored: start over', async (t) => {
  const controller = new AbortController();
  const store = new MemoryStore({ saves: 2, controller });
  const pool = createHasher({ workers: 1, readSize: 64 * 1024 });
  t.teardown(() => pool.close());
  await t.rejects(pool.hashFile(big, ['sha256'], { resume: store, signal: controller.signal }), {
    code: 'ABORT_ERR',
  });
  const before = pool.stats().bytesHashed;
  const later = new Date(Date.now() + 60_000);
  utimesSync(big, later, later);
  const result = await pool.hashFile(big, ['sha256'], { resume: store });
  t.equal(result.digests.sha256, expected.digests.sha256);
  t.equal(pool.stats().bytesHashed - before, SIZE, 'read from the start');
});

t.test('a checkpoint for other algorithms, or garbage, is ignored: start over', async (t) => {
  const pool = createHasher({ workers: 1, readSize: 64 * 1024 });
  t.teardown(() => pool.close());
  const controller = new AbortController();
  const store = new MemoryStore({ saves: 2, controller });
  await t.rejects(pool.hashFile(big, ['md5'], { resume: store, signal: controller.signal }), {
    code: 'ABORT_ERR',
  });
  let before = pool.stats().bytesHashed;
  t.same((await pool.hashFile(big, ['md5', 'sha1'], { resume: store })).digests, {
    md5: expected.digests.md5,
    sha1: expected.digests.sha1,
  });
  t.equal(pool.stats().bytesHashed - before, SIZE);

  const garbage = new MemoryStore();
  garbage.state = new TextEncoder().encode('{"format":"something else"}');
  before = pool.stats().bytesHashed;
  t.equal(
    (await pool.hashFile(big, ['sha512'], { resume: garbage })).digests.sha512,
    expected.digests.sha512,
  );
  t.equal(pool.stats().bytesHashed - before, SIZE);
});

t.test('a resumable job on an empty file and a small one; store errors reject the job', async (t) => {
  const pool = createHasher({ workers: 1 });
  t.teardown(() => pool.close());
  const empty = files.file('empty', 0);
  t.same(await pool.hashFile(empty, ['md5'], { crc32: true, resume: new MemoryStore() }), {
    size: 0,
    crc32: '00000000',
    digests: { md5: 'd41d8cd98f00b204e9800998ecf8427e' },
  });

  const failingSave: ResumeStore = {
    load: async () => undefined,
    save: async () => {
      throw Object.assign(new Error('disk full'), { code: 'ENOSPC' });
    },
    everyBytes: 1 * MiB,
  };
  await t.rejects(pool.hashFile(big, ['md5'], { resume: failingSave }), { code: 'ENOSPC' });
  const failingLoad: ResumeStore = {
    load: async () => {
      throw new Error('store unreachable');
    },
    save: async () => {},
  };
  await t.rejects(pool.hashFile(big, ['md5'], { resume: failingLoad }), { message: 'store unreachable' });
  t.equal((await pool.hashFile(big, ['md5'])).digests.md5, expected.digests.md5, 'the pool still works');
  t.match(pool.stats(), { queued: 0, running: 0 });
});

t.test('an audit job that is resumable lets an ingest job through, and both are right', async (t) => {
  const pool = createHasher({ workers: 1, readSize: 64 * 1024, auditRateLimitBytesPerSec: 16 * MiB });
  t.teardown(() => pool.close());
  const small = files.file('small', 300_000);
  const smallMd5 = createHash('md5').update(readFileSync(small)).digest('hex');
  const order: string[] = [];
  const audit = pool
    .hashFile(big, ['sha256'], { priority: 'audit', resume: new MemoryStore() })
    .then((r) => (order.push('audit'), r));
  await new Promise((r) => setTimeout(r, 100));
  const ingest = pool
    .hashFile(small, ['md5'], { resume: new MemoryStore() })
    .then((r) => (order.push('ingest'), r));
  t.equal((await ingest).digests.md5, smallMd5);
  t.equal((await audit).digests.sha256, expected.digests.sha256);
  t.same(order, ['ingest', 'audit']);
});
