/**
 * A stored package as ingest leaves one, for the download tests: a bag written under
 * `<tmp>/storage/ab/cd/ef/<bag_id>/`, its files recorded in a real catalog (size, CRC-32 from
 * `zlib.crc32`, sha256), and a minimal fastify app serving it through `sendFile`/`sendZip` the
 * way the download routes do (names resolved through the catalog only). Also small HTTP and
 * Python helpers the tests share.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { crc32 } from 'node:zlib';
import Fastify, { type FastifyInstance } from 'fastify';
import { Catalog } from '../../src/catalog/catalog.js';
import type { FileRecord } from '../../src/catalog/types.js';
import { sendFile, sendZip, type Offload } from '../../src/download/index.js';
import { Storage } from '../../src/storage/storage.js';
import { makeBag } from '../helpers/make-bag.js';

export const run = promisify(execFile);

export interface Teardown {
  teardown(fn: () => unknown): void;
}

export interface StoredBag {
  dataDir: string;
  catalog: Catalog;
  storage: Storage;
  bagId: string;
  storagePath: string;
  /** Absolute package folder. */
  dir: string;
  /** The catalog's records, sorted by path. */
  files: FileRecord[];
}

/** Payload files of the default fixture (paths relative to `data/`). */
export function defaultPayload(): Record<string, Buffer> {
  const wav = Buffer.alloc(3 * (1 << 20) + 12_345);
  for (let i = 0; i < wav.length; i++) wav[i] = (i * 2654435761) >>> 24;
  return {
    'a.txt': Buffer.from('hello world\n'),
    'audio/take1.wav': wav,
    'nested/deep/dir/notes.md': Buffer.from('# notes\n\nsome notes\n'),
    'nested/café – ünïcode 日本.txt': Buffer.from('non-ASCII name\n'),
    'empty.bin': Buffer.alloc(0),
    'say "hi".json': Buffer.from('{"hi":true}\n'),
    'images/scan.tif': Buffer.from(Array.from({ length: 100_000 }, (_, i) => i % 251)),
  };
}

function walk(root: string, dir = ''): string[] {
  const out: string[] = [];
  for (const name of readdirSync(join(root, dir)).sort()) {
    const rel = dir === '' ? name : `${dir}/${name}`;
    if (statSync(join(root, rel)).isDirectory()) out.push(...walk(root, rel));
    else out.push(rel);
  }
  return out;
}

/** The record ingest would write for one stored file (whole file read: test sizes only). */
export function recordOf(dir: string, path: string): FileRecord {
  const bytes = readFileSync(join(dir, path));
  return {
    path,
    size: bytes.length,
    crc32: crc32(bytes).toString(16).padStart(8, '0'),
    digests: { sha256: createHash('sha256').update(bytes).digest('hex') },
  };
}

/**
 * Writes and catalogs a stored bag under `root` (default the OS temporary folder). `extra(dir)`
 * may add files the bag writer should not read (a sparse giant) and return their records.
 */
