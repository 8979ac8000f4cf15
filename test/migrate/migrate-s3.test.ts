/**
 * `preservd migrate` of an S3 replica on the real Ceph RGW: the fixture repository's replica
 * (test/fixtures/old-repository/mirror) put into a bucket under its old keys, with the old
 * write-check object beside; migrated, every package's object is there under its OCFL keys, byte
 * for byte, the old keys and the write-check object are gone, no version of them left behind a
 * delete marker. In a bucket with Object Lock, an old key still under retention stays and the
 * summary says so, with its date.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CreateBucketCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  ListObjectVersionsCommand,
  PutObjectCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import t from 'tap';
import { packageObjectPath } from '../../src/ocfl/layout.js';
import { s3Test, startCeph } from '../helpers/ceph.js';
import { cliPath, repoRoot } from '../helpers/daemon.js';
import { bytesUnder } from '../helpers/walk.js';
import { s3Client } from '../replicas/fixtures/replica-world.js';
import { node } from '../helpers/node.js';

const fixture = join(repoRoot, 'test/fixtures/old-repository');
const { answers } = JSON.parse(readFileSync(join(fixture, 'answers.json'), 'utf8')) as {
  answers: Array<{ bagId: string }>;
};

async function keysOf(s3: S3Client, bucket: string): Promise<string[]> {
  const page = await s3.send(new ListObjectsV2Command({ Bucket: bucket }));
  return (page.Contents ?? []).map((o) => o.Key!).sort();
}

s3Test(
  t,
  'an S3 replica of an earlier release becomes an OCFL root; old keys deleted, those under retention kept',
  async (t) => {
    const ceph = await startCeph(t);
    const s3 = s3Client(ceph);
    t.teardown(() => s3.destroy());
    const old = bytesUnder(join(fixture, 'mirror'));
    const retainedUntil = new Date(Date.now() + 24 * 3600 * 1000);
    const retainedKey = [...old.keys()].find((k) => k.endsWith('bagit.txt'))!;

    for (const locked of [false, true]) {
      const bucket = locked ? 'old-locked' : 'old-plain';
      await s3.send(
        new CreateBucketCommand({ Bucket: bucket, ...(locked ? { ObjectLockEnabledForBucket: true } : {}) }),
      );
      for (const [key, body] of old)
        await s3.send(
          new PutObjectCommand({
            Bucket: bucket,
            Key: key,
            Body: body,
            ...(locked && key === retainedKey
              ? { ObjectLockMode: 'GOVERNANCE', ObjectLockRetainUntilDate: retainedUntil }
              : {}),
          }),
        );
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: '.preservd/write-check', Body: 'x' }));

      const work = mkdtempSync(join(tmpdir(), 'preservd-migrate-s3-'));
      t.teardown(() => rmSync(work, { recursive: true, force: true }));
      const dataDir = join(work, 'data');
      cpSync(join(fixture, 'data'), dataDir, { recursive: true });
      const replica = {
        name: 'mirror',
        kind: 's3',
        endpoint: ceph.endpoint,
        bucket,
        region: ceph.region,
        prefix: '',
        forcePathStyle: true,
        accessKeyId: ceph.accessKeyId,
        secretAccessKey: ceph.secretAccessKey,
        ...(locked ? { retention: { mode: 'GOVERNANCE', days: 1 } } : {}),
      };
      const configPath = join(work, 'config.json');
      writeFileSync(configPath, JSON.stringify({ replicas: [replica], logLevel: 'warn' }));
      const r = spawnSync(...node([cliPath, 'migrate']), {
        env: { ...process.env, PRESERVD_CONFIG: configPath, PRESERVD_DATA_DIR: dataDir },
        encoding: 'utf8',
        timeout: 180_000,
      });
      t.equal(r.status, 0, `${bucket}: exit 0 (${r.stderr})`);
      const deleted = old.size + 1 - (locked ? 1 : 0);
      t.match(
        r.stdout,
        locked
          ? `replica mirror: 3 objects written, ${deleted} old keys deleted, 1 kept under Object Lock retention until ${retainedUntil.toISOString().slice(0, 16)}`
          : `replica mirror: 3 objects written, ${deleted} old keys deleted\n`,
        bucket,
      );

      const keys = await keysOf(s3, bucket);
      t.same(
        keys.filter((k) => /^[0-9a-f]{2}\//.test(k) || k.startsWith('.preservd/')),
        locked ? [retainedKey] : [],
        `${bucket}: no old key left${locked ? ' but the one under retention' : ''}`,
      );
      t.ok(keys.includes('0=ocfl_1.1') && keys.includes('ocfl_layout.json'), `${bucket}: the root's files`);
      for (const [key, body] of old) {
        const [, , , bagId, ...path] = key.split('/');
        const got = await s3.send(
          new GetObjectCommand({
            Bucket: bucket,
            Key: `${packageObjectPath(bagId!)}/v1/content/${path.join('/')}`,
          }),
        );
        t.ok(
          Buffer.from(await got.Body!.transformToByteArray()).equals(body),
          `${bucket}: ${key} at its OCFL key`,
        );
      }
      for (const { bagId } of answers)
        t.ok(keys.includes(`${packageObjectPath(bagId)}/inventory.json`), `${bucket}: ${bagId}'s inventory`);
      const versions = await s3.send(new ListObjectVersionsCommand({ Bucket: bucket }));
      const behind = [...(versions.Versions ?? []), ...(versions.DeleteMarkers ?? [])]
        .map((v) => v.Key!)
        .filter((k) => /^[0-9a-f]{2}\//.test(k) || k.startsWith('.preservd/'));
      t.same(
        behind,
        locked ? [retainedKey] : [],
        `${bucket}: no version of a deleted key kept, no delete marker`,
      );
    }
  },
);
