/**
 * Replication to a real Ceph RADOS Gateway against its yardsticks, in one run
 * (`node dist/bench/replicate.js [--rounds 2] [--https] [--json]`):
 *
 * - a bag of ~1 GiB (16 files of 64 MiB and 500 text files of 1–8 KiB, md5 and sha256
 *   manifests) is written under the OS temporary folder;
 * - raw PUT: every file of the bag PUT one after another, each one PutObject streamed from disk
 *   (AWS SDK v3): what the gateway takes from one plain client;
 * - `rclone copy` (Debian's rclone) of the same folder to the same kind of bucket, its defaults
 *   (4 transfers, multipart above 200 MiB);
 * - preservd: a real daemon (`dist/src/cli.js serve`) with the bucket as its replica ingests the
 *   bag (not timed); the time from the queue item's DONE to the copy's `verified_at` (both from
 *   the catalog) is the copy plus its read-back verification (target ≤ 1.5 × rclone's copy
 *   alone). The daemon's VmRSS is sampled in that window (target < 200 MB), and its CPU seconds
 *   (user + system, /proc) counted from the ingest's answer to the copy's verification.
 *
 * With `--https` all three talk to the gateway's TLS endpoint (its throw-away CA trusted through
 * NODE_EXTRA_CA_CERTS for the daemon, `--ca-cert` for rclone), the path AWS users take.
 *
 * Each measurement gets a new single-node Ceph (memstore, test/helpers/ceph.ts), so no run pays
 * for another's data. Rounds alternate raw, rclone, preservd; ratios are taken per round and the
 * median is reported. Everything temporary is deleted at the end.
 */
