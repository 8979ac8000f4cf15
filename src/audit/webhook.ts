/**
 * The summary of a finished audit for `config.audit.webhookUrl`: its JSON payload (the counts and
 * every failed package) and its delivery, one POST with bounded retries.
 *
 * It does not decide when to announce an audit (the runner calls it once per finished audit) and
 * never throws: a summary that cannot be delivered is logged and given up.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Catalog } from '../catalog/catalog.js';
import type { Audit } from '../catalog/types.js';
import type { Logger } from '../logger.js';

/** The JSON POSTed to `config.audit.webhookUrl` when an audit finishes. */
export interface AuditWebhookPayload {
  audit: {
    id: number;
    user: string;
    packages: number;
    successes: number;
    failures: number;
    started_at: string;
    finished_at: string;
    bytes: number;
  };
  failures: Array<{ bag_id: string; external_id: string | null; detail: string | null }>;
}

export const WEBHOOK_TIMEOUT_MS = 10_000;
/** Delays before the 2nd and 3rd delivery attempts; then the summary is given up (and logged). */
export const WEBHOOK_RETRY_DELAYS_MS: readonly number[] = [2_000, 10_000];

export function webhookPayload(catalog: Catalog, audit: Audit): AuditWebhookPayload {
  const failures: AuditWebhookPayload['failures'] = [];
  for (const event of catalog.events.forAudit(audit.id)) {
    if (event.outcome !== 'failure') continue;
    failures.push({
      bag_id: event.bagId,
      external_id: catalog.packages.get(event.bagId)?.externalId ?? null,
      detail: event.detail,
    });
  }
  const iso = (ms: number) => new Date(ms).toISOString();
  return {
    audit: {
      id: audit.id,
      user: audit.user,
      packages: audit.packages,
      successes: audit.successes,
      failures: audit.failures,
      started_at: iso(audit.createdAt),
      finished_at: iso(audit.finishedAt ?? Date.now()),
      bytes: audit.bytes,
    },
    failures,
  };
}

export interface DeliveryOptions {
  logger: Logger;
  timeoutMs: number;
  retryDelaysMs: readonly number[];
  /**
   * The runner's stop signal, read before each retry (a restart replaces it): aborted while the
   * runner is not running, when no retry is made and a wait for one ends at once.
   */
  stopSignal: () => AbortSignal;
}

/**
 * POSTs the summary: up to three attempts (by default 10 s each, 2 s and 10 s apart) on network
 * errors, timeouts, 429 and 5xx answers; no retry after another 4xx or once the runner stops.
 * Failing is logged, never thrown.
 */
export async function deliverWebhook(
  url: string,
  payload: AuditWebhookPayload,
  opts: DeliveryOptions,
): Promise<void> {
  const { logger, timeoutMs } = opts;
  const body = JSON.stringify(payload);
  const auditId = payload.audit.id;
  for (let attempt = 0; ; attempt++) {
    let problem: string;
    let retry = true;
    try {
      const res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
        signal: AbortSignal.timeout(timeoutMs),
      });
      await res.arrayBuffer().catch(() => undefined);
      if (res.ok) {
        logger.info({ auditId, status: res.status }, `audit ${auditId} summary delivered to the webhook`);
        return;
      }
      problem = `the webhook answered ${res.status}`;
      retry = res.status >= 500 || res.status === 429;
    } catch (err) {
      problem =
        (err as Error).name === 'TimeoutError' ? `no answer within ${timeoutMs / 1000} s` : messageOf(err);
    }
    const delay = opts.retryDelaysMs[attempt];
    if (!retry || delay === undefined || opts.stopSignal().aborted) {
      logger.error(
        { auditId, attempts: attempt + 1 },
        `audit ${auditId} summary not delivered to the webhook: ${problem}`,
      );
      return;
    }
    logger.warn(
      { auditId, attempt: attempt + 1 },
      `audit ${auditId} summary not delivered to the webhook (${problem}); trying again in ${delay / 1000} s`,
    );
    const awake = await sleep(delay, true, { signal: opts.stopSignal() }).catch(() => false);
    if (!awake) {
      logger.error(
        { auditId, attempts: attempt + 1 },
        `audit ${auditId} summary not delivered to the webhook: ${problem} (stopping)`,
      );
      return;
    }
  }
}

/** An error's message, with its cause's (fetch failed: connect ECONNREFUSED ...). */
export function messageOf(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as { cause?: unknown }).cause;
    return cause instanceof Error ? `${err.message}: ${cause.message}` : err.message;
  }
  return String(err);
}
