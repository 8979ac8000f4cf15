/**
 * The worker thread that checks one upload (`checkUpload`) for an ingest, so that what the
 * validator builds and drops for a bag of many files lives and dies with this thread's heap
 * instead of growing the daemon's for good (docs/decisions.md, "Uploads are checked in a worker
 * thread"). It hashes nothing itself: every file goes to the ingest, which hands it to the
 * daemon's pool. It may be started before its upload is ready (isolated-check.ts, `prepareCheck`):
 * it loads its modules, then waits for the upload to check. It sends the verdict, then the files
 * in batches as the ingest asks for them.
 */
import { parentPort } from 'node:worker_threads';
import type { BagFile, FileHasher } from '../bagit/index.js';
import { deserializeError, type Algorithm, type FileDigests } from '../fixity/index.js';
import { checkUpload } from './check-upload.js';
import type {
  CheckWorkerData,
  CrossingHashOptions,
  FromCheckWorker,
  ToCheckWorker,
} from './check-protocol.js';

const port = parentPort!;
const post = (message: FromCheckWorker): void => port.postMessage(message);

/** Hashing calls waiting for the ingest's answer, by id. */
const waiting = new Map<number, { settle: (answer: ToCheckWorker) => void }>();
let nextId = 1;

function ask(message: (id: number) => FromCheckWorker): Promise<ToCheckWorker> {
  const id = nextId++;
  return new Promise((settle) => {
    waiting.set(id, { settle });
    post(message(id));
  });
}

const crossing = (opts: CrossingHashOptions | undefined): CrossingHashOptions => ({
  ...(opts?.crc32 === undefined ? {} : { crc32: opts.crc32 }),
  ...(opts?.priority === undefined ? {} : { priority: opts.priority }),
});

async function hashFile(
  path: string,
  algorithms: Algorithm[],
  opts?: CrossingHashOptions,
): Promise<FileDigests> {
  const answer = await ask((id) => ({ kind: 'hashFile', id, path, algorithms, opts: crossing(opts) }));
  if (answer.kind === 'hashed') return answer.digests;
  throw failure(answer, path);
}

async function hashFiles(
  files: ReadonlyArray<{ path: string; algorithms: Algorithm[] }>,
  opts?: CrossingHashOptions,
): Promise<Array<FileDigests | Error>> {
  const answer = await ask((id) => ({ kind: 'hashFiles', id, files: [...files], opts: crossing(opts) }));
  if (answer.kind === 'hashedAll')
    return answer.results.map((r, i) => ('ok' in r ? r.ok : deserializeError(r.error, files[i]!.path)));
  throw failure(answer, `${files.length} files`);
}

function failure(answer: ToCheckWorker, path: string): Error {
  return answer.kind === 'hashFailed'
    ? deserializeError(answer.error, path)
    : new Error(`unexpected answer ${answer.kind} to a hashing call`);
}

/** The checked files, handed over in batches after the verdict; then dropped. */
let files: BagFile[] = [];
let sent = 0;

port.on('message', (message: ToCheckWorker) => {
  if (message.kind === 'check') {
    void check(message);
    return;
  }
  if (message.kind === 'files') {
    const batch = files.slice(sent, sent + message.count);
    sent += batch.length;
    const done = sent >= files.length;
    if (done) files = [];
    post({ kind: 'files', files: batch, done });
    return;
  }
  const call = waiting.get(message.id);
  waiting.delete(message.id);
  call?.settle(message);
});

/** Checks the upload; a throw ends the thread with an 'error' event, which the ingest turns into its failure. */
async function check({ dir, request, rules, batches }: CheckWorkerData): Promise<void> {
  // The ingest's hasher, seen from here: batches only if it takes them.
  const hasher: FileHasher = batches ? { hashFile, hashFiles } : { hashFile };
  const verdict = await checkUpload(dir, { hasher, request, rules });
  const { files: all, ...summary } = verdict.report;
  files = all;
  post({
    kind: 'verdict',
    report: { ...summary, fileCount: all.length },
    problems: verdict.problems,
    valid: verdict.valid,
  });
}
