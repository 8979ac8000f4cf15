/**
 * A revision against its yardsticks (`node dist/bench/revise.js [--scale 1/16] [--json]`; the
 * scale may also come from PRESERVD_BENCH_SCALE), through a real daemon and real rsync:
 *
 * - a bag of ~1 GiB at scale 1: 42 random payload files of 24 MiB and 200 small ones, md5 and
 *   sha256 manifests (a scale s makes files of s × 24 MiB), deposited and stored as version 1;
 * - a revision opened (its upload pre-filled with version 1), one 24 MiB file rewritten with new
 *   bytes and the manifests remade, as a depositor corrects a bag;
 * - the bytes rsync -rtvzP --delete --stats sends for it over the bag's size (target ≤ 0.05);
 * - revision complete→DONE over a full `preservd validate` of the corrected bag, whole process
 *   (target ≤ 0.5: only the changed file and the manifests should be read again).
 *
 * Run as root, the daemon runs as `nobody` (as bench/ingest's): a daemon running as root uses
 * rsync's fake super, which rewrites an xattr of every listed file, so the copies would be read
 * again (docs/decisions.md); the systemd unit runs it as an ordinary user.
 */
import { spawnSync } from 'node:child_process';
import { createHash, randomFillSync, randomUUID } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  createReadStream,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliPath, TestDaemon } from '../test/helpers/daemon.js';

const MiB = 1024 * 1024;
/** Debian's `nobody` and `nogroup`. */
const NOBODY = 65534;
const TARGETS = { sentToBag: 0.05, completeToValidate: 0.5 };

function parseScale(text: string): number {
  const fraction = /^\s*(\d+(?:\.\d+)?)\s*\/\s*(\d+(?:\.\d+)?)\s*$/.exec(text);
  return fraction ? Number(fraction[1]) / Number(fraction[2]) : Number(text);
}

