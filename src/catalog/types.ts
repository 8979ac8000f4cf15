/**
 * The domain nouns of preservd, as the catalog stores them. Wire shapes (snake_case, RFC 3339
 * dates) are made from these in `http/`; nothing here knows about HTTP.
 */

import type { Algorithm } from '../fixity/index.js';

export interface User {
  name: string;
  admin: boolean;
  createdAt: number;
}

/** chipmunk's roles (research/chipmunk.md §3.1): what a grant lets its holder do within its scope. */
export type Role = 'viewer' | 'content_manager' | 'admin';

/** A role given to a user on one content type, or on every one (`all`). */
export interface Grant {
  user: string;
  role: Role;
  /** A content type, or `all`. */
  scope: string;
  createdAt: number;
}

/** A browser session (http pages): who logged in, with which token, until when. */
export interface Session {
  /** Hex SHA-256 of the cookie's secret; the secret itself is never stored. */
  digest: string;
  userName: string;
  /** Digest of the token the session was opened with: revoking the token ends the session. */
  tokenDigest: string;
  createdAt: number;
  expiresAt: number;
  /** Last use, written at most once a minute; sessions from before it have none (createdAt then). */
  lastSeenAt?: number;
  /** Refused after this long unused (`auth.sessionIdleMinutes` at login); none: no idle limit. */
  idleMs?: number;
}

export interface Token {
  /** Public identifier of the token (shown by `token issue`, used by `token revoke`). */
  id: string;
  userName: string;
  /** Hex SHA-256 of the secret; the secret itself is never stored. */
  digest: string;
  createdAt: number;
  revokedAt?: number;
}

/** A request before it is stored, a package after: one record, two names (API.md). */
export interface Package {
  bagId: string;
  externalId: string;
  contentType: string;
  user: string;
  /** Unguessable name of the landing folder; the secret part of the upload link. */
  capability: string;
  stored: boolean;
  /** Relative to the storage root: `ab/cd/ef/<bag_id>`; set when stored. */
  storagePath?: string;
  createdAt: number;
  updatedAt: number;
  /**
   * Bumped by every write of the package's record or payload list (catalog/packages.ts), in the
   * same transaction: what a kept show is keyed on (http/kept-shows.ts). Absent in records
   * written before it was kept (read as 0).
   */
  version?: number;
  /**
   * The package's current OCFL version (its object's head): absent is 1, the first deposit.
   * Revisions (catalog/revisions.ts) raise it.
   */
  head?: number;
  /** Set when a deaccession of the package was approved: a tombstone from then on (catalog/deaccessions.ts). */
  deaccessioned?: Deaccessioned;
}

/** What a tombstone says of its package's removal (API.md, "Deaccession"). */
export interface Deaccessioned {
  at: number;
  reason: string;
  requestedBy: string;
  approvedBy: string;
  /** The request that was approved. */
  requestId: number;
  requestedAt: number;
}

type DeaccessionStatus = 'requested' | 'approved' | 'rejected';

/** A request to take a package out, decided by a second admin (catalog/deaccessions.ts). */
export interface Deaccession {
  id: number;
  bagId: string;
  status: DeaccessionStatus;
  reason: string;
  requestedBy: string;
  requestedAt: number;
  decidedBy?: string;
  decidedAt?: number;
  /** The decider's reason: required to reject, optional to approve. */
  decisionReason?: string;
}

/** One stored file of a package: tag files and payload alike, path relative to the bag root. */
export interface FileRecord {
  path: string;
  size: number;
  /** CRC-32 as 8 lower-case hex digits, kept for the zip download. */
  crc32: string;
  /** Hex digests: every algorithm the bag's manifests used, plus sha256 always. */
  digests: Partial<Record<Algorithm, string>>;
  /**
   * Where its bytes are in the object (`v<n>/content/<path>`), when not `v1/content/<path>`: a
   * revision's file unchanged since an earlier version is that version's content.
   */
  contentPath?: string;
}

