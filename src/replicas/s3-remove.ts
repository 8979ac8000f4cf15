/**
 * Every object under a prefix removed from a bucket, every version of each (a bucket with Object
 * Lock keeps versions: deleting only the latest would leave the content behind a delete marker).
 * A version Object Lock retains cannot be deleted before its date: its key is hidden behind a
 * delete marker (so the bucket's current view no longer holds the object, and the root stays a
 * valid OCFL root), the version stays, and the latest such date is answered so the caller comes
 * back then. The object's declaration goes last.
 */
import {
  DeleteObjectCommand,
  HeadObjectCommand,
  ListObjectVersionsCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { OBJECT_DECLARATION } from '../ocfl/layout.js';

interface Version {
  key: string;
  versionId: string | undefined;
  latest: boolean;
  marker: boolean;
}

export async function removeEveryVersion(
  client: S3Client,
  bucket: string,
  prefix: string,
  signal?: AbortSignal,
): Promise<{ retainedUntil?: Date }> {
  const opts = signal ? { abortSignal: signal } : {};
  const versions = await versionsUnder(client, bucket, prefix, opts);
  const last = (v: Version) => (v.key.endsWith(`/${OBJECT_DECLARATION.name}`) ? 1 : 0);
  versions.sort((a, b) => last(a) - last(b));
  let retainedUntil: Date | undefined;
  const kept = new Set<string>();
  for (const v of versions.filter((x) => !x.marker)) {
    const VersionId = v.versionId;
    const head = await client.send(
      new HeadObjectCommand({ Bucket: bucket, Key: v.key, ...(VersionId ? { VersionId } : {}) }),
      opts,
    );
    const until = head.ObjectLockRetainUntilDate;
    if (until !== undefined && until.getTime() > Date.now()) {
      kept.add(v.key);
      if (retainedUntil === undefined || until > retainedUntil) retainedUntil = until;
      continue;
    }
    await client.send(
      new DeleteObjectCommand({ Bucket: bucket, Key: v.key, ...(VersionId ? { VersionId } : {}) }),
      opts,
    );
  }
  for (const key of kept) {
    // Hidden behind a delete marker unless one is the latest already.
    if (versions.some((v) => v.key === key && v.marker && v.latest)) continue;
    await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }), opts);
  }
  // The markers of keys with nothing retained behind them are noise once the versions are gone.
  for (const v of versions.filter((x) => x.marker && !kept.has(x.key)))
    await client.send(
      new DeleteObjectCommand({
        Bucket: bucket,
        Key: v.key,
        ...(v.versionId ? { VersionId: v.versionId } : {}),
      }),
      opts,
    );
  return retainedUntil === undefined ? {} : { retainedUntil };
}

async function versionsUnder(
  client: S3Client,
  bucket: string,
  prefix: string,
  opts: { abortSignal?: AbortSignal },
): Promise<Version[]> {
  const out: Version[] = [];
  let KeyMarker: string | undefined;
  let VersionIdMarker: string | undefined;
  for (;;) {
    const page = await client.send(
      new ListObjectVersionsCommand({
        Bucket: bucket,
        Prefix: prefix,
        ...(KeyMarker ? { KeyMarker } : {}),
        ...(VersionIdMarker ? { VersionIdMarker } : {}),
      }),
      opts,
    );
    for (const v of page.Versions ?? [])
      if (v.Key !== undefined)
        out.push({ key: v.Key, versionId: v.VersionId, latest: v.IsLatest === true, marker: false });
    for (const m of page.DeleteMarkers ?? [])
      if (m.Key !== undefined)
        out.push({ key: m.Key, versionId: m.VersionId, latest: m.IsLatest === true, marker: true });
    if (page.IsTruncated !== true) return out;
    KeyMarker = page.NextKeyMarker;
    VersionIdMarker = page.NextVersionIdMarker;
  }
}