async function digest(algorithm: string, path: string): Promise<string> {
  const hash = createHash(algorithm);
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

function randomFile(path: string, bytes: number): void {
  const buffer = Buffer.allocUnsafe(bytes);
  randomFillSync(buffer);
  writeFileSync(path, buffer);
}

/** Manifests and tag manifests (md5, sha256) of the bag as it is on disk. */
async function writeManifests(dir: string, payload: string[]): Promise<void> {
  for (const a of ['md5', 'sha256']) {
    const lines = await Promise.all(payload.map(async (p) => `${await digest(a, join(dir, p))}  ${p}\n`));
    writeFileSync(join(dir, `manifest-${a}.txt`), lines.join(''));
  }
  const tags = readdirSync(dir).filter((n) => n !== 'data' && !n.startsWith('tagmanifest-'));
  for (const a of ['md5', 'sha256']) {
    const lines = await Promise.all(tags.map(async (p) => `${await digest(a, join(dir, p))}  ${p}\n`));
    writeFileSync(join(dir, `tagmanifest-${a}.txt`), lines.join(''));
  }
}

async function makeBag(dir: string, scale: number, ids: { bagId: string; externalId: string }) {
  const big = Math.max(1, Math.round(24 * MiB * scale));
  mkdirSync(join(dir, 'data', 'small'), { recursive: true });
  const payload: string[] = [];
  let bytes = 0;
  for (let i = 0; i < 42; i++) {
    randomFile(join(dir, 'data', `big-${i}.bin`), big);
    payload.push(`data/big-${i}.bin`);
    bytes += big;
  }
  for (let i = 0; i < 200; i++) {
    writeFileSync(join(dir, 'data', 'small', `${i}.txt`), `small file ${i}\n`.repeat(100));
    payload.push(`data/small/${i}.txt`);
    bytes += Buffer.byteLength(`small file ${i}\n`.repeat(100));
  }
  writeFileSync(join(dir, 'bagit.txt'), 'BagIt-Version: 1.0\nTag-File-Character-Encoding: UTF-8\n');
  writeFileSync(join(dir, 'bag-info.txt'), `Payload-Oxum: ${bytes}.${payload.length}\n`);
  writeFileSync(
    join(dir, 'chipmunk-info.txt'),
    `External-Identifier: ${ids.externalId}\nChipmunk-Content-Type: digital\nBag-ID: ${ids.bagId}\n`,
  );
  await writeManifests(dir, payload);
  return { payload, bytes, big };
}

function rsync(bagDir: string, link: string): { sent: number; output: string } {
  const r = spawnSync('rsync', ['-rtvzP', '--delete', '--stats', `${bagDir}/`, link], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`rsync failed: ${r.stdout}${r.stderr}`);
  const sent = /Total bytes sent: ([\d,]+)/.exec(r.stdout)?.[1] ?? '0';
  return { sent: Number(sent.replaceAll(',', '')), output: r.stdout };
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const json = argv.includes('--json');
  const at = argv.indexOf('--scale');
  const scale = parseScale(at >= 0 ? (argv[at + 1] ?? '') : (process.env.PRESERVD_BENCH_SCALE ?? '1'));
  const teardowns: Array<() => unknown> = [];
  const scratch = mkdtempSync(join(tmpdir(), 'preservd-bench-revise-'));
  teardowns.push(() => rmSync(scratch, { recursive: true, force: true }));
  try {
    // As root, the daemon runs as nobody (above), who must reach its data directory.
    const user = process.getuid?.() === 0 ? { uid: NOBODY, gid: NOBODY } : {};
    const dataDir = mkdtempSync(join(scratch, 'data-'));
    if (user.uid !== undefined) {
      chmodSync(scratch, 0o711);
      chownSync(dataDir, user.uid, user.gid);
    }
    const d = await TestDaemon.start(
      { teardown: (fn) => teardowns.push(fn) },
      { dataDir, config: { logLevel: 'warn' }, ...user },
    );
    const bagId = randomUUID();
    const req = await d.createRequest(d.adminToken, {
      bag_id: bagId,
      external_id: `revise-${bagId.slice(0, 8)}`,
    });
    const bagDir = join(scratch, 'bag');
    const bag = await makeBag(bagDir, scale, { bagId, externalId: req.external_id });
    rsync(bagDir, req.upload_link);
    const first = await d.request('POST', `/v1/requests/${bagId}/complete`);
    if ((await d.waitForQueueItem(first.json.id, undefined, 3_600_000)).status !== 'DONE')
      throw new Error('the first deposit failed');

    const opened = await d.request('POST', `/v1/packages/${bagId}/revisions`, { json: { note: 'bench' } });
    if (opened.status !== 201) throw new Error(`open: ${opened.status} ${opened.text}`);
    randomFile(join(bagDir, 'data', 'big-7.bin'), bag.big);
    await writeManifests(bagDir, bag.payload);
    const { sent } = rsync(bagDir, opened.json.upload_link);

    const started = process.hrtime.bigint();
    const complete = await d.request('POST', `/v1/packages/${bagId}/revisions/2/complete`);
    const item = await d.waitForQueueItem(complete.json.id, undefined, 3_600_000);
    const completeSeconds = Number(process.hrtime.bigint() - started) / 1e9;
    if (item.status !== 'DONE') throw new Error(`the revision failed: ${JSON.stringify(item)}`);

    const validateStart = process.hrtime.bigint();
    const validate = spawnSync(process.execPath, [cliPath, 'validate', bagDir], {
      encoding: 'utf8',
    });
    const validateSeconds = Number(process.hrtime.bigint() - validateStart) / 1e9;
    if (validate.status !== 0) throw new Error(`validate failed: ${validate.stdout}${validate.stderr}`);

    const result = {
      scale,
      bagBytes: bag.bytes,
      rsyncSentBytes: sent,
      sentToBag: sent / bag.bytes,
      completeSeconds,
      validateSeconds,
      completeToValidate: completeSeconds / validateSeconds,
      daemonUser: user.uid === undefined ? "the bench's user" : 'nobody',
      targets: TARGETS,
    };
    if (json) console.log(JSON.stringify(result));
    else
      console.log(
        [
          `bag ${(bag.bytes / MiB).toFixed(1)} MiB (scale ${scale}), one ${(bag.big / MiB).toFixed(1)} MiB file changed`,
          `rsync sent ${sent} bytes: ${result.sentToBag.toFixed(4)} of the bag (target ≤ ${TARGETS.sentToBag})`,
          `revision complete→DONE ${completeSeconds.toFixed(2)} s, full validate ${validateSeconds.toFixed(2)} s: ${result.completeToValidate.toFixed(2)} (target ≤ ${TARGETS.completeToValidate}), daemon as ${result.daemonUser}`,
        ].join('\n'),
      );
  } finally {
    for (const fn of teardowns.reverse()) await fn();
  }
}

await main();
