/**
 * Server-side render time of the package page for a package of 2,000 files (target < 50 ms),
 * `node dist/bench/pages.js [--json]`. The real application (buildServer, through `offlineServer`) on a
 * catalog holding one stored package of 2,000 payload files (md5 and sha256 each) and a few
 * events; an admin's session cookie; fastify's inject, so the time is the server's own (routing,
 * authentication, catalog reads, the template) with no socket or browser. After warm-up, ROUNDS
 * requests one after another; the median and the slowest are reported, beside the same
 * package's JSON (`GET /v1/packages/{bag_id}` with its 2,000 file names) for scale.
 *
 * Two clocks: the wall clock, and the CPU time this process spent per request (user + system,
 * garbage collection included). On a machine shared with other work the wall clock also counts
 * the time spent waiting for a core; the CPU time is the render's own cost, and the target is
 * judged on it. The load average is printed beside.
 */
import { createHash, randomUUID } from 'node:crypto';
import { availableParallelism, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import type { FileRecord } from '../src/catalog/types.js';
import { offlineServer } from '../src/http/offline.js';
import { median } from './stats.js';

const FILES = 2000;
const ROUNDS = Number(process.env.ROUNDS ?? 40);
const WARMUP = 5;
const TARGET_MS = 50;

const hex = (s: string, alg: 'md5' | 'sha256') => createHash(alg).update(s).digest('hex');

const server = await offlineServer();
try {
  const { catalog, app } = server;
  catalog.users.add('admin', true);
  const { secret: token } = catalog.users.issueToken('admin');
  const { secret: session } = catalog.sessions.open('admin', token, 3600_000);
  const bagId = randomUUID();
  catalog.packages.create({
    bagId,
    externalId: 'bench-2000-files',
    contentType: 'audio',
    user: 'admin',
    capability: randomUUID().replaceAll('-', ''),
  });
  const files: FileRecord[] = [];
  for (let i = 0; i < FILES; i++) {
    const path = `data/reel-${String(Math.floor(i / 100)).padStart(2, '0')}/track-${String(i).padStart(4, '0')}.wav`;
    files.push({
      path,
      size: 1_000_000 + i * 937,
      crc32: '00000000',
      digests: { md5: hex(path, 'md5'), sha256: hex(path, 'sha256') },
    });
  }
  for (const tag of [
    'bagit.txt',
    'bag-info.txt',
    'manifest-md5.txt',
    'manifest-sha256.txt',
    'chipmunk-info.txt',
  ])
    files.push({
      path: tag,
      size: 100,
      crc32: '00000000',
      digests: { md5: hex(tag, 'md5'), sha256: hex(tag, 'sha256') },
    });
  catalog.files.put(bagId, files);
  catalog.packages.markStored(
    bagId,
    `${bagId.slice(0, 2)}/${bagId.slice(2, 4)}/${bagId.slice(4, 6)}/${bagId}`,
  );
  for (const type of ['transfer', 'validation', 'ingestion'] as const)
    catalog.events.add({ bagId, type, executor: 'admin', outcome: 'success', detail: `${type} done` });

  interface Timing {
    wall: number[];
    cpu: number[];
    bytes: number;
  }
  const time = async (url: string, headers: Record<string, string>): Promise<Timing> => {
    const r: Timing = { wall: [], cpu: [], bytes: 0 };
    for (let i = 0; i < WARMUP + ROUNDS; i++) {
      const start = performance.now();
      const cpu = process.cpuUsage();
      const res = await app.inject({ method: 'GET', url, headers });
      const used = process.cpuUsage(cpu);
      const elapsed = performance.now() - start;
      if (res.statusCode !== 200) throw new Error(`${url}: ${res.statusCode} ${res.body.slice(0, 200)}`);
      r.bytes = res.rawPayload.length;
      if (i < WARMUP) continue;
      r.wall.push(elapsed);
      r.cpu.push((used.user + used.system) / 1000);
    }
    return r;
  };

  const page = await time(`/packages/${bagId}`, { cookie: `preservd_session=${session}` });
  const json = await time(`/v1/packages/${bagId}`, { authorization: `Bearer ${token}` });
  const verdict = median(page.cpu) < TARGET_MS ? 'met' : 'MISSED';
  if (verdict !== 'met') process.exitCode = 1;
  if (process.argv.includes('--json')) {
    const summary = (r: Timing) => ({
      cpuMedianMs: median(r.cpu),
      cpuSlowestMs: Math.max(...r.cpu),
      wallMedianMs: median(r.wall),
      wallSlowestMs: Math.max(...r.wall),
      bytes: r.bytes,
    });
    console.log(
      JSON.stringify({
        files: FILES,
        rounds: ROUNDS,
        loadavg: loadavg(),
        page: summary(page),
        json: summary(json),
        targetMs: TARGET_MS,
        verdict,
      }),
    );
  } else {
    const ms = (xs: number[]) =>
      `median ${median(xs).toFixed(1)} ms, slowest ${Math.max(...xs).toFixed(1)} ms`;
    const line = (name: string, r: Timing) =>
      `${name} (${ROUNDS} requests, ${(r.bytes / 1e6).toFixed(2)} MB): CPU ${ms(r.cpu)}; wall ${ms(r.wall)}`;
    console.log(
      `load average ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')} on ${availableParallelism()} cores`,
    );
    console.log(line(`package page, ${FILES} files`, page));
    console.log(line('the same package as JSON', json));
    console.log(`target: median CPU time per page < ${TARGET_MS} ms: ${verdict}`);
  }
} finally {
  await server.close();
}
