/**
 * chipmunk's status report as data: the queue items the caller may see, by outcome, newest
 * first, optionally bounded by `updated_at`. `GET /v1/queue/status` and the `/queue` page both
 * show it; neither decides visibility itself (auth/access.ts does).
 */
import type { Access } from '../auth/access.js';
import type { Catalog } from '../catalog/catalog.js';
import type { Package, QueueItem } from '../catalog/types.js';
import { badRequest } from './errors.js';

export interface ReportItem {
  item: QueueItem;
  pkg: Package;
}

export interface QueueReport {
  done: ReportItem[];
  pending: ReportItem[];
  failed: ReportItem[];
}

/** `before`/`after`: epoch ms, strict bounds on `updated_at`. */
export function queueReport(catalog: Catalog, rights: Access, bounds: { before?: number | undefined; after?: number | undefined }): QueueReport {
  const report: QueueReport = { done: [], pending: [], failed: [] };
  const packages = new Map<string, Package | undefined>();
  for (const item of catalog.queue.list()) {
    if (bounds.before !== undefined && !(item.updatedAt < bounds.before)) continue;
    if (bounds.after !== undefined && !(item.updatedAt > bounds.after)) continue;
    if (!packages.has(item.bagId)) packages.set(item.bagId, catalog.packages.get(item.bagId));
    const pkg = packages.get(item.bagId);
    if (pkg === undefined || !rights.canSee(pkg)) continue;
    report[item.status === 'DONE' ? 'done' : item.status === 'FAILED' ? 'failed' : 'pending'].push({ item, pkg });
  }
  const newestFirst = (a: ReportItem, b: ReportItem) => b.item.updatedAt - a.item.updatedAt || b.item.id - a.item.id;
  for (const list of [report.done, report.pending, report.failed]) list.sort(newestFirst);
  return report;
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}(?:[Tt ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?)?(?:[Zz]|[+-]\d{2}:\d{2})?$/;

/** Epoch ms of an RFC 3339 date or date-time (UTC when it has no offset); 400 when it is not one. */
export function parseTime(text: string | undefined, name: string): number | undefined {
  if (text === undefined || text === '') return undefined;
  const iso = text.replace(' ', 'T');
  // Date.parse reads a date-time without an offset as local time, a bare date as UTC: say UTC.
  const utc = /T/i.test(iso) && !/(?:Z|[+-]\d{2}:\d{2})$/i.test(iso) ? `${iso}Z` : iso;
  const ms = RFC3339.test(text) ? Date.parse(utc) : NaN;
  if (Number.isNaN(ms)) throw badRequest(`${name}: ${JSON.stringify(text)} is not an RFC 3339 time, e.g. 2026-11-25T10:00:00Z`);
  return ms;
}
