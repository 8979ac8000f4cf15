/**
 * The `replicas` part of the configuration (CLI.md): the copies kept besides the primary in
 * `storage/`, each an S3-compatible bucket or a folder on another filesystem. The schema says
 * what each entry holds; `checkReplicas` what a schema cannot: names unique across entries, and a
 * `caFile` that can be read. Whether a bucket or folder really exists and takes writes is checked
 * at start-up by the replicas module, not here.
 */
import { readFileSync } from 'node:fs';
import { Type, type Static } from '@sinclair/typebox';
import { NonEmpty, OneOf, StringEnum } from '../json-schema.js';

/** Read rate limit of audits of this replica in MB/s; 0 or absent: unlimited. */
const rateLimitMBps = Type.Optional(Type.Number({ minimum: 0 }));

const S3ReplicaSchema = Type.Object({
  name: Type.String({ pattern: '^[a-z0-9-]{1,32}$', problem: 'must be 1 to 32 of a-z, 0-9 and -' }),
  kind: Type.Literal('s3'),
  bucket: NonEmpty(),
  region: NonEmpty({ default: 'us-east-1' }),
  endpoint: Type.String({ format: 'http-url' }),
  /** Put before every key, e.g. `preservd/`. */
  prefix: Type.String({ pattern: '^(?!/)', default: '', problem: 'must be a string not starting with /' }),
  forcePathStyle: Type.Boolean({ default: true }),
  /** From the file, or else the standard AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY variables. */
  accessKeyId: Type.Optional(NonEmpty()),
  secretAccessKey: Type.Optional(NonEmpty()),
  /** PEM file of CAs trusted for an `https:` endpoint besides Node's own (a private CA). */
  caFile: Type.Optional(NonEmpty()),
  /** Every object written under S3 Object Lock retention, this mode, for this many days. */
  retention: Type.Optional(
    Type.Object({
      mode: StringEnum(['COMPLIANCE', 'GOVERNANCE']),
      days: Type.Integer({ minimum: 1, maximum: 36500 }),
    }),
  ),
  rateLimitMBps,
});

const DirReplicaSchema = Type.Object({
  name: S3ReplicaSchema.properties.name,
  kind: Type.Literal('dir'),
  /** An existing folder, absolute or relative to the working directory. */
  path: NonEmpty(),
  rateLimitMBps,
});

export type S3ReplicaConfig = Static<typeof S3ReplicaSchema>;
export type DirReplicaConfig = Static<typeof DirReplicaSchema>;
export type ReplicaConfig = S3ReplicaConfig | DirReplicaConfig;

/** Copies kept besides the primary: one of the two shapes, chosen by `kind`. */
export const ReplicasSchema = Type.Array(OneOf('kind', [S3ReplicaSchema, DirReplicaSchema]), { default: [] });

const readable = (path: string): string | Error => {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    return err as Error;
  }
};

/**
 * What the schema cannot say about `replicas`, each problem with its key: a name used twice or
 * the reserved `primary`, and a `caFile` that cannot be read or holds no certificate. Runs on
 * what the operator wrote, so every entry is looked at with care.
 */
export function checkReplicas(replicas: unknown): Array<[key: string[], problem: string]> {
  if (!Array.isArray(replicas)) return [];
  const p: Array<[string[], string]> = [];
  const names = new Set<string>();
  replicas.forEach((r: Record<string, unknown> | null, i) => {
    if (typeof r !== 'object' || r === null) return;
    const key = (field: string) => ['replicas', String(i), field];
    if (r.name === 'primary') p.push([key('name'), '"primary" is reserved for the copy in storage/']);
    else if (typeof r.name === 'string') {
      if (names.has(r.name)) p.push([key('name'), `"${r.name}" is used twice`]);
      names.add(r.name);
    }
    if (r.kind === 's3' && typeof r.caFile === 'string' && r.caFile !== '') {
      const pem = readable(r.caFile);
      if (pem instanceof Error) p.push([key('caFile'), `cannot be read: ${pem.message}`]);
      else if (!pem.includes('-----BEGIN CERTIFICATE-----'))
        p.push([key('caFile'), `${r.caFile} holds no PEM certificate`]);
    }
  });
  return p;
}
