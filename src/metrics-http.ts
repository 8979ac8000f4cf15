/**
 * The HTTP metrics, `preservd_http_requests_total{route,method,status}` and
 * `preservd_http_request_duration_seconds{route,method}`, counted in plain numbers as each
 * response ends and written in the Prometheus text format when scraped. prom-client's own
 * `inc` and `observe` build, hash and validate a label set on every call: about a tenth of the
 * daemon's CPU per show (docs/decisions.md, "HTTP metrics are counted without prom-client").
 * The other metrics, read when scraped, stay prom-client's.
 */

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

export class HttpMetrics {
  /** route → method → series: two lookups and no string built per response. */
  private readonly series = new Map<string, Map<string, Series>>();

  /** One response of `route` (a template, or `unmatched`). */
  record(route: string, method: string, status: number, seconds: number): void {
    let byMethod = this.series.get(route);
    if (byMethod === undefined) this.series.set(route, (byMethod = new Map()));
    let s = byMethod.get(method);
    if (s === undefined) byMethod.set(method, (s = { statuses: new Map(), buckets: new Array<number>(BUCKETS.length + 1).fill(0), sum: 0, count: 0 }));
    s.statuses.set(status, (s.statuses.get(status) ?? 0) + 1);
    let b = 0;
    while (b < BUCKETS.length && seconds > BUCKETS[b]!) b++;
    s.buckets[b]!++;
    s.sum += seconds;
    s.count++;
  }

  /** Both metrics in the Prometheus text format (0.0.4), as prom-client writes its own. */
  text(): string {
    const counts = ['# HELP preservd_http_requests_total HTTP responses by route, method and status', '# TYPE preservd_http_requests_total counter'];
    const durations = ['# HELP preservd_http_request_duration_seconds HTTP response time by route and method', '# TYPE preservd_http_request_duration_seconds histogram'];
    for (const [route, byMethod] of this.series) {
      for (const [method, s] of byMethod) {
        const labels = `route="${escapeLabel(route)}",method="${escapeLabel(method)}"`;
        for (const [status, n] of s.statuses) counts.push(`preservd_http_requests_total{${labels},status="${status}"} ${n}`);
        let cumulative = 0;
        BUCKETS.forEach((bound, i) => {
          cumulative += s.buckets[i]!;
          durations.push(`preservd_http_request_duration_seconds_bucket{le="${bound}",${labels}} ${cumulative}`);
        });
        durations.push(`preservd_http_request_duration_seconds_bucket{le="+Inf",${labels}} ${s.count}`);
        durations.push(`preservd_http_request_duration_seconds_sum{${labels}} ${s.sum}`);
        durations.push(`preservd_http_request_duration_seconds_count{${labels}} ${s.count}`);
      }
    }
    return `${counts.join('\n')}\n\n${durations.join('\n')}\n`;
  }
}

/** A label value as the text format needs it: backslash, double quote and newline escaped. */
function escapeLabel(value: string): string {
  return value.replaceAll('\\', '\\\\').replaceAll('"', '\\"').replaceAll('\n', '\\n');
}
