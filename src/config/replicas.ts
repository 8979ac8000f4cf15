/**
 * The `replicas` part of the configuration (CLI.md): the copies kept besides the primary in
 * `storage/`, each an S3-compatible bucket or a folder on another filesystem, and the checks of
 * what an operator wrote. Whether a bucket or folder really exists and takes writes is checked
 * at start-up by the replicas module, not here.
 */
import { readFileSync } from 'node:fs';

export interface S3ReplicaConfig {
  name: string;
  kind: 's3';
  endpoint: string;
  bucket: string;
  region: string;
  /** Put before every key, e.g. `preservd/`. */
  prefix: string;
  forcePathStyle: boolean;
  /** From the file, or else the standard AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY variables. */
  accessKeyId?: string;
  secretAccessKey?: string;
  /** Every object written under S3 Object Lock retention, this mode, for this many days. */
  retention?: { mode: 'COMPLIANCE' | 'GOVERNANCE'; days: number };
  /** Read rate limit of audits of this replica in MB/s; 0 or absent: unlimited. */
  rateLimitMBps?: number;
  /** PEM file of CAs trusted for an `https:` endpoint besides Node's own (a private CA). */
  caFile?: string;
}

export interface DirReplicaConfig {
  name: string;
  kind: 'dir';
  /** An existing folder, absolute or relative to the working directory. */
  path: string;
  rateLimitMBps?: number;
}

export type ReplicaConfig = S3ReplicaConfig | DirReplicaConfig;

const NAME = /^[a-z0-9-]+$/;

const readable = (path: string): string | Error => {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    return err as Error;
  }
};

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Every problem with `replicas`, each naming its key (`replicas[0].bucket: ...`). */
export function checkReplicas(replicas: unknown): string[] {
  const p: string[] = [];
  if (!Array.isArray(replicas)) return ['replicas: must be an array'];
  const names = new Set<string>();
  replicas.forEach((r: unknown, i) => {
    const key = `replicas[${i}]`;
    if (!isObject(r)) {
      p.push(`${key}: must be an object`);
      return;
    }
    const str = (field: string) => {
      if (typeof r[field] !== 'string' || r[field] === '') p.push(`${key}.${field}: must be a non-empty string`);
    };
    if (typeof r.name !== 'string' || !NAME.test(r.name) || r.name.length > 32) p.push(`${key}.name: must be 1 to 32 of a-z, 0-9 and -`);
    else if (names.has(r.name) || r.name === 'primary') p.push(`${key}.name: "${r.name}" is ${r.name === 'primary' ? 'reserved for the copy in storage/' : 'used twice'}`);
    else names.add(r.name);
    if (r.rateLimitMBps !== undefined && (typeof r.rateLimitMBps !== 'number' || !Number.isFinite(r.rateLimitMBps) || r.rateLimitMBps < 0))
      p.push(`${key}.rateLimitMBps: must be a number ≥ 0`);
    if (r.kind === 'dir') {
      str('path');
    } else if (r.kind === 's3') {
      str('bucket');
      str('region');
      try {
        const u = new URL(String(r.endpoint));
        if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error();
      } catch {
        p.push(`${key}.endpoint: must be an http(s) URL`);
      }
      if (typeof r.prefix !== 'string' || r.prefix.startsWith('/')) p.push(`${key}.prefix: must be a string not starting with /`);
      if (typeof r.forcePathStyle !== 'boolean') p.push(`${key}.forcePathStyle: must be true or false`);
      for (const field of ['accessKeyId', 'secretAccessKey', 'caFile']) if (r[field] !== undefined) str(field);
      if (typeof r.caFile === 'string' && r.caFile !== '') {
        const pem = readable(r.caFile);
        if (pem instanceof Error) p.push(`${key}.caFile: cannot be read: ${pem.message}`);
        else if (!pem.includes('-----BEGIN CERTIFICATE-----')) p.push(`${key}.caFile: ${r.caFile} holds no PEM certificate`);
      }
      const retention = r.retention;
      if (retention !== undefined) {
        if (!isObject(retention) || (retention.mode !== 'COMPLIANCE' && retention.mode !== 'GOVERNANCE')) p.push(`${key}.retention.mode: must be "COMPLIANCE" or "GOVERNANCE"`);
        if (!isObject(retention) || typeof retention.days !== 'number' || !Number.isInteger(retention.days) || retention.days < 1 || retention.days > 36500)
          p.push(`${key}.retention.days: must be an integer from 1 to 36500`);
      }
    } else p.push(`${key}.kind: must be "s3" or "dir"`);
  });
  return p;
}

/** S3 replicas' defaults for the keys an operator may leave out. */
export function withReplicaDefaults(replicas: unknown): unknown {
  if (!Array.isArray(replicas)) return replicas;
  return replicas.map((r: unknown) => (isObject(r) && r.kind === 's3' ? { region: 'us-east-1', prefix: '', forcePathStyle: true, ...r } : r));
}
