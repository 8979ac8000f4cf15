/**
 * /metrics against the real daemon: who may read it (loopback without a token by default; in
 * `admin` mode admins only), and what it says after an ingest, a failed ingest, downloads and an
 * audit: requests by route template and status (no bag ids in labels), queue depth, ingest
 * durations, bytes hashed, audit progress, failures by problem code, rsync restarts and the
 * catalog's size.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import t, { type Test } from 'tap';
import { offlineServer } from '../../src/http/offline.js';
import { TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The Prometheus text format, as much of it as these checks need. */
function parseMetrics(text: string): { samples: Sample[]; types: Map<string, string> } {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type !== null) types.set(type[1]!, type[2]!);
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (m === null) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[l[1]!] = l[2]!;
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return { samples, types };
}

function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  const found = samples.filter(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
  return found.length === 0 ? undefined : found.reduce((sum, s) => sum + s.value, 0);
}

t.test('/metrics', async (t) => {
  const d = await TestDaemon.start(t);

  await t.test('default (loopback): loopback clients without a token', async (t) => {
    const res = await d.request('GET', '/metrics', { token: null });
    t.equal(res.status, 200);
    t.match(res.headers.get('content-type'), /^text\/plain/);
    t.match(res.text, /^# HELP preservd_/m);
    const withToken = await d.request('GET', '/metrics');
    t.equal(withToken.status, 200, 'a token does no harm');

    // Other addresses cannot be reached from here: fastify's inject sets the peer address.
    const offline = await offlineServer();
    t.teardown(() => offline.close());
    for (const remoteAddress of ['127.0.0.1', '127.8.9.10', '::1', '::ffff:127.0.0.1']) {
      const r = await offline.app.inject({ method: 'GET', url: '/metrics', remoteAddress });
      t.equal(r.statusCode, 200, `${remoteAddress} may read`);
    }
    for (const remoteAddress of ['192.0.2.7', '::ffff:192.0.2.7', '2001:db8::1', '10.127.0.1']) {
      const r = await offline.app.inject({
        method: 'GET',
        url: '/metrics',
        remoteAddress,
        headers: { 'x-forwarded-for': '127.0.0.1' },
      });
      t.equal(r.statusCode, 403, `${remoteAddress} may not (X-Forwarded-For is not trusted)`);
      t.type(r.json().error, 'string');
    }
  });

  await t.test('admin mode: admins only, from any address', async (t) => {
    // The real server and catalog in-process (a second daemon would double this file's time).
    const offline = await offlineServer({ metrics: { access: 'admin' } });
    t.teardown(() => offline.close());
    offline.catalog.users.add('root', true);
    offline.catalog.users.add('ursula', false);
    const admin = offline.catalog.users.issueToken('root').secret;
    const user = offline.catalog.users.issueToken('ursula').secret;
    const get = (authorization?: string) =>
      offline.app.inject({
        method: 'GET',
        url: '/metrics',
        remoteAddress: '192.0.2.7',
        headers: authorization === undefined ? {} : { authorization },
      });
    const none = await get();
    t.equal(none.statusCode, 401);
    t.equal(none.headers['www-authenticate'], 'Bearer realm="preservd"');
    t.equal((await get(`Bearer ${user}`)).statusCode, 403);
    const ok = await get(`Token token=${admin}`);
    t.equal(ok.statusCode, 200);
    t.match(ok.body, /preservd_http_requests_total/);
  });

  await t.test('off: no route', async (t) => {
    const offline = await offlineServer({ metrics: { access: 'off' } });
    t.teardown(() => offline.close());
    const r = await offline.app.inject({ method: 'GET', url: '/metrics', remoteAddress: '127.0.0.1' });
    t.equal(r.statusCode, 404);
  });

  await t.test('after ingests, downloads and an audit', async (t) => {
    await metricsAfterWork(t, d);
  });
});

async function metricsAfterWork(t: Test, d: TestDaemon): Promise<void> {
  const alice = d.addUser('alice');
  const scrape = async () => {
    const res = await d.request('GET', '/metrics', { token: null });
    t.equal(res.status, 200);
    return parseMetrics(res.text);
  };

  const payload = { 'a.bin': randomBytes(300_000), 'sub/b.txt': 'hello\n' };
  const payloadBytes = 300_000 + 6;
  const good = await ingestBag(d, alice, payload);
  const bagId: string = good.request.bag_id;
  const bad = await ingestBag(
    d,
    alice,
    { 'a.txt': 'will be corrupted\n' },
    { corrupt: ['data/a.txt'], expect: 'FAILED' },
  );
  t.ok(
    bad.item.errors.some((e: { code: string }) => e.code === 'manifest-mismatch'),
    'the failed ingest is a manifest mismatch',
  );

  t.equal((await d.request('GET', `/v1/packages/${bagId}/a.bin`, { token: alice })).status, 200);
  t.equal((await d.request('GET', `/v1/packages/${bagId}/download`, { token: alice })).status, 200);
  t.equal((await d.request('GET', `/v1/packages/${randomUUID()}`, { token: alice })).status, 404);
  t.equal((await d.request('GET', `/v1/no-such/${bagId}`, { token: alice })).status, 404);

  const before = await scrape();
  const hashedBefore = value(before.samples, 'preservd_fixity_bytes_hashed_total') ?? 0;
  t.ok(
    hashedBefore >= payloadBytes,
    `bytes hashed by ingest (${hashedBefore}) cover the payload (${payloadBytes})`,
  );

  const audit = await d.request('POST', '/v1/audits');
  t.equal(audit.status, 201);
  const deadline = Date.now() + 15_000;
  for (;;) {
    const a = (await d.request('GET', `/v1/audits/${audit.json.id}`)).json;
    if (a.successes.length + a.failures.length === a.packages) break;
    if (Date.now() > deadline) throw new Error(`audit not finished: ${JSON.stringify(a)}`);
    await new Promise((r) => setTimeout(r, 50));
  }

  const { samples, types } = await scrape();

  await t.test('HTTP requests by route template, method and status', async (t) => {
    const requests = samples.filter((s) => s.name === 'preservd_http_requests_total');
    t.ok(
      value(samples, 'preservd_http_requests_total', {
        route: '/v1/requests',
        method: 'POST',
        status: '201',
      })! >= 2,
    );
    t.ok(
      value(samples, 'preservd_http_requests_total', {
        route: '/v1/requests/:bag_id/complete',
        method: 'POST',
        status: '201',
      })! >= 2,
    );
    t.ok(
      value(samples, 'preservd_http_requests_total', {
        route: '/v1/queue/:id',
        method: 'GET',
        status: '200',
      })! >= 2,
    );
    t.equal(
      value(samples, 'preservd_http_requests_total', {
        route: '/v1/packages/:bag_id/*',
        method: 'GET',
        status: '200',
      }),
      1,
    );
    t.equal(
      value(samples, 'preservd_http_requests_total', {
        route: '/v1/packages/:bag_id/download',
        method: 'GET',
        status: '200',
      }),
      1,
    );
    t.equal(
      value(samples, 'preservd_http_requests_total', {
        route: '/v1/packages/:bag_id',
        method: 'GET',
        status: '404',
      }),
      1,
    );
    t.equal(
      value(samples, 'preservd_http_requests_total', { route: 'unmatched', method: 'GET', status: '404' }),
      1,
      'unrouted URLs are one series',
    );
    t.equal(
      value(samples, 'preservd_http_requests_total', { route: '/v1/audits', method: 'POST', status: '201' }),
      1,
    );
    const uuid = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i;
    t.same(
      requests.filter((s) => Object.values(s.labels).some((v) => uuid.test(v))),
      [],
      'no bag id in any label',
    );
    t.ok(
      value(samples, 'preservd_http_request_duration_seconds_count', {
        route: '/v1/requests',
        method: 'POST',
      })! >= 2,
    );
    t.equal(types.get('preservd_http_requests_total'), 'counter');
  });

  await t.test('ingest queue, durations and failures by code', async (t) => {
    t.equal(value(samples, 'preservd_ingest_queue_depth'), 0, 'nothing pending');
    t.equal(types.get('preservd_ingest_queue_depth'), 'gauge');
    t.equal(types.get('preservd_ingest_duration_seconds'), 'histogram');
    t.equal(value(samples, 'preservd_ingest_duration_seconds_count', { outcome: 'DONE' }), 1);
    t.equal(value(samples, 'preservd_ingest_duration_seconds_count', { outcome: 'FAILED' }), 1);
    t.ok(value(samples, 'preservd_ingest_duration_seconds_sum', { outcome: 'DONE' })! > 0);
    t.ok(value(samples, 'preservd_ingest_bytes_total')! >= payloadBytes, 'stored bytes');
    const mismatches = bad.item.errors.filter((e: { code: string }) => e.code === 'manifest-mismatch').length;
    t.equal(
      value(samples, 'preservd_ingest_failures_total', { code: 'manifest-mismatch' }),
      mismatches,
      'one per problem of that code',
    );
    t.equal(types.get('preservd_ingest_failures_total'), 'counter');
  });

  await t.test('bytes hashed and audit progress', async (t) => {
    const hashed = value(samples, 'preservd_fixity_bytes_hashed_total')!;
    t.ok(
      hashed - hashedBefore >= payloadBytes,
      `the audit hashed the payload again (${hashed - hashedBefore} bytes)`,
    );
    t.equal(types.get('preservd_fixity_bytes_hashed_total'), 'counter');
    t.ok(value(samples, 'preservd_fixity_files_hashed_total')! >= 4);
    t.equal(value(samples, 'preservd_audit_last_packages', { state: 'total' }), 1, 'the one stored package');
    t.equal(value(samples, 'preservd_audit_last_packages', { state: 'success' }), 1);
    t.equal(value(samples, 'preservd_audit_last_packages', { state: 'failure' }), 0);
    t.ok(value(samples, 'preservd_audit_last_finished_timestamp_seconds')! > Date.now() / 1000 - 60);
    t.equal(value(samples, 'preservd_audit_packages', { state: 'total' }), 0, 'no audit in progress now');
    t.not(value(samples, 'preservd_audit_bytes', { state: 'done' }), undefined);
  });

  await t.test('rsync restarts and catalog size', async (t) => {
    t.equal(value(samples, 'preservd_rsync_restarts_total'), 0);
    t.equal(types.get('preservd_rsync_restarts_total'), 'counter');
    t.ok(value(samples, 'preservd_catalog_size_bytes')! > 0);
    t.ok(value(samples, 'preservd_process_resident_memory_bytes')! > 0, 'process metrics too');
  });
}
