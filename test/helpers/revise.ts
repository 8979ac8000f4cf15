/**
 * A revision as a depositor makes one through the real daemon: opened, the bag's folder changed
 * (files changed, added, removed), its Payload-Oxum and manifests rewritten, rsync'd to the
 * revision's link, completed, and waited for until DONE.
 */
import { readFileSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { rsyncUpload, type TestDaemon } from './daemon.js';
import { writeManifests } from './make-bag.js';
import { filesUnder } from './walk.js';

/** Revision `n` of the package: `change` applied to the bag's `data/`, stored; throws unless DONE. */
export async function revise(
  d: TestDaemon,
  bagId: string,
  bagDir: string,
  n: number,
  note: string,
  change: (data: string) => void,
): Promise<void> {
  const opened = await d.request('POST', `/v1/packages/${bagId}/revisions`, { json: { note } });
  if (opened.status !== 201) throw new Error(`open revision ${n}: ${opened.status} ${opened.text}`);
  change(join(bagDir, 'data'));
  const payload = filesUnder(join(bagDir, 'data'), { regularOnly: true });
  const octets = payload.reduce((sum, p) => sum + statSync(join(bagDir, 'data', p)).size, 0);
  const info = join(bagDir, 'bag-info.txt');
  writeFileSync(
    info,
    readFileSync(info, 'utf8').replace(/Payload-Oxum: .*/, `Payload-Oxum: ${octets}.${payload.length}`),
  );
  await writeManifests(bagDir);
  // rsync's quick check compares size and whole-second mtime: a file rewritten with the same size
  // within the second of the last upload would not be sent. Every file is dated n minutes on.
  const later = new Date(Date.now() + n * 60_000);
  for (const p of filesUnder(bagDir, { regularOnly: true })) utimesSync(join(bagDir, p), later, later);
  const up = rsyncUpload(bagDir, opened.json.upload_link);
  if (up.code !== 0) throw new Error(`rsync: ${up.output}`);
  const done = await d.request('POST', `/v1/packages/${bagId}/revisions/${n}/complete`);
  if (done.status !== 201) throw new Error(`complete revision ${n}: ${done.status} ${done.text}`);
  const item = await d.waitForQueueItem(done.json.id);
  if (item.status !== 'DONE') throw new Error(`revision ${n}: ${JSON.stringify(item)}\n${d.output}`);
}
