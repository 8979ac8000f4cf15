/**
 * A fixity pool worker. Jobs arrive in batches and wait in a small local queue (the pool sends a
 * few ahead so the worker never idles on a message round trip, and takes them back when another
 * worker runs dry). Each job (one file, a batch of files, or a folder listing) runs synchronously
 * to the end, reading into one reused buffer.
 *
 * Between chunks the worker polls its port (receiveMessageOnPort) when the pool has rung its
 * mailbox counter, so a running job can be cancelled, can wait for its checkpoint to be saved,
 * and, if it is an audit job, can let ingest jobs run first (nested, one level deep). Audit
 * reads are throttled by the shared AuditRateLimit; the sleep is an Atomics.wait on the mailbox,
 * so a message still wakes it. Outcomes go back in batches, flushed before anything that may
 * take long (a second chunk, a sleep, an idle worker).
 */
import { lstatSync, readdirSync, type Dirent, type Stats } from 'node:fs';
import { parentPort, receiveMessageOnPort, workerData } from 'node:worker_threads';
import { createWasmHasherSet, type WasmHasherSet } from './digesters.js';
import { serializeError } from './errors.js';
import { hashFileNative, hashFileResumable, type ResumableHooks } from './hash-file.js';
import {
  MAIL,
  type BatchResult,
  SHARED_BYTES,
  type FromWorker,
  type JobMessage,
  type JobOutcome,
  type ListJobMessage,
  type ToWorker,
  type WorkerData,
} from './protocol.js';
import { AuditRateLimit } from './rate-limit.js';
import { errorCode, FolderEntriesBuilder, kindOf, type Tree } from './types.js';

if (!parentPort) throw new Error('src/fixity/worker.js runs only as a worker thread of FixityPool');
const port = parentPort;
const data = workerData as WorkerData;
const control = new Int32Array(data.control);
const shared = new BigInt64Array(data.shared);
const rateLimit = new AuditRateLimit(data.shared);

/** Outcomes held back at most this many, so the pool can refill our queue before it empties. */
const FLUSH_AT = 16;

/** Index = nesting depth: 0 for the job the worker picked, 1 for an ingest job run inside an audit job. */
const buffers: Buffer[] = [Buffer.allocUnsafe(data.readSize)];
let wasmSets: WasmHasherSet[] | undefined;

const ingestQueue: JobMessage[] = [];
const auditQueue: JobMessage[] = [];
const running: JobMessage[] = [];
const cancelled = new Set<number>();
const saved = new Set<number>();
let outbox: JobOutcome[] = [];
let seenMail = 0;
let draining = false;
/** The job at depth 0 is past its first chunk (or sleeping): the worker will be a while. */
let onLongJob = false;

/** Thrown through the hashing code to stop a cancelled job. */
const STOP = Symbol('stop');

function flush(): void {
  if (outbox.length === 0) return;
  const outcomes = outbox;
  outbox = [];
  port.postMessage({ t: 'outcomes', outcomes } satisfies FromWorker);
}

function report(outcome: JobOutcome): void {
  outbox.push(outcome);
  if (outbox.length >= FLUSH_AT) flush();
}

function send(message: FromWorker): void {
  flush(); // keep the pool's view in order
  port.postMessage(message);
}

function removeQueued(id: number): boolean {
  for (const queue of [ingestQueue, auditQueue]) {
    const i = queue.findIndex((job) => job.id === id);
    if (i >= 0) {
      queue.splice(i, 1);
      return true;
    }
  }
  return false;
}

function accept(message: ToWorker): void {
  switch (message.t) {
    case 'jobs':
      for (const job of message.jobs) (job.audit ? auditQueue : ingestQueue).push(job);
      break;
    case 'cancel':
      if (removeQueued(message.id)) report({ t: 'aborted', id: message.id });
      // A cancel for a job that already finished is simply late; only running jobs need the flag.
      else if (running.some((job) => job.id === message.id)) cancelled.add(message.id);
      break;
    case 'saved':
      saved.add(message.id);
      break;
    case 'giveBack': {
      const waiting = [...ingestQueue, ...auditQueue];
      const keep = onLongJob ? 0 : Math.ceil(waiting.length / 2);
      const kept = waiting.slice(0, keep);
      ingestQueue.length = 0;
      auditQueue.length = 0;
      for (const job of kept) (job.audit ? auditQueue : ingestQueue).push(job);
      send({ t: 'givenBack', ids: waiting.slice(keep).map((job) => job.id), onLongJob });
      break;
    }
  }
}

/** Takes in whatever the pool posted since we last looked; cheap when it posted nothing. */
function pump(): void {
  const mail = Atomics.load(control, MAIL);
  if (mail === seenMail) return;
  seenMail = mail;
  for (let received = receiveMessageOnPort(port); received; received = receiveMessageOnPort(port)) {
    accept(received.message as ToWorker);
  }
}

/** Between chunks: stop if cancelled; an audit job lets queued ingest jobs run first. */
function interrupt(job: JobMessage, depth: number): void {
  pump();
  if (cancelled.has(job.id)) throw STOP;
  if (depth === 0 && job.audit && data.preemption && ingestQueue.length > 0) {
    for (let next = ingestQueue.shift(); next; next = ingestQueue.shift()) run(next, 1);
    flush();
    if (cancelled.has(job.id)) throw STOP;
  }
}

