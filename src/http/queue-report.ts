/**
 * chipmunk's status report as data: the queue items the caller may see, by outcome, newest
 * first, optionally bounded by `updated_at`. `GET /v1/queue/status` and the `/queue` page both
 * show it; neither decides visibility itself (auth/access.ts does).
 */
import type { Access } from '../auth/access.js';
import type { Catalog } from '../catalog/catalog.js';
import type { Package, QueueItem } from '../catalog/types.js';
import { badRequest } from './errors.js';
import { scopeFor } from './routes/access.js';

export interface ReportItem {
  item: QueueItem;
  pkg: Package;
}

export interface QueueReport {
  done: ReportItem[];
  pending: ReportItem[];
  failed: ReportItem[];
}

/**
 * `before`/`after`: epoch ms, strict bounds on `updated_at`. A regular caller's report reads only
 * its scope's index ranges; an admin's reads the whole queue, as chipmunk's report does.
 */
export function queueReport(
  catalog: Catalog,
  rights: Access,
  bounds: { before?: number | undefined; after?: number | undefined },
): QueueReport {
  const report: QueueReport = { done: [], pending: [], failed: [] };
  const packages = new Map<string, Package | undefined>();
  for (const item of catalog.queue.list(scopeFor(rights))) {
    if (bounds.before !== undefined && !(item.updatedAt < bounds.before)) continue;
    if (bounds.after !== undefined && !(item.updatedAt > bounds.after)) continue;
    if (!packages.has(item.bagId)) packages.set(item.bagId, catalog.packages.get(item.bagId));
    const pkg = packages.get(item.bagId);
    if (pkg === undefined || !rights.canSee(pkg)) continue;
    report[item.status === 'DONE' ? 'done' : item.status === 'FAILED' ? 'failed' : 'pending'].push({
      item,
      pkg,
    });
  }
  const newestFirst = (a: ReportItem, b: ReportItem) =>
    b.item.updatedAt - a.item.updatedAt || b.item.id - a.item.id;
  for (const list of [report.done, report.pending, report.failed]) list.sort(newestFirst);
  return report;
}

/** The overview's part of the report: counts by outcome and the latest failed attempts. */
export interface QueueSummary {
  counts: { done: number; pending: number; failed: number };
  /** The latest failed attempts (by queue id), newest first, at most `latest`. */
  failures: ReportItem[];
}

/**
 * Counts and latest failures of what the caller may see. Whoever sees everything gets them from
 * the queue's indexes, whatever its size; a regular caller's come from its own report.
 */
export function queueSummary(catalog: Catalog, rights: Access, latest: number): QueueSummary {
  if (rights.visibility.everything) {
    const { total, pending, failed } = catalog.queue.counts();
    const failures: ReportItem[] = [];
    for (const item of catalog.queue.failedNewestFirst()) {
      if (failures.length === latest) break;
      const pkg = catalog.packages.get(item.bagId);
      if (pkg !== undefined) failures.push({ item, pkg });
    }
    return { counts: { done: total - pending - failed, pending, failed }, failures };
  }
  const report = queueReport(catalog, rights, {});
  return {
    counts: { done: report.done.length, pending: report.pending.length, failed: report.failed.length },
    failures: [...report.failed].sort((a, b) => b.item.id - a.item.id).slice(0, latest),
  };
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}(?:[Tt ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?)?(?:[Zz]|[+-]\d{2}:\d{2})?$/;

/** Epoch ms of an RFC 3339 date or date-time (UTC when it has no offset); 400 when it is not one. */
export function parseTime(text: string | undefined, name: string): number | undefined {
  if (text === undefined || text === '') return undefined;
  const iso = text.replace(' ', 'T');
  // Date.parse reads a date-time without an offset as local time, a bare date as UTC: say UTC.
  const utc = /T/i.test(iso) && !/(?:Z|[+-]\d{2}:\d{2})$/i.test(iso) ? `${iso}Z` : iso;
  const ms = RFC3339.test(text) ? Date.parse(utc) : NaN;
  if (Number.isNaN(ms))
    throw badRequest(`${name}: ${JSON.stringify(text)} is not an RFC 3339 time, e.g. 2026-11-25T10:00:00Z`);
  return ms;
}
