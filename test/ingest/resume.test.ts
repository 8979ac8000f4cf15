/**
 * Resumable hashing of huge files during ingest, through the real daemon: it dies (SIGKILL at
 * the `ingest:after-checkpoint` failpoint) in the middle of hashing a file above
 * `ingest.resumeAboveBytes`; the checkpoint is in the catalog; a restart on the same data
 * directory goes on from it (the log says from where, and the pool reads only the rest), and
 * the recorded digests are node:crypto's. A file changed in between refuses its checkpoint and
 * is hashed from the start. No checkpoint is left once the ingest ends (helpers/invariants.ts).
 */
import { createHash, randomFillSync, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import t, { type Test } from 'tap';
import { Catalog } from '../../src/catalog/catalog.js';
import { DataLayout } from '../../src/storage/layout.js';
import { Storage } from '../../src/storage/storage.js';
import { rsyncUpload, TestDaemon } from '../helpers/daemon.js';
import { assertInvariants } from '../helpers/invariants.js';
import { makeBag } from '../helpers/make-bag.js';
import { filesUnder } from '../helpers/walk.js';

const MiB = 1024 * 1024;
const BIG = 64 * MiB;
/** Checkpoints every quarter of it (4 MiB); the daemon dies after the second, at 8 MiB. */
const RESUME_ABOVE = 16 * MiB;
const DIES_AT = 8 * MiB;
/**
 * Not hashed as it lands: the ingest must be the one to read the huge file. With hashing on
 * arrival on, whether it does depends on whether complete comes before the background read of
 * it starts (under load it sometimes did not, and no checkpoint was ever written).
 */
const config = {
  ingest: { resumeAboveBytes: RESUME_ABOVE },
  upload: { rsync: { hashOnArrival: false } },
  logLevel: 'info',
};

const scratch = mkdtempSync(join(tmpdir(), 'preservd-resume-'));
t.teardown(() => rmSync(scratch, { recursive: true, force: true }));

interface LogLine {
  msg: string;
  level: number;
  path?: string;
  offset?: number;
}

function logLines(output: string): LogLine[] {
  return output.split('\n').flatMap((line) => {
    try {
      return [JSON.parse(line) as LogLine];
    } catch {
      return [];
    }
  });
}

async function bytesHashed(daemon: TestDaemon): Promise<number> {
  const metrics = await daemon.request('GET', '/metrics');
  const match = /^preservd_fixity_bytes_hashed_total (\d+)/m.exec(metrics.text);
  if (match === null) throw new Error(`no bytes-hashed metric in:\n${metrics.text}`);
  return Number(match[1]);
}

/** Ingests a bag with one huge file, killing the daemon after its second checkpoint. */
async function crashMidFile(t: Test) {
  const dataDir = mkdtempSync(join(tmpdir(), 'preservd-resumedata-'));
  t.teardown(() => {
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(`${dataDir}-config.json`, { force: true }); // TestDaemon writes it beside a kept data directory
  });
  const first = await TestDaemon.start(t, {
    dataDir,
    keepDataDir: true,
    config,
    env: { PRESERVD_FAILPOINT: 'ingest:after-checkpoint@2' },
  });
  const token = first.addUser('alice');
  const bagId = randomUUID();
  const req = await first.createRequest(token, {
    bag_id: bagId,
    external_id: `resume-${bagId.slice(0, 8)}`,
    content_type: 'video',
  });
  const bagDir = join(scratch, bagId);
  await makeBag(bagDir, {
    files: {
      'a.txt': 'a small file, hashed the fast way\n',
      'big.bin': randomFillSync(Buffer.allocUnsafe(BIG)),
    },
    chipmunkInfo: { externalId: req.external_id, bagId, contentType: 'video' },
  });
  t.equal(rsyncUpload(bagDir, req.upload_link).code, 0, 'uploaded');
  const complete = await first.request('POST', `/v1/requests/${bagId}/complete`, { token });
  t.equal(complete.status, 201);
  t.ok(await first.exitsWithin(60_000), 'the daemon died after the second checkpoint');
  await first.kill9(); // its rsync child too

  const catalog = Catalog.open(new DataLayout(dataDir), { readOnly: true });
  t.same(
    [...catalog.checkpoints.list()].map((c) => [c.bagId, c.path]),
    [[bagId, 'data/big.bin']],
    'the checkpoint is in the catalog',
  );
  await catalog.close();
  return {
    dataDir,
    token,
    bagId,
    bagDir,
    queueId: complete.json.id as number,
    stagedBig: join(new Storage(new DataLayout(dataDir)).stagingDir(bagId), 'data/big.bin'),
  };
}

/** Every file's size, CRC-32, md5 and sha256 as recorded, against node:crypto over the bag. */
async function assertRecordedDigests(t: Test, dataDir: string, bagId: string, bagDir: string): Promise<void> {
  const catalog = Catalog.open(new DataLayout(dataDir), { readOnly: true });
  try {
    const recorded = new Map(catalog.files.list(bagId).map((f) => [f.path, f]));
    t.same([...recorded.keys()].sort(), filesUnder(bagDir, { regularOnly: true }), 'every file recorded');
    for (const path of filesUnder(bagDir, { regularOnly: true })) {
      const bytes = readFileSync(join(bagDir, path));
      t.same(
        recorded.get(path),
        {
          path,
          size: bytes.length,
          crc32: (crc32(bytes) >>> 0).toString(16).padStart(8, '0'),
          digests: {
            md5: createHash('md5').update(bytes).digest('hex'),
            sha256: createHash('sha256').update(bytes).digest('hex'),
          },
        },
        `${path}: size, CRC-32 and digests are node:crypto's`,
      );
    }
  } finally {
    await catalog.close();
  }
}

const bagBytes = (bagDir: string): number =>
  filesUnder(bagDir, { regularOnly: true }).reduce((n, p) => n + statSync(join(bagDir, p)).size, 0);

t.test('killed after a checkpoint of a huge file, the restarted daemon goes on from it', async (t) => {
  const { dataDir, token, bagId, bagDir, queueId } = await crashMidFile(t);

  const second = await TestDaemon.start(t, { dataDir, keepDataDir: true, config });
  const item = await second.waitForQueueItem(queueId, token);
  t.equal(item.status, 'DONE', JSON.stringify(item));
  const resumed = logLines(second.output).filter((l) => l.msg === 'hashing resumed from a checkpoint');
  t.match(resumed, [{ path: 'data/big.bin', offset: DIES_AT }], 'the log says it resumed at the checkpoint');
  t.equal(
    await bytesHashed(second),
    bagBytes(bagDir) - DIES_AT,
    'the restarted daemon read the bag less the checkpointed bytes',
  );
  await second.stop();
  await assertRecordedDigests(t, dataDir, bagId, bagDir);
  await assertInvariants(t, dataDir); // no checkpoint left behind among them
});

t.test(
  'a file changed before the restart refuses its checkpoint: hashed from the start, still right',
  async (t) => {
    const { dataDir, token, bagId, bagDir, queueId, stagedBig } = await crashMidFile(t);
    const later = new Date(Date.now() + 60_000);
    utimesSync(stagedBig, later, later); // same bytes, another mtime: the checkpoint no longer fits

    const second = await TestDaemon.start(t, { dataDir, keepDataDir: true, config });
    const item = await second.waitForQueueItem(queueId, token);
    t.equal(item.status, 'DONE', JSON.stringify(item));
    const lines = logLines(second.output);
    t.same(
      lines.filter((l) => l.msg === 'hashing resumed from a checkpoint'),
      [],
      'not resumed',
    );
    t.match(
      lines.filter((l) => l.msg.startsWith('the checkpoint no longer fits')),
      [{ path: 'data/big.bin' }],
      'the refusal is logged',
    );
    t.equal(await bytesHashed(second), bagBytes(bagDir), 'every byte was read again');
    await second.stop();
    await assertRecordedDigests(t, dataDir, bagId, bagDir);
    await assertInvariants(t, dataDir);
  },
);

t.test(
  'a file whose bytes changed before the restart fails the ingest, and its checkpoint goes too',
  async (t) => {
    const { dataDir, token, queueId, stagedBig } = await crashMidFile(t);
    const bytes = readFileSync(stagedBig);
    bytes[0] = bytes[0]! ^ 0xff;
    writeFileSync(stagedBig, bytes);

    const second = await TestDaemon.start(t, { dataDir, keepDataDir: true, config });
    const item = await second.waitForQueueItem(queueId, token);
    t.equal(item.status, 'FAILED');
    t.ok(
      item.errors.some(
        (e: { code: string; path?: string }) => e.code === 'manifest-mismatch' && e.path === 'data/big.bin',
      ),
      JSON.stringify(item.errors),
    );
    await second.stop();
    await assertInvariants(t, dataDir); // the upload is back in landing, no checkpoint left
  },
);
