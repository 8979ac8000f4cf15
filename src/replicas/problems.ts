/**
 * Why a copy on a replica could not be made or is not right: typed values with a code table
 * and one `describeReplicationProblem`. A replica that is merely unavailable is not a problem of
 * the copy (the copy stays `pending`, see target.ts ReplicaDown); these make it `failed`.
 */

type ReplicationProblemCode =
  /** The primary file could not be read, so there was nothing to copy. */
  | 'primary-unreadable'
  /** The primary file no longer matches the catalog: it is not copied (a bad copy must not spread). */
  | 'primary-changed'
  /** The object written and read back does not match the catalog: written wrong. */
  | 'copy-differs'
  /** The object written could not be read back. */
  | 'copy-unreadable'
  /** An object that differs from the catalog was already at the key; replication does not overwrite it. */
  | 'object-in-the-way'
  /** The replica refused the write (permissions, Object Lock, a bad key). */
  | 'write-refused';

/** Every problem a copy can have, with its severity: each one makes the copy `failed`. */
export const REPLICATION_PROBLEM_CODES: Readonly<Record<ReplicationProblemCode, 'error'>> = {
  'primary-unreadable': 'error',
  'primary-changed': 'error',
  'copy-differs': 'error',
  'copy-unreadable': 'error',
  'object-in-the-way': 'error',
  'write-refused': 'error',
};

export interface ReplicationProblem {
  code: ReplicationProblemCode;
  replica: string;
  /** Relative to the bag root. */
  path: string;
  /** What was found (a digest, an error), when there is something to say. */
  detail?: string;
}

export function describeReplicationProblem(p: ReplicationProblem): string {
  const at = `${p.path} on replica ${p.replica}`;
  const found = p.detail === undefined ? '' : ` (${p.detail})`;
  switch (p.code) {
    case 'primary-unreadable':
      return `${p.path}: the primary copy could not be read, so it was not copied to replica ${p.replica}${found}`;
    case 'primary-changed':
      return `${p.path}: the primary copy no longer matches the catalog, so it was not copied to replica ${p.replica}${found}`;
    case 'copy-differs':
      return `${at}: read back, it does not match the catalog${found}`;
    case 'copy-unreadable':
      return `${at}: written, but could not be read back${found}`;
    case 'object-in-the-way':
      return `${at}: an object that differs from the catalog is already there; replication does not overwrite it (repair does)${found}`;
    case 'write-refused':
      return `${at}: the replica refused the write${found}`;
  }
}
