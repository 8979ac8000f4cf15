/**
 * A per-address limit on wrong credentials (a bearer token that is unknown or revoked, a wrong
 * token typed into the login form), with @fastify/rate-limit's counter: past
 * `auth.maxFailedAttempts` failures in `auth.failedAttemptsWindowSeconds`, each further failure
 * from that address answers 429 with Retry-After instead of 401. Only failures are counted and only
 * failures are refused, so a correct token from the same address is never slowed (docs/decisions.md).
 * The address is the client's as the trusted proxies say (`http.trustedProxies`), else the peer's.
 */
import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Config } from '../config/config.js';
import { HttpError } from './errors.js';

export class TooManyFailures extends HttpError {
  constructor(readonly retryAfterSeconds: number) {
    super(429, `too many wrong tokens from this address; try again in ${retryAfterSeconds} s`);
  }
}

/** Counts one failure of `request`'s address; the 429 to answer instead when it is over the limit. */
export type FailureCounter = (request: FastifyRequest) => Promise<TooManyFailures | undefined>;

export async function registerFailureLimit(app: FastifyInstance, config: Config): Promise<FailureCounter> {
  const { maxFailedAttempts, failedAttemptsWindowSeconds } = config.auth;
  if (maxFailedAttempts === 0) return async () => undefined;
  // Not global: no route is limited as such; only the failures counted below.
  await app.register(rateLimit, { global: false });
  const count = app.createRateLimit({
    max: maxFailedAttempts,
    timeWindow: failedAttemptsWindowSeconds * 1000,
  });
  return async (request) => {
    const result = await count(request);
    return !result.isAllowed && result.isExceeded
      ? new TooManyFailures(Math.max(1, result.ttlInSeconds))
      : undefined;
  };
}