/** Sleeps until the rate limit allows the next audit read, still answering messages. */
function throttle(job: JobMessage, depth: number, bytes: number): void {
  const until = rateLimit.charge(bytes);
  if (until === 0n || process.hrtime.bigint() >= until) return;
  flush(); // about to sleep: let the pool have the outcomes so far
  if (depth === 0) onLongJob = true;
  const generation = rateLimit.generation();
  for (;;) {
    const now = process.hrtime.bigint();
    if (now >= until) return;
    Atomics.wait(control, MAIL, seenMail, Math.ceil(Number(until - now) / 1e6));
    interrupt(job, depth);
    if (rateLimit.generation() !== generation) return; // the limit changed: its debts were reset
  }
}

function waitUntilSaved(job: JobMessage, depth: number): void {
  if (depth === 0) onLongJob = true;
  for (;;) {
    interrupt(job, depth);
    if (saved.delete(job.id)) return;
    Atomics.wait(control, MAIL, seenMail);
  }
}

/** Lists a folder tree without following links; stops between folders when cancelled. */
function listTree(job: ListJobMessage): Tree {
  let root: Stats;
  try {
    root = lstatSync(job.path);
  } catch (err) {
    return { root: { code: errorCode(err) }, dirs: [] };
  }
  if (!root.isDirectory()) return { root: { kind: kindOf(root) }, dirs: [] };
  const tree: Tree = { root: { ok: true }, dirs: [] };
  const pending = [''];
  for (let rel = pending.pop(); rel !== undefined; rel = pending.pop()) {
    pump();
    if (cancelled.has(job.id)) throw STOP;
    let entries: Dirent[];
    try {
      entries = readdirSync(rel === '' ? job.path : `${job.path}/${rel}`, { withFileTypes: true });
    } catch (err) {
      tree.dirs.push([rel, errorCode(err)]);
      continue;
    }
    const listed = new FolderEntriesBuilder();
    for (const entry of entries) {
      const kind = kindOf(entry);
      listed.add(entry.name, kind);
      if (kind === 'directory') pending.push(rel === '' ? entry.name : `${rel}/${entry.name}`);
    }
    tree.dirs.push([rel, listed.build()]);
  }
  return tree;
}

function run(job: JobMessage, depth: number): void {
  running.push(job);
  /** In a batch, only the batch's very first read counts as first: the job is long after that. */
  let later = false;
  const hooks: ResumableHooks = {
    beforeRead(first) {
      if (!first || later) {
        flush(); // a file longer than one chunk: let the pool hear about the others first
        if (depth === 0) onLongJob = true;
      }
      interrupt(job, depth);
    },
    afterRead(bytes) {
      Atomics.add(shared, SHARED_BYTES, BigInt(bytes));
      if (job.audit) throttle(job, depth, bytes);
    },
    started(offset, refused) {
      send({ t: 'started', id: job.id, offset, refused });
    },
    checkpoint(state) {
      send({ t: 'checkpoint', id: job.id, state });
      waitUntilSaved(job, depth);
    },
  };
  try {
    if (job.kind === 'list') {
      report({ t: 'tree', id: job.id, tree: listTree(job) });
      return;
    }
    const buffer = (buffers[depth] ??= Buffer.allocUnsafe(data.readSize));
    if (job.kind === 'batch') {
      const results: BatchResult[] = [];
      for (const [path, algorithms] of job.files) {
        try {
          results.push(hashFileNative(path, algorithms, job.crc32, buffer, hooks));
        } catch (err) {
          if (err === STOP) throw err;
          results.push({ error: serializeError(err) });
        }
        later = true;
      }
      report({ t: 'batch', id: job.id, results });
      return;
    }
    const result = job.resume
      ? hashFileResumable(job.path, job.algorithms, job.crc32, buffer, wasmSets![depth]!, job.resume, hooks)
      : hashFileNative(job.path, job.algorithms, job.crc32, buffer, hooks);
    report({ t: 'done', id: job.id, ...result });
  } catch (err) {
    report(
      err === STOP ? { t: 'aborted', id: job.id } : { t: 'fail', id: job.id, error: serializeError(err) },
    );
  } finally {
    running.pop();
    cancelled.delete(job.id);
    saved.delete(job.id);
    if (depth === 0) onLongJob = false;
  }
}

/** An audit job may host a nested resumable ingest job, hence two sets; made on first need. */
async function prepareWasm(job: JobMessage): Promise<boolean> {
  flush();
  running.push(job); // so that a cancel arriving meanwhile is kept
  try {
    wasmSets = await Promise.all([createWasmHasherSet(), createWasmHasherSet()]);
  } catch (err) {
    report({ t: 'fail', id: job.id, error: serializeError(err) });
    return false;
  } finally {
    running.pop();
  }
  if (cancelled.delete(job.id)) {
    report({ t: 'aborted', id: job.id });
    return false;
  }
  return true;
}

async function drain(): Promise<void> {
  if (draining) return;
  draining = true;
  try {
    for (;;) {
      pump();
      const job = ingestQueue.shift() ?? auditQueue.shift();
      if (!job) break;
      if ((job.audit || (job.kind === 'file' && job.resume)) && !wasmSets && !(await prepareWasm(job)))
        continue;
      run(job, 0);
    }
  } finally {
    draining = false;
    flush();
  }
}

port.on('message', (message: ToWorker) => {
  accept(message);
  void drain();
});
port.postMessage({ t: 'ready' } satisfies FromWorker);
