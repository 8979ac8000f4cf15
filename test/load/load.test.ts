/**
 * Load: 50 clients keep one real daemon busy for a bounded time, each looping over what a
 * depositor does: create a request, rsync a small bag to its upload link, complete, poll the
 * queue item, fetch the package, one file and the zip, list packages, queue and events, and try
 * another user's package. Three regular users and the admin share the clients.
 *
 * Every response is recorded and checked against what that step must answer (status, body,
 * ownership, bytes). At the end every package is DONE, an audit passes with no failure, the
 * counts agree, and, the daemon stopped, the data directory's invariants hold. Latencies (p50,
 * p99 per step) and throughput go out as test comments.
 *
 * New rounds start for 20 s by default (the rounds under way then finish: ~25 s of load, the
 * file well under a minute); `PRESERVD_LONG_TESTS=1` makes it 5 minutes. `PRESERVD_LOAD_SECONDS`
 * and `PRESERVD_LOAD_CLIENTS` set the duration and the number of clients exactly.
 */
import { execFile } from 'node:child_process';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import t from 'tap';
import { rsyncUploadAsync, TestDaemon } from '../helpers/daemon.js';
import { assertInvariants } from '../helpers/invariants.js';
import { makeBag } from '../helpers/make-bag.js';

const run = promisify(execFile);
const LONG = process.env.PRESERVD_LONG_TESTS === '1';
const LOAD_SECONDS = Number(process.env.PRESERVD_LOAD_SECONDS ?? (LONG ? 300 : 20));
const CLIENTS = Number(process.env.PRESERVD_LOAD_CLIENTS ?? 50);
/** Every this many stored packages, the zip also goes through Python's zipfile. */
const PYTHON_ZIP_EVERY = 10;
const POLL_MS = 200;
/** Longest wait for one queue item, one audit. */
const ITEM_TIMEOUT_MS = 120_000;
const AUDIT_TIMEOUT_MS = 180_000;

if (LOAD_SECONDS > 40) t.setTimeout((LOAD_SECONDS + 600) * 1000);

const scratch = mkdtempSync(join(tmpdir(), 'preservd-load-'));
t.teardown(() => rmSync(scratch, { recursive: true, force: true }));

interface User {
  name: string;
  token: string;
  admin: boolean;
}

interface Response {
  status: number;
  headers: Headers;
  bytes: Buffer;
  json: any;
}

/** What the clients saw, shared: every check that fails adds one line to `problems`. */
class Observations {
  readonly latencies = new Map<string, number[]>();
  readonly problems: string[] = [];
  /** bag_id → owner, for every request a client created. */
  readonly owners = new Map<string, string>();
  /** Listed bag_ids not yet in `owners` when seen (created by a client still awaiting its 201). */
  readonly unresolved: Array<{ viewer: string; bagId: string; list: string }> = [];
  readonly created = new Map<string, number>();
  readonly stored = new Set<string>();
  readonly uploaded = new Map<string, Record<string, Buffer>>();
  requests = 0;
  zips = 0;
  pythonZips = 0;

  /** Every sample with when it ended, to compare the start of the load with its end. */
  readonly timeline: Array<{ at: number; step: string; ms: number }> = [];

  time(step: string, ms: number): void {
    let list = this.latencies.get(step);
    if (list === undefined) this.latencies.set(step, (list = []));
    list.push(ms);
    this.timeline.push({ at: performance.now(), step, ms });
  }

  problem(client: number, step: string, message: string): void {
    this.problems.push(`client ${client} ${step}: ${message}`);
  }

  /** A listed bag is the viewer's own (checked now if its owner is known, else at the end). */
  seen(viewer: User, bagId: string, list: string, client: number): void {
    if (viewer.admin) return;
    const owner = this.owners.get(bagId);
    if (owner === undefined) this.unresolved.push({ viewer: viewer.name, bagId, list });
    else if (owner !== viewer.name)
      this.problem(client, list, `${viewer.name} was shown ${owner}'s package ${bagId}`);
  }
}

function quantile(sorted: number[], q: number): number {
  return sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)] ?? NaN;
}

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

