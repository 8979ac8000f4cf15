/**
 * The HTTP metrics counted apart from prom-client's Counter and Histogram (src/metrics-http.ts)
 * come out of a registry exactly as prom-client's own metrics fed the same observations: prom-client
 * is the reference here.
 */
import { Counter, Histogram, Registry } from 'prom-client';
import t from 'tap';
import { HttpMetrics } from '../../src/metrics-http.js';

const responses: Array<[route: string, method: string, status: number, seconds: number]> = [
  ['/v1/packages/:bag_id', 'GET', 200, 0.0004],
  ['/v1/packages/:bag_id', 'GET', 200, 0.001], // on a bound: counted in its bucket (le)
  ['/v1/packages/:bag_id', 'GET', 404, 0.0031],
  ['/v1/packages/:bag_id', 'HEAD', 200, 0.02],
  ['/v1/requests', 'POST', 201, 0.7],
  ['/v1/requests', 'POST', 422, 75], // above every bound
  ['unmatched', 'GET', 404, 0.00001],
  ['/odd "route"\\with\nbreaks', 'GET', 200, 3], // escaped as the text format asks
];

/** prom-client's two metrics, registered alone, and ours, fed the same responses. */
function both(): {
  registry: Registry;
  record: (route: string, method: string, status: number, seconds: number) => void;
  ours: Registry;
} {
  const registry = new Registry();
  const count = new Counter({
    name: 'preservd_http_requests_total',
    help: 'HTTP responses by route, method and status',
    labelNames: ['route', 'method', 'status'],
    registers: [registry],
  });
  const durations = new Histogram({
    name: 'preservd_http_request_duration_seconds',
    help: 'HTTP response time by route and method',
    labelNames: ['route', 'method'],
    buckets: [0.001, 0.005, 0.02, 0.1, 0.5, 2, 10, 60],
    registers: [registry],
  });
  const http = new HttpMetrics();
  const ours = new Registry();
  http.register(ours);
  const record = (route: string, method: string, status: number, seconds: number) => {
    count.inc({ route, method, status: String(status) });
    durations.observe({ route, method }, seconds);
    http.record(route, method, status, seconds);
  };
  return { registry, record, ours };
}

t.test('the same text as prom-client for the same responses', async (t) => {
  const { registry, record, ours } = both();
  for (const [route, method, status, seconds] of responses) record(route, method, status, seconds);
  t.equal(await ours.metrics(), await registry.metrics());
});

t.test('nothing recorded: the same text as prom-client, no series', async (t) => {
  const { registry, ours } = both();
  t.equal(await ours.metrics(), await registry.metrics());
});
