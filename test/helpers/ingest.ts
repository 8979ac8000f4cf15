/**
 * Puts a bag through the real daemon: request, rsync upload, complete, wait for the outcome. The
 * bag's folder is kept for the test to compare against, and removed when the test process exits.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rsyncUpload, type TestDaemon } from './daemon.js';
import { makeBag, type MakeBagOptions } from './make-bag.js';

export interface IngestedBag {
  request: any;
  item: any;
  bagDir: string;
}

export async function ingestBag(
  d: TestDaemon,
  token: string,
  files: MakeBagOptions['files'],
  options: Partial<MakeBagOptions> & {
    contentType?: string;
    externalId?: string;
    expect?: 'DONE' | 'FAILED';
    /** Changes the bag's folder after it is made, before the upload (what makeBag cannot make). */
    beforeUpload?: (bagDir: string) => void;
  } = {},
): Promise<IngestedBag> {
  const bagId = randomUUID();
  const contentType = options.contentType ?? 'video';
  const externalId = options.externalId ?? `ext-${bagId.slice(0, 8)}`;
  const request = await d.createRequest(token, {
    bag_id: bagId,
    external_id: externalId,
    content_type: contentType,
  });
  const scratch = mkdtempSync(join(tmpdir(), 'preservd-bag-'));
  process.once('exit', () => rmSync(scratch, { recursive: true, force: true }));
  const bagDir = join(scratch, 'bag');
  await makeBag(bagDir, {
    chipmunkInfo: { externalId: request.external_id, bagId, contentType },
    ...options,
    files,
  });
  options.beforeUpload?.(bagDir);
  const up = rsyncUpload(bagDir, request.upload_link);
  if (up.code !== 0) throw new Error(`rsync failed: ${up.output}`);
  const complete = await d.request('POST', `/v1/requests/${bagId}/complete`, { token });
  if (complete.status !== 201) throw new Error(`complete: ${complete.status} ${complete.text}`);
  const item = await d.waitForQueueItem(complete.json.id, token);
  const expected = options.expect ?? 'DONE';
  if (item.status !== expected) throw new Error(`expected ${expected}, got ${JSON.stringify(item)}`);
  return { request, item, bagDir };
}
