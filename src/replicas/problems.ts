/**
 * Why a copy on a replica could not be made or is not right: typed values, one per code, and
 * their table (`defineProblems`), the sentence of each. A replica that is merely unavailable is
 * not a problem of the copy (the copy stays `pending`, see target.ts ReplicaDown); these make it
 * `failed`, each one an error.
 */
import { defineProblems } from '../problems.js';

/** What every replication problem names: the replica, the file (its path in the OCFL object), and what was found. */
interface OnReplica {
  replica: string;
  path: string;
  /** What was found: a digest, an error, a reason. */
  detail: string;
}

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

/** One member per code, so a problem's code decides which value it is. */
export type ReplicationProblem = {
  [C in ReplicationProblemCode]: OnReplica & { code: C };
}[ReplicationProblemCode];

const at = (p: ReplicationProblem): string => `${p.path} on replica ${p.replica}`;

/** Each code's sentence; every one makes the copy `failed`. */
const REPLICATION_PROBLEMS = defineProblems<ReplicationProblem>({
  'primary-unreadable': {
    describe: (p) =>
      `${p.path}: the primary copy could not be read, so it was not copied to replica ${p.replica} (${p.detail})`,
  },
  'primary-changed': {
    describe: (p) =>
      `${p.path}: the primary copy no longer matches the catalog, so it was not copied to replica ${p.replica} (${p.detail})`,
  },
  'copy-differs': { describe: (p) => `${at(p)}: read back, it does not match the catalog (${p.detail})` },
  'copy-unreadable': { describe: (p) => `${at(p)}: written, but could not be read back (${p.detail})` },
  'object-in-the-way': {
    describe: (p) =>
      `${at(p)}: an object that differs from the catalog is already there; replication does not overwrite it (repair does) (${p.detail})`,
  },
  'write-refused': { describe: (p) => `${at(p)}: the replica refused the write (${p.detail})` },
});

/** Every problem a copy can have, with its severity (for documentation and tests). */
export const REPLICATION_PROBLEM_CODES = REPLICATION_PROBLEMS.CODES;

export const describeReplicationProblem = REPLICATION_PROBLEMS.describe;