t.test(`load: ${CLIENTS} clients for ${LOAD_SECONDS} s`, async (t) => {
  const d = await TestDaemon.start(t, {
    config: {
      logLevel: 'warn',
      // Short quiet interval, enough ingest lanes that the wait for quiet does not serialise the
      // uploads, and an rsync connection for every client.
      upload: { quietMs: 200, rsync: { maxConnections: CLIENTS + 10 } },
      ingest: { concurrency: 8 },
    },
  });
  const users: User[] = [
    { name: 'admin', token: d.adminToken, admin: true },
    ...['ada', 'ben', 'cy'].map((name) => ({ name, token: d.addUser(name), admin: false })),
  ];
  const rec = new Observations();

  async function send(
    user: User,
    method: string,
    path: string,
    json?: unknown,
  ): Promise<{ res: Response; ms: number }> {
    const headers: Record<string, string> = { authorization: `Bearer ${user.token}` };
    if (json !== undefined) headers['content-type'] = 'application/json';
    const started = performance.now();
    const res = await fetch(`${d.url}${path}`, {
      method,
      headers,
      body: json === undefined ? null : JSON.stringify(json),
      redirect: 'manual',
    });
    const bytes = Buffer.from(await res.arrayBuffer());
    const ms = performance.now() - started;
    rec.requests++;
    let parsed: unknown;
    if ((res.headers.get('content-type') ?? '').startsWith('application/json')) {
      try {
        parsed = JSON.parse(bytes.toString('utf8'));
      } catch {
        parsed = undefined;
      }
    }
    return { res: { status: res.status, headers: res.headers, bytes, json: parsed }, ms };
  }

  /** One HTTP step: timed, its status checked; undefined (and a problem) when unexpected. */
  async function step(
    client: number,
    user: User,
    name: string,
    method: string,
    path: string,
    expect: number,
    json?: unknown,
  ): Promise<Response | undefined> {
    const { res, ms } = await send(user, method, path, json);
    rec.time(name, ms);
    if (res.status !== expect) {
      rec.problem(
        client,
        name,
        `${method} ${path} answered ${res.status}, expected ${expect}: ${res.bytes.toString('utf8').slice(0, 300)}`,
      );
      return undefined;
    }
    const isJson = (res.headers.get('content-type') ?? '').startsWith('application/json');
    if (isJson && res.json === undefined && res.bytes.length > 0) {
      rec.problem(client, name, `${method} ${path}: the JSON body does not parse`);
      return undefined;
    }
    return res;
  }

  /** Python's zipfile reads the zip: testzip passes, names and payload digests are the bag's. */
  async function checkZipWithPython(
    client: number,
    bagId: string,
    zip: Buffer,
    files: Record<string, Buffer>,
  ): Promise<void> {
    const path = join(scratch, `${bagId}.zip`);
    await writeFile(path, zip);
    const script = `
import hashlib, json, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    print(json.dumps({"testzip": z.testzip(), "entries": {i.filename: hashlib.sha256(z.read(i)).hexdigest() for i in z.infolist()}}))
`;
    try {
      const { stdout } = await run('python3', ['-c', script, path], { maxBuffer: 16 << 20 });
      const report = JSON.parse(stdout) as { testzip: string | null; entries: Record<string, string> };
      rec.pythonZips++;
      if (report.testzip !== null)
        rec.problem(client, 'zip', `${bagId}: zipfile.testzip() found ${report.testzip} damaged`);
      const names = Object.keys(report.entries);
      if (!names.every((n) => n.startsWith(`${bagId}/`)))
        rec.problem(client, 'zip', `${bagId}: entries outside the top folder: ${names.join(', ')}`);
      for (const tag of ['bagit.txt', 'bag-info.txt', 'chipmunk-info.txt', 'manifest-sha256.txt'])
        if (!names.includes(`${bagId}/${tag}`)) rec.problem(client, 'zip', `${bagId}: no ${tag} in the zip`);
      for (const [rel, bytes] of Object.entries(files)) {
        const digest = report.entries[`${bagId}/data/${rel}`];
        if (digest !== sha256(bytes))
          rec.problem(
            client,
            'zip',
            `${bagId}: data/${rel} in the zip is ${digest ?? 'missing'}, uploaded ${sha256(bytes)}`,
          );
      }
    } catch (err) {
      rec.problem(
        client,
        'zip',
        `${bagId}: Python's zipfile could not read the zip: ${(err as Error).message}`,
      );
    } finally {
      await rm(path, { force: true });
    }
  }

  /** One depositor's round, start to finish; returns early (a problem recorded) on any surprise. */
  async function round(client: number, user: User, n: number): Promise<void> {
    const bagId = randomUUID();
    const externalId = `load-${client}-${n}-${bagId.slice(0, 8)}`;
    const created = await step(client, user, 'create', 'POST', '/v1/requests', 201, {
      bag_id: bagId,
      external_id: externalId,
      content_type: 'digital',
    });
    if (created === undefined) return;
    rec.owners.set(bagId, user.name);
    rec.created.set(user.name, (rec.created.get(user.name) ?? 0) + 1);
    const req = created.json;
    if (
      req?.bag_id !== bagId ||
      req.user !== user.name ||
      req.stored !== false ||
      typeof req.upload_link !== 'string' ||
      created.headers.get('location') !== `/v1/requests/${bagId}`
    )
      return rec.problem(
        client,
        'create',
        `unexpected request ${created.bytes.toString('utf8')} (Location ${created.headers.get('location')})`,
      );

    const files: Record<string, Buffer> = {
      'a.txt': Buffer.from(`client ${client} round ${n} of ${user.name}\n`),
      'sub/dir/b.bin': randomBytes(1024 + Math.floor(Math.random() * 48 * 1024)),
      'empty.dat': Buffer.alloc(0),
    };
    const bagDir = join(scratch, `bag-${bagId}`);
    await makeBag(bagDir, { files, chipmunkInfo: { externalId, bagId, contentType: 'digital' } });
    const upStarted = performance.now();
    const up = await rsyncUploadAsync(bagDir, req.upload_link);
    rec.time('rsync', performance.now() - upStarted);
    await rm(bagDir, { recursive: true, force: true });
    if (up.code !== 0) return rec.problem(client, 'rsync', `exit ${up.code}: ${up.output.slice(-300)}`);
    rec.uploaded.set(bagId, files);

    const complete = await step(client, user, 'complete', 'POST', `/v1/requests/${bagId}/complete`, 201);
    if (complete === undefined) return;
    const itemId = complete.json?.id;
    if (
      !Number.isInteger(itemId) ||
      complete.json.status !== 'PENDING' ||
      complete.headers.get('location') !== `/v1/queue/${itemId}`
    )
      return rec.problem(client, 'complete', `unexpected queue item ${complete.bytes.toString('utf8')}`);

    const completedAt = performance.now();
    let item: any;
    for (;;) {
      const poll = await step(client, user, 'poll', 'GET', `/v1/queue/${itemId}`, 200);
      if (poll === undefined) return;
      item = poll.json;
      if (item?.id !== itemId || item.request !== `/v1/requests/${bagId}`)
        return rec.problem(
          client,
          'poll',
          `queue item ${itemId} came back as ${poll.bytes.toString('utf8')}`,
        );
      if (item.status !== 'PENDING') break;
      if (performance.now() - completedAt > ITEM_TIMEOUT_MS)
        return rec.problem(client, 'poll', `queue item ${itemId} still PENDING after ${ITEM_TIMEOUT_MS} ms`);
      await sleep(POLL_MS);
    }
    rec.time('complete→DONE', performance.now() - completedAt);
    if (item.status !== 'DONE' || item.package !== `/v1/packages/${bagId}`)
      return rec.problem(client, 'poll', `${bagId} ended ${JSON.stringify(item)}`);
    rec.stored.add(bagId);

    const pkg = await step(client, user, 'package', 'GET', `/v1/packages/${bagId}`, 200);
    if (pkg === undefined) return;
    const names = Object.keys(files).sort();
    if (
      pkg.json?.stored !== true ||
      JSON.stringify(pkg.json.files) !== JSON.stringify(names) ||
      pkg.json.user !== user.name ||
      'storage_location' in pkg.json !== user.admin
    )
      rec.problem(client, 'package', `unexpected package ${pkg.bytes.toString('utf8').slice(0, 300)}`);

    const rel = Math.random() < 0.5 ? 'a.txt' : 'sub/dir/b.bin';
    const file = await step(client, user, 'file', 'GET', `/v1/packages/${bagId}/${rel}`, 200);
    if (file !== undefined && !file.bytes.equals(files[rel]!))
      rec.problem(
        client,
        'file',
        `${bagId}/${rel}: ${file.bytes.length} bytes differ from the ${files[rel]!.length} uploaded`,
      );

    const zip = await step(client, user, 'zip', 'GET', `/v1/packages/${bagId}/download`, 200);
    if (zip !== undefined) {
      if (
        zip.headers.get('content-type') !== 'application/zip' ||
        zip.headers.get('content-length') !== String(zip.bytes.length)
      )
        rec.problem(
          client,
          'zip',
          `${bagId}: Content-Type ${zip.headers.get('content-type')}, Content-Length ${zip.headers.get('content-length')} for ${zip.bytes.length} bytes`,
        );
      // Stored, not deflated: every uploaded file's bytes are in the zip as they are.
      for (const [rel, bytes] of Object.entries(files))
        if (bytes.length > 0 && !zip.bytes.includes(bytes))
          rec.problem(client, 'zip', `${bagId}: data/${rel} is not in the zip as uploaded`);
      if (rec.zips++ % PYTHON_ZIP_EVERY === 0) await checkZipWithPython(client, bagId, zip.bytes, files);
    }

    const events = await step(client, user, 'package events', 'GET', `/v1/packages/${bagId}/events`, 200);
    if (events !== undefined) {
      const kinds = (events.json as any[]).map((e) => `${e.type}:${e.outcome}`);
      if (
        !kinds.includes('validation:success') ||
        !kinds.includes('ingestion:success') ||
        kinds.some((k) => k.endsWith(':failure'))
      )
        rec.problem(client, 'package events', `${bagId}: ${kinds.join(', ')}`);
    }

    const packages = await step(client, user, 'list packages', 'GET', '/v1/packages', 200);
    if (packages !== undefined) {
      const list = packages.json as any[];
      if (!list.some((p) => p.bag_id === bagId))
        rec.problem(client, 'list packages', `${bagId} is not listed`);
      for (const p of list) {
        if (!user.admin && p.user !== user.name)
          rec.problem(client, 'list packages', `${user.name} was shown ${p.user}'s package ${p.bag_id}`);
        rec.seen(user, p.bag_id, 'list packages', client);
      }
    }
    const queue = await step(client, user, 'list queue', 'GET', '/v1/queue', 200);
    if (queue !== undefined) {
      const list = queue.json as any[];
      if (!list.some((i) => i.id === itemId && i.status === 'DONE'))
        rec.problem(client, 'list queue', `item ${itemId} is not listed as DONE`);
      for (const i of list) rec.seen(user, String(i.request).split('/').pop()!, 'list queue', client);
    }
    const all = await step(client, user, 'list events', 'GET', '/v1/events', 200);
    if (all !== undefined && !user.admin) {
      // Before the audit, every event of a package is by its owner: no one else's may show.
      const foreign = (all.json as any[]).filter((e) => e.executor !== user.name);
      if (foreign.length > 0)
        rec.problem(
          client,
          'list events',
          `${user.name} was shown ${foreign.length} events of ${[...new Set(foreign.map((e) => e.executor))].join(', ')}`,
        );
    }

    if (!user.admin) {
      const others = [...rec.stored].slice(-50).filter((id) => rec.owners.get(id) !== user.name);
      const other = others[Math.floor(Math.random() * others.length)];
      if (other !== undefined)
        await step(client, user, 'foreign package', 'GET', `/v1/packages/${other}`, 403);
    }
  }

  const loadStarted = performance.now();
  const loadEnds = Date.now() + LOAD_SECONDS * 1000;
  const rounds = new Map<number, number>();
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, client) => {
      const user = users[client % users.length]!;
      await sleep(Math.random() * 1000); // spread the start
      for (let n = 0; Date.now() < loadEnds; n++) {
        const started = performance.now();
        await round(client, user, n).catch((err: Error) =>
          rec.problem(client, 'round', err.stack ?? err.message),
        );
        rec.time('round', performance.now() - started);
        rounds.set(client, n + 1);
      }
    }),
  );
  const loadSeconds = (performance.now() - loadStarted) / 1000;
  const totalRounds = [...rounds.values()].reduce((a, b) => a + b, 0);

  for (const u of rec.unresolved) {
    const owner = rec.owners.get(u.bagId);
    if (owner !== u.viewer)
      rec.problems.push(`${u.list}: ${u.viewer} was shown ${owner ?? 'nobody'}'s package ${u.bagId}`);
  }
  t.same(
    rec.problems.slice(0, 20),
    [],
    `every response as expected (${rec.problems.length} problems in ${rec.requests} requests)`,
  );
  t.equal(rec.stored.size, totalRounds, 'every round stored its package');
  t.equal(rec.uploaded.size, rec.stored.size, 'every upload was stored');
  t.ok(rec.stored.size >= CLIENTS, `at least one package per client (${rec.stored.size})`);
  t.ok(rec.pythonZips > 0, `${rec.pythonZips} zips read by Python's zipfile`);

  await t.test('counts agree and every package is DONE', async (t) => {
    const admin = users[0]!;
    const packages = (await send(admin, 'GET', '/v1/packages')).res.json as any[];
    const createdTotal = [...rec.created.values()].reduce((a, b) => a + b, 0);
    t.equal(packages.length, createdTotal, 'the admin lists every request created');
    t.equal(
      packages.filter((p) => p.stored).length,
      rec.stored.size,
      'stored ones are the packages that came back DONE',
    );
    for (const u of users.slice(1)) {
      const own = (await send(u, 'GET', '/v1/packages')).res.json as any[];
      t.equal(
        own.length,
        rec.created.get(u.name) ?? 0,
        `${u.name} lists exactly their ${rec.created.get(u.name) ?? 0} requests`,
      );
    }
    const queue = (await send(admin, 'GET', '/v1/queue')).res.json as any[];
    t.equal(queue.length, rec.stored.size, 'one queue item per completion');
    t.same(
      queue.filter((i) => i.status !== 'DONE'),
      [],
      'every queue item is DONE',
    );
  });

  let auditId: number | undefined;
  await t.test('an audit of every package passes', async (t) => {
    const admin = users[0]!;
    const started = performance.now();
    const post = await send(admin, 'POST', '/v1/audits');
    t.equal(post.res.status, 201, 'POST /v1/audits answers 201');
    auditId = post.res.json.id;
    let audit: any;
    for (;;) {
      audit = (await send(admin, 'GET', `/v1/audits/${auditId}`)).res.json;
      if (audit.finished_at !== null) break;
      if (performance.now() - started > AUDIT_TIMEOUT_MS) break;
      await sleep(250);
    }
    const seconds = (performance.now() - started) / 1000;
    t.not(audit.finished_at, null, `finished in ${seconds.toFixed(1)} s`);
    t.equal(audit.packages, rec.stored.size, 'every stored package audited');
    t.equal(audit.successes.length, rec.stored.size, 'every one a success');
    t.same(audit.failures, [], 'no failures');
    t.comment(`audit: ${audit.packages} packages in ${seconds.toFixed(1)} s`);
  });

  await t.test('each package has exactly its transfer, validation, ingestion and fixity check', async (t) => {
    const admin = users[0]!;
    const wrong: string[] = [];
    const ids = [...rec.stored];
    for (let i = 0; i < ids.length; i += 8) {
      await Promise.all(
        ids.slice(i, i + 8).map(async (bagId) => {
          const events = (await send(admin, 'GET', `/v1/packages/${bagId}/events`)).res.json as any[];
          const kinds = events.map((e) => `${e.type}:${e.outcome}`).sort();
          if (
            JSON.stringify(kinds) !==
            JSON.stringify([
              'fixity check:success',
              'ingestion:success',
              'transfer:success',
              'validation:success',
            ])
          )
            wrong.push(`${bagId}: ${kinds.join(', ')}`);
        }),
      );
    }
    t.same(wrong.slice(0, 20), [], `${ids.length} packages, ${wrong.length} with other events`);
  });

  await t.test("the daemon's own metrics: no 5xx, ingest time", async (t) => {
    const res = await fetch(`${d.url}/metrics`);
    t.equal(res.status, 200);
    const text = await res.text();
    /** Sum of a metric's samples over all label sets whose labels match `labels`. */
    const total = (name: string, labels = /.*/) =>
      text
        .split('\n')
        .filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `))
        .filter((l) => labels.test(l))
        .reduce((sum, l) => sum + Number(l.split(' ').at(-1)), 0);
    t.equal(total('preservd_http_requests_total', /status="5\d\d"/), 0, 'no 5xx response');
    t.equal(total('preservd_ingest_duration_seconds_count', /outcome="FAILED"/), 0, 'no FAILED ingest');
    const ingests = total('preservd_ingest_duration_seconds_count', /outcome="DONE"/);
    t.equal(ingests, rec.stored.size, 'one DONE ingest per stored package');
    const httpMean =
      (1000 * total('preservd_http_request_duration_seconds_sum')) /
      total('preservd_http_request_duration_seconds_count');
    const ingestMean = total('preservd_ingest_duration_seconds_sum', /outcome="DONE"/) / ingests;
    const cpu = total('preservd_process_cpu_seconds_total');
    t.comment(
      `server side: HTTP response time mean ${httpMean.toFixed(1)} ms; ingest (picked up → DONE, quiet wait included) mean ${ingestMean.toFixed(2)} s; ` +
        `daemon CPU ${cpu.toFixed(1)} s (${((1000 * cpu) / rec.stored.size).toFixed(0)} ms per stored package, its round's HTTP requests included)`,
    );
  });

  // The load in five slices of time: does the daemon slow down as the catalog grows?
  const notHttp = new Set(['rsync', 'round', 'complete→DONE']);
  const slices = Array.from({ length: 5 }, (_, i) => {
    const from = loadStarted + (i * loadSeconds * 1000) / 5;
    const to = loadStarted + ((i + 1) * loadSeconds * 1000) / 5;
    const samples = rec.timeline.filter((x) => x.at >= from && x.at < to);
    const http = samples
      .filter((x) => !notHttp.has(x.step))
      .map((x) => x.ms)
      .sort((a, b) => a - b);
    const done = samples
      .filter((x) => x.step === 'complete→DONE')
      .map((x) => x.ms)
      .sort((a, b) => a - b);
    return `slice ${i + 1}/5: ${done.length} stored (${(done.length / (loadSeconds / 5)).toFixed(2)}/s); HTTP p50 ${quantile(http, 0.5).toFixed(0)} ms p99 ${quantile(http, 0.99).toFixed(0)} ms; complete→DONE p50 ${quantile(done, 0.5).toFixed(0)} ms p99 ${quantile(done, 0.99).toFixed(0)} ms`;
  });

  const line = (name: string) => {
    const sorted = [...(rec.latencies.get(name) ?? [])].sort((a, b) => a - b);
    return `${name.padEnd(16)} n=${String(sorted.length).padStart(6)}  p50 ${quantile(sorted, 0.5).toFixed(1).padStart(8)} ms  p99 ${quantile(sorted, 0.99).toFixed(1).padStart(8)} ms  max ${(sorted.at(-1) ?? NaN).toFixed(1).padStart(8)} ms`;
  };
  const http = [...rec.latencies]
    .filter(([k]) => !['rsync', 'round', 'complete→DONE'].includes(k))
    .flatMap(([, v]) => v);
  rec.latencies.set('all HTTP', http);
  t.comment(
    [
      `${CLIENTS} clients, ${loadSeconds.toFixed(1)} s: ${rec.stored.size} packages stored (${(rec.stored.size / loadSeconds).toFixed(2)}/s), ${rec.requests} HTTP requests (${(rec.requests / loadSeconds).toFixed(1)}/s), ${rec.pythonZips} zips checked by Python`,
      ...slices,
      ...[
        'all HTTP',
        'create',
        'complete',
        'poll',
        'package',
        'file',
        'zip',
        'package events',
        'list packages',
        'list queue',
        'list events',
        'foreign package',
        'rsync',
        'complete→DONE',
        'round',
      ].map(line),
    ].join('\n'),
  );

  const errors = d.output.split('\n').filter((line) => /"level":(50|60)/.test(line));
  t.same(errors.slice(0, 5), [], `the daemon logged no error (${errors.length})`);
  t.equal(await d.stop(), 0, 'the daemon stops cleanly');
  await assertInvariants(t, d.dataDir);
});
