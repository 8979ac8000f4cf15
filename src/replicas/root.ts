/**
 * A replica as an OCFL 1.1 storage root (STORAGE.md): before any object is copied there, its root
 * holds `0=ocfl_1.1`, `ocfl_layout.json` and the layout extension's config, the same files as the
 * primary's (ocfl/layout.ts). Each is written when missing (the declaration first, so a start
 * after a crash finds a root and completes it), left alone when it holds the same bytes, and a
 * root file that differs, or a folder or bucket that holds other things and no declaration
 * (bags in the layout before OCFL, someone else's data), makes the replica unusable with a
 * message saying what to do. Nothing is ever rewritten or deleted here.
 */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { layoutFiles, ROOT_DECLARATION } from '../ocfl/layout.js';
import { ReplicaUnusable, type ReplicaTarget } from './target.js';

/** A top-level folder of the layout before OCFL: two hex digits (OCFL's tuples have three). */
const OLD_SHARD = /^[0-9a-f]{2}$/;
/** The S3 start-up check of earlier releases kept its object here; `preservd migrate` removes it. */
const OLD_WRITE_CHECK = '.preservd/';

/** The root's own files, the declaration first. */
export function rootFiles(): Array<{ path: string; text: string }> {
  return [{ path: ROOT_DECLARATION.name, text: ROOT_DECLARATION.text }, ...layoutFiles()];
}

/** Makes the replica's root an OCFL root, or throws ReplicaUnusable saying why it cannot be one. */
export async function prepareReplicaRoot(target: ReplicaTarget, signal?: AbortSignal): Promise<void> {
  const files = rootFiles().map(({ path, text }) => {
    const bytes = Buffer.from(text, 'utf8');
    return {
      path,
      bytes,
      expected: { size: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') },
    };
  });
  const declared = await target.readBack(files[0]!.path, files[0]!.expected, { signal });
  if (declared.kind === 'missing') await refuseUnlessEmpty(target, signal);
  for (const file of files) {
    const found = await target.readBack(file.path, file.expected, { signal });
    if (found.kind === 'match') continue;
    if (found.kind === 'missing') {
      await target.write(file.path, Readable.from([file.bytes]), file.expected, { replace: false, signal });
      const back = await target.readBack(file.path, file.expected, { signal });
      if (back.kind === 'match') continue;
      throw new ReplicaUnusable(
        `replica ${target.name}: ${file.path} written at the root of ${target.where} does not read back as written (${back.kind})`,
      );
    }
    throw new ReplicaUnusable(
      `replica ${target.name}: ${target.where} holds a ${file.path} that is not preservd's (${found.kind === 'differs' ? `${found.size} bytes, sha256 ${found.sha256}` : found.reason}); it is not an OCFL root laid out as preservd lays out its roots: point the replica at an empty folder or prefix (docs/replicas.md)`,
    );
  }
}

/** A root with no declaration must be empty, apart from what an earlier preservd left (migrate's). */
async function refuseUnlessEmpty(target: ReplicaTarget, signal?: AbortSignal): Promise<void> {
  const old = new Set<string>();
  let other: string | undefined;
  for await (const { key } of target.list('', signal)) {
    const rel = key.replace(/^\/+/, '');
    const top = rel.split('/')[0]!;
    if (rel.startsWith(OLD_WRITE_CHECK)) continue;
    if (OLD_SHARD.test(top) && rel.includes('/')) old.add(top);
    else other ??= rel;
    if (old.size >= 3 || (other !== undefined && old.size === 0)) break;
  }
  if (old.size > 0)
    throw new ReplicaUnusable(
      `replica ${target.name}: ${target.where} holds packages in the layout before OCFL (${[...old].join(', ')}, ...: ab/cd/ef/<bag_id>); stop here and run \`preservd migrate\` to convert it to OCFL 1.1 (docs/replicas.md)`,
    );
  if (other !== undefined)
    throw new ReplicaUnusable(
      `replica ${target.name}: ${target.where} is not empty (${other}) and is not an OCFL storage root (no ${ROOT_DECLARATION.name}); point the replica at an empty folder or prefix (docs/replicas.md)`,
    );
}