type QueueStatus = 'PENDING' | 'DONE' | 'FAILED';

/**
 * Where an ingest is. Each stage is safe to run again after a crash; start-up resumes a PENDING
 * item from its recorded stage.
 */
export type IngestStage = 'waiting' | 'staged' | 'validated' | 'finished';

/**
 * A problem as the catalog keeps it (in a FAILED queue item, for the depositor): whatever module
 * found it (bagit, the chipmunk checks, the ingest), its code, severity and sentence, and the
 * file it concerns. Each module's own typed problems (`defineProblems`) are assignable to it;
 * the rest of each value (a manifest's name, an expected digest) is stored with it but read only
 * through the sentence.
 */
export interface StoredProblem {
  code: string;
  message: string;
  severity: 'error' | 'warning';
  path?: string;
}

/** The errors among problems (the rest are warnings). */
export function errorsOf<P extends { severity: 'error' | 'warning' }>(problems: readonly P[]): P[] {
  return problems.filter((p) => p.severity === 'error');
}

/** The warnings among problems. */
export function warningsOf<P extends { severity: 'error' | 'warning' }>(problems: readonly P[]): P[] {
  return problems.filter((p) => p.severity === 'warning');
}

export interface QueueItem {
  id: number;
  bagId: string;
  status: QueueStatus;
  stage: IngestStage;
  /** The user who completed the request: the executor of the ingest's events. */
  user: string;
  /** The version the ingest stores: absent is 1 (a first deposit); more is a revision's. */
  version?: number;
  errors?: StoredProblem[];
  createdAt: number;
  updatedAt: number;
}

/** Every event type, as the API and the preservd record in storage name them. */
export const EVENT_TYPES = [
  'transfer',
  'validation',
  'ingestion',
  'fixity check',
  'replication',
  'recovery',
  'deletion',
  'deaccession',
] as const;
type EventType = (typeof EVENT_TYPES)[number];
export const OUTCOMES = ['success', 'failure'] as const;
type Outcome = (typeof OUTCOMES)[number];

export interface PreservationEvent {
  id: number;
  bagId: string;
  type: EventType;
  executor: string;
  outcome: Outcome;
  detail: string | null;
  date: number;
  auditId?: number;
}

export interface Audit {
  id: number;
  user: string;
  /** Stored packages when the audit started. */
  packages: number;
  successes: number;
  failures: number;
  /** Bytes verified so far, for progress reporting. */
  bytes: number;
  /** Total bytes of the packages in this audit, for progress reporting. */
  totalBytes: number;
  createdAt: number;
  updatedAt: number;
  finishedAt?: number;
}

/**
 * The checkpoint of a huge file's hashing in an ingest in progress (catalog/checkpoints.ts), as
 * listed; the saved state itself is opaque.
 */
export interface HashCheckpoint {
  bagId: string;
  /** Relative to the bag root. */
  path: string;
  /** Size of the saved state. */
  bytes: number;
}

export type ReplicaCopyStatus = 'pending' | 'verified' | 'failed';

/** A stored package's copy on one replica (catalog/replication.ts). */
export interface ReplicaCopy {
  bagId: string;
  /** The replica's configured name. */
  replica: string;
  status: ReplicaCopyStatus;
  /** The package's bytes (all its files). */
  bytes: number;
  /** Attempts made so far that did not end verified. */
  attempts: number;
  /** When the replicator may try again (pending and failed copies). */
  nextAttemptAt: number;
  /** Why the last attempt did not finish (a replica unavailable), while pending. */
  lastReason?: string;
  /** Failed only: what is wrong, one sentence. */
  error?: string;
  /** Failed because an audit found the copy damaged: left for repair. */
  damaged?: boolean;
  /** Paths whose wrong object this daemon wrote itself (a retry may replace those). */
  ownWrongCopies?: string[];
  verifiedAt?: number;
  createdAt: number;
  updatedAt: number;
}
