/**
 * The HTTP metrics, `preservd_http_requests_total{route,method,status}` and
 * `preservd_http_request_duration_seconds{route,method}`, counted in plain numbers as each
 * response ends and handed to prom-client when scraped, which writes them as it writes its own.
 * prom-client's own `inc` and `observe` build, hash and validate a label set on every call
 * (docs/decisions.md, "HTTP metrics are counted apart, written by prom-client").
 */
import type { Metric, Registry } from 'prom-client';

/** Upper bounds of the duration histogram's buckets, in seconds. */
const BUCKETS = [0.001, 0.005, 0.02, 0.1, 0.5, 2, 10, 60];

interface Series {
  /** Responses by status. */
  statuses: Map<number, number>;
  /** Responses per bucket (not cumulative); the last is above every bound. */
  buckets: number[];
  sum: number;
  count: number;
}

/** One value of a metric as prom-client's registry reads it from `get()`. */
interface Value {
  metricName?: string;
  labels: Record<string, string | number>;
  value: number;
}

export class HttpMetrics {
  /** route → method → series: two lookups and no string built per response. */
  private readonly series = new Map<string, Map<string, Series>>();

  /** One response of `route` (a template, or `unmatched`). */
  record(route: string, method: string, status: number, seconds: number): void {
    let byMethod = this.series.get(route);
    if (byMethod === undefined) this.series.set(route, (byMethod = new Map()));
    let s = byMethod.get(method);
    if (s === undefined)
      byMethod.set(
        method,
        (s = {
          statuses: new Map(),
          buckets: new Array<number>(BUCKETS.length + 1).fill(0),
          sum: 0,
          count: 0,
        }),
      );
    s.statuses.set(status, (s.statuses.get(status) ?? 0) + 1);
    let b = 0;
    while (b < BUCKETS.length && seconds > BUCKETS[b]!) b++;
    s.buckets[b]!++;
    s.sum += seconds;
    s.count++;
  }

  /** Adds both metrics to `registry`: their values are read from the counts when it is scraped. */
  register(registry: Registry): void {
    registry.registerMetric(
      this.metric(
        'preservd_http_requests_total',
        'HTTP responses by route, method and status',
        'counter',
        () => this.counts(),
      ),
    );
    registry.registerMetric(
      this.metric(
        'preservd_http_request_duration_seconds',
        'HTTP response time by route and method',
        'histogram',
        () => this.durations(),
      ),
    );
  }

  private counts(): Value[] {
    const values: Value[] = [];
    for (const [route, method, s] of this.each())
      for (const [status, n] of s.statuses) values.push({ labels: { route, method, status }, value: n });
    return values;
  }

  /** As prom-client's Histogram gives them: cumulative buckets with `le` first, then sum and count. */
  private durations(): Value[] {
    const values: Value[] = [];
    for (const [route, method, s] of this.each()) {
      let cumulative = 0;
      BUCKETS.forEach((le, i) => {
        cumulative += s.buckets[i]!;
        values.push({
          metricName: 'preservd_http_request_duration_seconds_bucket',
          labels: { le, route, method },
          value: cumulative,
        });
      });
      values.push({
        metricName: 'preservd_http_request_duration_seconds_bucket',
        labels: { le: '+Inf', route, method },
        value: s.count,
      });
      values.push({
        metricName: 'preservd_http_request_duration_seconds_sum',
        labels: { route, method },
        value: s.sum,
      });
      values.push({
        metricName: 'preservd_http_request_duration_seconds_count',
        labels: { route, method },
        value: s.count,
      });
    }
    return values;
  }

  private *each(): Generator<[route: string, method: string, series: Series]> {
    for (const [route, byMethod] of this.series) for (const [method, s] of byMethod) yield [route, method, s];
  }

  /**
   * A metric for prom-client's registry, which asks only `get()` for its values and writes the
   * text itself; its type names the classes, hence the cast.
   */
  private metric(name: string, help: string, type: 'counter' | 'histogram', values: () => Value[]): Metric {
    const get = () => ({ name, help, type, aggregator: 'sum' as const, values: values() });
    return { name, help, type, aggregator: 'sum', get } as unknown as Metric;
  }
}