import { spawnSync } from 'node:child_process';
import { randomFillSync } from 'node:crypto';
import { createReadStream, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { Agent } from 'node:https';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { CreateBucketCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { rcloneEnv } from './lib/rclone.js';
import { startCeph, type Ceph } from '../test/helpers/ceph.js';
import { TestDaemon } from '../test/helpers/daemon.js';
import { ingestBag } from '../test/helpers/ingest.js';
import { makeBag } from '../test/helpers/make-bag.js';
import { filesUnder } from '../test/helpers/walk.js';
import { median, range } from './stats.js';

const MiB = 1024 * 1024;
const BIG = { count: 16, bytes: 64 * MiB };
const SMALL = 500;
const TARGETS = { toRclone: 1.5, rssMB: 200 };

interface Options {
  rounds: number;
  json: boolean;
  https: boolean;
}

function parseArgs(argv: string[]): Options {
  const o: Options = { rounds: 2, json: false, https: false };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--json') o.json = true;
    else if (argv[i] === '--https') o.https = true;
    else if (argv[i] === '--rounds') o.rounds = Number(argv[++i]);
    else throw new Error(`unknown argument ${argv[i]}; usage: replicate.js [--rounds 2] [--https] [--json]`);
  }
  if (!(Number.isInteger(o.rounds) && o.rounds >= 1)) throw new Error('--rounds must be an integer ≥ 1');
  return o;
}

/** Teardowns of what a measurement started (its Ceph), run when it ends. */
class Scope {
  private readonly fns: Array<() => unknown> = [];
  teardown(fn: () => unknown): void {
    this.fns.push(fn);
  }
  async end(): Promise<void> {
    for (const fn of this.fns.reverse()) await fn();
  }
}

function payload(): Record<string, Buffer> {
  const pool = randomFillSync(Buffer.allocUnsafe(BIG.bytes + 16 * MiB));
  const files: Record<string, Buffer> = {};
  for (let i = 0; i < BIG.count; i++)
    files[`masters/reel-${String(i).padStart(2, '0')}.wav`] = pool.subarray(i * MiB, i * MiB + BIG.bytes);
  for (let i = 0; i < SMALL; i++) {
    const size = 1024 + ((i * 2654435761) % (7 * 1024));
    files[`pages/page-${String(i).padStart(4, '0')}.txt`] = Buffer.from(
      pool
        .subarray(i * 4099, i * 4099 + size)
        .toString('base64')
        .slice(0, size),
    );
  }
  return files;
}

let useHttps = false;
const endpointOf = (ceph: Ceph) => (useHttps ? ceph.httpsEndpoint : ceph.endpoint);

function client(ceph: Ceph): S3Client {
  return new S3Client({
    endpoint: endpointOf(ceph),
    region: ceph.region,
    forcePathStyle: true,
    // An Agent, not its options: the SDK makes a new agent without them for a PUT with a body (Expect: 100-continue).
    requestHandler: { httpsAgent: new Agent({ keepAlive: true, ca: readFileSync(ceph.caFile) }) },
    credentials: { accessKeyId: ceph.accessKeyId, secretAccessKey: ceph.secretAccessKey },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
}

async function withCeph<T>(fn: (ceph: Ceph, s3: S3Client) => Promise<T>): Promise<T> {
  const scope = new Scope();
  try {
    const ceph = await startCeph(scope);
    const s3 = client(ceph);
    scope.teardown(() => s3.destroy());
    await s3.send(new CreateBucketCommand({ Bucket: 'bench' }));
    return await fn(ceph, s3);
  } finally {
    await scope.end();
  }
}

/** Seconds to PUT every file of `dir`, one after another, each streamed in one PutObject. */
function rawPut(dir: string, paths: string[]): Promise<number> {
  return withCeph(async (_ceph, s3) => {
    const started = performance.now();
    for (const path of paths) {
      const abs = join(dir, path);
      await s3.send(
        new PutObjectCommand({
          Bucket: 'bench',
          Key: `raw/${path}`,
          Body: createReadStream(abs, { highWaterMark: MiB }),
          ContentLength: statSync(abs).size,
        }),
      );
    }
    return (performance.now() - started) / 1000;
  });
}

/** Seconds of `rclone copy dir :s3:bench/rclone` with the defaults. */
function rclone(dir: string): Promise<number> {
  return withCeph(async (ceph) => {
    const env = rcloneEnv({ ...ceph, endpoint: endpointOf(ceph) });
    const started = performance.now();
    const run = spawnSync(
      'rclone',
      ['copy', dir, ':s3:bench/rclone', ...(useHttps ? ['--ca-cert', ceph.caFile] : [])],
      { env, encoding: 'utf8' },
    );
    const seconds = (performance.now() - started) / 1000;
    if (run.status !== 0) throw new Error(`rclone copy failed (${run.status}): ${run.stderr}`);
    return seconds;
  });
}

/** CPU seconds (user + system) a process has used so far. */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8')
    .replace(/^.*\) /s, '')
    .split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** The daemon's copy and verification of the ingested bag: seconds, CPU seconds, and the highest VmRSS seen meanwhile. */
function preservd(
  files: Record<string, Buffer>,
): Promise<{ seconds: number; cpu: number; rssMB: number; rssAtDoneMB: number }> {
  return withCeph(async (ceph) => {
    const scope = new Scope();
    try {
      const replica = {
        name: 'ceph',
        kind: 's3',
        endpoint: endpointOf(ceph),
        bucket: 'bench',
        region: ceph.region,
        prefix: '',
        forcePathStyle: true,
        accessKeyId: ceph.accessKeyId,
        secretAccessKey: ceph.secretAccessKey,
      };
      const d = await TestDaemon.start(scope, {
        config: { replicas: [replica], logLevel: 'warn' },
        env: { NODE_EXTRA_CA_CERTS: ceph.caFile },
      });
      let rssKB = 0;
      let sampling = false;
      const sampler = setInterval(() => {
        if (!sampling) return;
        const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${d.proc.pid}/status`, 'utf8'));
        rssKB = Math.max(rssKB, Number(m?.[1] ?? 0));
      }, 100);
      scope.teardown(() => clearInterval(sampler));
      const { request } = await ingestBag(d, d.adminToken, files, { contentType: 'audio' });
      const rssAtDone = Number(
        /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${d.proc.pid}/status`, 'utf8'))?.[1] ?? 0,
      );
      sampling = true;
      const cpuAtDone = cpuSeconds(d.proc.pid!);
      for (;;) {
        const pkg = await d.request('GET', `/v1/packages/${request.bag_id}`);
        const copy = (pkg.json.replicas as Array<{ status: string; verified_at: string | null }>)[0]!;
        if (copy.status === 'verified') {
          sampling = false;
          const cpu = cpuSeconds(d.proc.pid!) - cpuAtDone;
          const item = await d.request('GET', `/v1/queue?package=${request.bag_id}`);
          const done = Date.parse((item.json as Array<{ updated_at: string }>)[0]!.updated_at);
          if (/unavailable|failed/.test(d.output))
            console.error(`the daemon said:\n${d.output.slice(-3000)}`);
          return {
            seconds: (Date.parse(copy.verified_at!) - done) / 1000,
            cpu,
            rssMB: (rssKB * 1024) / 1e6,
            rssAtDoneMB: (rssAtDone * 1024) / 1e6,
          };
        }
        if (copy.status === 'failed') throw new Error(`the copy failed: ${JSON.stringify(copy)}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    } finally {
      await scope.end();
    }
  });
}

async function main(): Promise<void> {
  const o = parseArgs(process.argv.slice(2));
  useHttps = o.https;
  const files = payload();
  // The same bytes as a folder for the raw PUT and rclone (ingestBag writes its own copy).
  const scratch = mkdtempSync(join(tmpdir(), 'preservd-bench-replicate-'));
  try {
    const dir = join(scratch, 'bag');
    await makeBag(dir, {
      files,
      chipmunkInfo: {
        externalId: 'bench',
        bagId: '00000000-0000-4000-8000-000000000000',
        contentType: 'audio',
      },
    });
    const paths = filesUnder(dir, { regularOnly: true });
    const bytes = paths.reduce((n, p) => n + statSync(join(dir, p)).size, 0);
    const rounds: Array<{ raw: number; rclone: number; preservd: number; cpu: number; rssMB: number }> = [];
    for (let r = 0; r < o.rounds; r++) {
      const raw = await rawPut(dir, paths);
      const rc = await rclone(dir);
      const ours = await preservd(files);
      rounds.push({ raw, rclone: rc, preservd: ours.seconds, cpu: ours.cpu, rssMB: ours.rssMB });
      if (!o.json)
        console.log(
          `round ${r + 1}: raw PUT ${raw.toFixed(2)} s, rclone copy ${rc.toFixed(2)} s, preservd copy + read-back ${ours.seconds.toFixed(2)} s, ${ours.cpu.toFixed(2)} CPU-s, RSS ≤ ${ours.rssMB.toFixed(0)} MB (${ours.rssAtDoneMB.toFixed(0)} MB when the ingest was done)`,
        );
    }
    const toRclone = rounds.map((r) => r.preservd / r.rclone);
    const toRaw = rounds.map((r) => r.preservd / r.raw);
    const rss = Math.max(...rounds.map((r) => r.rssMB));
    const result = {
      bag: { files: paths.length, bytes },
      scheme: o.https ? 'https' : 'http',
      load: loadavg()[0] ?? 0,
      seconds: {
        raw: median(rounds.map((r) => r.raw)),
        rclone: median(rounds.map((r) => r.rclone)),
        preservd: median(rounds.map((r) => r.preservd)),
      },
      daemonCpuSeconds: median(rounds.map((r) => r.cpu)),
      ratios: {
        toRclone: median(toRclone),
        toRcloneRange: range(toRclone, 2),
        toRaw: median(toRaw),
        toRawRange: range(toRaw, 2),
      },
      peakRssMB: rss,
      targets: TARGETS,
      pass: median(toRclone) <= TARGETS.toRclone && rss < TARGETS.rssMB,
    };
    if (o.json) console.log(JSON.stringify(result));
    else {
      const mb = bytes / 1e6;
      console.log(`bag: ${paths.length} files, ${mb.toFixed(0)} MB; load ${result.load.toFixed(1)}`);
      console.log(
        `raw PUT: ${result.seconds.raw.toFixed(2)} s (${(mb / result.seconds.raw).toFixed(0)} MB/s)`,
      );
      console.log(
        `rclone copy: ${result.seconds.rclone.toFixed(2)} s (${(mb / result.seconds.rclone).toFixed(0)} MB/s)`,
      );
      console.log(
        `preservd copy + read-back: ${result.seconds.preservd.toFixed(2)} s (${(mb / result.seconds.preservd).toFixed(0)} MB/s)`,
      );
      console.log(`daemon CPU in the copy window: ${result.daemonCpuSeconds.toFixed(2)} s (median)`);
      console.log(`preservd / rclone: ${result.ratios.toRcloneRange} (target ≤ ${TARGETS.toRclone})`);
      console.log(`preservd / raw PUT: ${result.ratios.toRawRange}`);
      console.log(`daemon RSS during replication: ≤ ${rss.toFixed(0)} MB (target < ${TARGETS.rssMB})`);
    }
    if (!result.pass) process.exitCode = 1;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

await main();
