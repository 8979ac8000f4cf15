/**
 * A small upload checked on the daemon's own thread. For a bag of few files the worker thread of
 * isolated-check.ts costs more than the check: its start and a cold JIT come to about as much as
 * the rest of an ingest whose files were hashed as they landed, while what the validator builds
 * for such a bag is a few MB that the daemon's heap takes back (docs/decisions.md). An upload of
 * more files, or whose size is not known, goes to the worker as before; the verdict is the same.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { BagFile } from '../bagit/index.js';
import { checkUpload, type UploadCheckOptions } from './check-upload.js';
import type { CheckedUpload } from './isolated-check.js';

/** Uploads of at most this many files and folders are checked here; larger ones in a worker. */
export const CHECKED_HERE_MAX_ENTRIES = 10_000;

/** Files per batch handed to the ingest, as the worker hands them. */
const FILES_PER_BATCH = 5_000;

/**
 * Whether the tree under `dir` has at most `limit` entries (files, folders and anything else,
 * links not followed). Counting stops past the limit, so a huge upload costs no more than a small
 * one; an unreadable folder counts as too many (the worker's check then says what is wrong).
 */
export function holdsAtMost(dir: string, limit: number): boolean {
  const folders = [dir];
  let entries = 0;
  for (let folder = folders.pop(); folder !== undefined; folder = folders.pop()) {
    let names;
    try {
      names = readdirSync(folder, { withFileTypes: true });
    } catch {
      return false;
    }
    entries += names.length;
    if (entries > limit) return false;
    for (const entry of names) if (entry.isDirectory()) folders.push(join(folder, entry.name));
  }
  return true;
}

/** `checkUpload` on this thread, its answer shaped as the worker's (isolated-check.ts). */
export async function checkUploadHere(dir: string, options: UploadCheckOptions): Promise<CheckedUpload> {
  const { report, problems, valid } = await checkUpload(dir, options);
  const { files: all, ...summary } = report;
  let kept: BagFile[] | undefined = all;
  return {
    report: { ...summary, fileCount: all.length },
    problems,
    valid,
    async *files() {
      const files = kept ?? [];
      kept = undefined;
      for (let at = 0; at < files.length; at += FILES_PER_BATCH) yield files.slice(at, at + FILES_PER_BATCH);
    },
    close: () => {
      kept = undefined;
      return Promise.resolve();
    },
  };
}