export async function makeStoredBag(
  t: Teardown,
  opts: { payload?: Record<string, Buffer>; extra?: (dir: string) => Promise<FileRecord[]>; root?: string } = {},
): Promise<StoredBag> {
  const dataDir = mkdtempSync(join(opts.root ?? tmpdir(), 'preservd-download-'));
  const storage = new Storage(dataDir);
  await storage.ensureLayout();
  const bagId = 'abcdef01-2345-4789-8bcd-ef0123456789';
  const storagePath = Storage.storagePath(bagId);
  const dir = storage.packageDir(storagePath);
  await makeBag(dir, { files: opts.payload ?? defaultPayload(), algorithms: ['sha256'] });
  const extra = opts.extra === undefined ? [] : await opts.extra(dir);
  const extraPaths = new Set(extra.map((r) => r.path));
  const files = [...walk(dir).filter((p) => !extraPaths.has(p)).map((p) => recordOf(dir, p)), ...extra].sort((a, b) =>
    a.path < b.path ? -1 : a.path > b.path ? 1 : 0,
  );
  const catalog = Catalog.open(dataDir);
  catalog.packages.create({ bagId, externalId: 'ext-1', contentType: 'audio', user: 'alice', capability: 'cap' });
  catalog.packages.putFiles(bagId, files);
  catalog.packages.markStored(bagId, storagePath);
  t.teardown(async () => {
    await catalog.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
  return { dataDir, catalog, storage, bagId, storagePath, dir, files: catalog.packages.listFiles(bagId) };
}

/** A fastify app with the two download routes over `bag`, listening on 127.0.0.1:0. */
export async function serveBag(t: Teardown, bag: StoredBag, opts: { offload?: Offload; storedAt?: number } = {}): Promise<{ app: FastifyInstance; base: string }> {
  const app = Fastify({ logger: false });
  app.get('/zip', async (request, reply) => {
    const zip: Parameters<typeof sendZip>[2] = { bagId: bag.bagId, dir: bag.dir, files: bag.catalog.packages.listFiles(bag.bagId) };
    if (opts.storedAt !== undefined) zip.storedAt = opts.storedAt;
    return sendZip(request, reply, zip);
  });
  app.get<{ Params: { '*': string } }>('/files/*', async (request, reply) => {
    const record = bag.catalog.packages.file(bag.bagId, `data/${request.params['*']}`);
    if (record === undefined) return reply.code(404).send({ error: 'no such file' });
    const file = {
      absPath: Storage.resolveInside(bag.dir, record.path),
      storageRelativePath: `${bag.storagePath}/${record.path}`,
      record,
    };
    return opts.offload === undefined ? sendFile(request, reply, file) : sendFile(request, reply, file, { offload: opts.offload });
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(() => app.close());
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return { app, base: `http://127.0.0.1:${port}` };
}

/** URL path of a payload file (segments percent-encoded). */
export function fileUrl(base: string, payloadPath: string): string {
  return `${base}/files/${payloadPath.split('/').map(encodeURIComponent).join('/')}`;
}

export const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

export interface RawResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** The response ended cleanly (false: the connection was cut). */
  complete: boolean;
  error?: Error;
}

/**
 * A GET with node:http that reports a cut connection instead of hiding it. Once `pauseAfter`
 * bytes (default 1) have arrived, the response is paused while `onPause` runs, then resumed; if
 * `onPause` rejects, the client hangs up.
 */
export function rawGet(
  url: string,
  opts: { headers?: Record<string, string>; pauseAfter?: number; onPause?: () => Promise<void> } = {},
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { headers: { connection: 'close', ...opts.headers } }, (res) => {
      const chunks: Buffer[] = [];
      let received = 0;
      let paused = false;
      let settled = false;
      const finish = (complete: boolean, error?: Error) => {
        if (settled) return;
        settled = true;
        const out: RawResponse = { status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks), complete };
        if (error !== undefined) out.error = error;
        resolve(out);
      };
      res.on('data', (chunk: Buffer) => {
        chunks.push(chunk);
        received += chunk.length;
        if (!paused && opts.onPause !== undefined && received >= (opts.pauseAfter ?? 1)) {
          paused = true;
          res.pause();
          opts.onPause().then(
            () => res.resume(),
            (err: Error) => {
              finish(false, err);
              req.destroy();
            },
          );
        }
      });
      res.on('end', () => finish(res.complete));
      res.on('error', (err) => finish(false, err));
      res.on('close', () => finish(res.complete));
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * What Python's zipfile makes of an archive: testzip(), each entry's name, size and sha256, and
 * the ZIP64 facts; or the error it raised.
 */
export async function pythonZipReport(zipPath: string): Promise<
  | { ok: true; testzip: string | null; entries: Array<{ name: string; size: number; sha256: string; offset: number }> }
  | { ok: false; error: string }
> {
  const script = `
import hashlib, json, sys, zipfile
try:
    with zipfile.ZipFile(sys.argv[1]) as z:
        bad = z.testzip()
        entries = []
        for info in z.infolist():
            h = hashlib.sha256()
            with z.open(info) as f:
                while True:
                    b = f.read(1 << 20)
                    if not b: break
                    h.update(b)
            entries.append({"name": info.filename, "size": info.file_size, "sha256": h.hexdigest(), "offset": info.header_offset})
        print(json.dumps({"ok": True, "testzip": bad, "entries": entries}))
except Exception as e:
    print(json.dumps({"ok": False, "error": type(e).__name__ + ": " + str(e)}))
`;
  const { stdout } = await run('python3', ['-c', script, zipPath], { maxBuffer: 16 << 20 });
  return JSON.parse(stdout);
}

/** `unzip -t` (with more arguments, e.g. `-x <entry>`): exit code and output. */
export async function unzipTest(zipPath: string, args: string[] = []): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await run('unzip', ['-t', zipPath, ...args], { maxBuffer: 16 << 20 });
    return { code: 0, output: stdout + stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, output: (e.stdout ?? '') + (e.stderr ?? '') };
  }
}
