/**
 * The load client of bench/scale's show, in a process of its own (forked, driven over IPC): the
 * bench process has streamed the whole unpaged list (hundreds of MB through fetch) before the
 * show is measured, and a client sharing that heap spent up to half as much CPU again per
 * answer, which every server's latency then measured. Each message `{ url, token, inFlight,
 * amount }` is answered with the latencies (ms, fractional, from autocannon's response events)
 * and the CPU seconds this process spent on them.
 */
import autocannon from 'autocannon';

export interface LoadRequest {
  url: string;
  token: string;
  inFlight: number;
  amount: number;
}

export type LoadResult = { latencies: number[]; cpuSeconds: number } | { error: string };

/**
 * `amount` GETs of `url` over `inFlight` keep-alive connections, driven by autocannon: it writes
 * prebuilt requests to raw sockets and counts response bytes without decoding them, about
 * 50–90 µs of CPU per 43 kB answer here where fetch (undici) spent 240–330 µs, more than either
 * server.
 */
function cannon({ url, token, inFlight, amount }: LoadRequest): Promise<number[]> {
  const latencies: number[] = [];
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      { url, connections: inFlight, amount, headers: { authorization: `Bearer ${token}` } },
      (err, result) => {
        if (err !== null && err !== undefined) reject(err instanceof Error ? err : new Error(String(err)));
        else if (result.errors > 0 || result.non2xx > 0 || latencies.length !== amount)
          reject(
            new Error(
              `${url}: ${result.errors} errors, ${result.non2xx} answers other than 2xx, ${latencies.length} of ${amount} timed`,
            ),
          );
        else resolve(latencies);
      },
    );
    instance.on('response', (_client, statusCode, _bytes, ms) => {
      if (statusCode === 200) latencies.push(ms);
    });
  });
}

process.on('message', (request: LoadRequest) => {
  const before = process.cpuUsage();
  cannon(request).then(
    (latencies) => {
      const used = process.cpuUsage(before);
      process.send!({ latencies, cpuSeconds: (used.user + used.system) / 1e6 } satisfies LoadResult);
    },
    (err: Error) => process.send!({ error: err.message } satisfies LoadResult),
  );
});
process.on('disconnect', () => process.exit(0));
