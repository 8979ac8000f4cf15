/**
 * When the ingest may take an upload out of the depositor's reach. After an upload through our
 * own rsync daemon, which says when each transfer ended, complete starts the ingest at once; an
 * upload that arrived some other way (a local copy into the landing folder) waits for
 * `upload.quietMs` of quiet, as before.
 */
import { randomUUID } from 'node:crypto';
import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { rsyncUpload, TestDaemon } from '../helpers/daemon.js';
import { makeBag } from '../helpers/make-bag.js';

// Long enough that a tiny bag's ingest stays well under it at load ~25 (4 s ran out once).
const QUIET_MS = 12_000;

async function prepare(
  t: Test,
  d: TestDaemon,
  token: string,
): Promise<{ bagId: string; bagDir: string; link: string }> {
  const bagId = randomUUID();
  const request = await d.createRequest(token, {
    bag_id: bagId,
    external_id: `ext-${bagId.slice(0, 8)}`,
    content_type: 'video',
  });
  const scratch = await mkdtemp(join(tmpdir(), 'preservd-quiet-'));
  t.teardown(() => rm(scratch, { recursive: true, force: true }));
  const bagDir = join(scratch, 'bag');
  await makeBag(bagDir, {
    files: { 'a.txt': 'a\n', 'sub/b.txt': 'b\n' },
    chipmunkInfo: { externalId: request.external_id, bagId, contentType: 'video' },
  });
  return { bagId, bagDir, link: request.upload_link };
}

/** Seconds from POST complete to the queue item's end, and the item. */
async function completeAndTime(
  d: TestDaemon,
  token: string,
  bagId: string,
): Promise<{ seconds: number; item: any }> {
  const started = Date.now();
  const complete = await d.request('POST', `/v1/requests/${bagId}/complete`, { token });
  if (complete.status !== 201) throw new Error(`complete: ${complete.status} ${complete.text}`);
  const item = await d.waitForQueueItem(complete.json.id, token);
  return { seconds: (Date.now() - started) / 1000, item };
}

t.test(
  'an upload through our rsync is ingested without the quiet wait; a local copy waits for it',
  async (t) => {
    const d = await TestDaemon.start(t, { config: { upload: { quietMs: QUIET_MS } } });
    const token = d.adminToken;

    const viaRsync = await prepare(t, d, token);
    const up = rsyncUpload(viaRsync.bagDir, viaRsync.link);
    t.equal(up.code, 0, `rsync exits 0: ${up.output.slice(-300)}`);
    const fast = await completeAndTime(d, token, viaRsync.bagId);
    t.equal(fast.item.status, 'DONE');
    t.ok(
      fast.seconds < QUIET_MS / 1000,
      `complete → DONE took ${fast.seconds} s, less than quietMs (${QUIET_MS / 1000} s)`,
    );

    // The same, copied into the landing folder by hand: no transfer record says it is complete.
    const viaCopy = await prepare(t, d, token);
    const capability = viaCopy.link.split('/').filter(Boolean).pop()!;
    await cp(viaCopy.bagDir, join(d.dataDir, 'landing', capability), { recursive: true });
    const slow = await completeAndTime(d, token, viaCopy.bagId);
    t.equal(slow.item.status, 'DONE');
    t.ok(slow.seconds >= QUIET_MS / 1000, `complete → DONE took ${slow.seconds} s, at least quietMs`);

    // rsync first, then a local change after the transfer ended: its change time is later than
    // the transfer record, so the ingest waits for quiet again.
    const mixed = await prepare(t, d, token);
    t.equal(rsyncUpload(mixed.bagDir, mixed.link).code, 0);
    const mixedCap = mixed.link.split('/').filter(Boolean).pop()!;
    // The change must come after the transfer's record (written by rsync's post-xfer hook, which
    // may run a while after the client exits on a loaded machine): wait for its event first.
    for (let tries = 0; ; tries++) {
      const events = (await d.request('GET', `/v1/events?bag_id=${mixed.bagId}`, { token })).json as Array<{
        type: string;
      }>;
      if (events.some((e) => e.type === 'transfer')) break;
      if (tries > 200) throw new Error('no transfer event after 10 s');
      await new Promise((r) => setTimeout(r, 50));
    }
    await new Promise((r) => setTimeout(r, 50));
    await cp(join(mixed.bagDir, 'data/a.txt'), join(d.dataDir, 'landing', mixedCap, 'data/a.txt'));
    const waited = await completeAndTime(d, token, mixed.bagId);
    t.equal(waited.item.status, 'DONE');
    t.ok(
      waited.seconds >= QUIET_MS / 1000,
      `complete → DONE took ${waited.seconds} s after a local change, at least quietMs`,
    );
  },
);
