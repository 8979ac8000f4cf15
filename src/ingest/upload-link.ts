/**
 * The upload link of a request, in one place: `rsync://HOST:PORT/MODULE/<capability>/` for our
 * own rsync daemon (HOST is `upload.rsync.advertisedHost` or the listen address), or, when that
 * daemon is off, the operator's `upload.linkTemplate` (uploads come another way, e.g. ssh).
 */
import type { Config } from '../config/config.js';
import { assertCapability } from './capability.js';

/** `rsync://HOST:PORT/MODULE/<capability>/`, with an IPv6 literal in brackets. */
export function rsyncLink(host: string, port: number, module: string, capability: string): string {
  assertCapability(capability);
  const shown = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  return `rsync://${shown}:${port}/${module}/${capability}/`;
}

/** The link a depositor uploads a request's bag to. */
export function uploadLink(upload: Config['upload'], request: { capability: string; bagId: string }): string {
  const { linkTemplate: template, rsync } = upload;
  if (!rsync.enabled) {
    return (template ?? '{capability}')
      .replaceAll('{capability}', request.capability)
      .replaceAll('{bag_id}', request.bagId);
  }
  return rsyncLink(rsync.advertisedHost ?? rsync.host, rsync.port, rsync.module, request.capability);
}
