/**
 * Writes BagIt bags for tests: by default a valid BagIt 1.0 bag (bagit.txt, bag-info.txt with
 * Payload-Oxum, md5 and sha256 payload manifests, tag manifests over every tag file), with
 * options to add chipmunk-info.txt and to break the bag in the ways tests need. Digests are
 * computed here with node:crypto, independently of the code under test.
 *
 *   const dir = await makeBag(t.testdir(), { files: { 'a.txt': 'hello\n' } });
 *
 * `files` keys are payload paths relative to `data/`; `extraTagFiles` keys are relative to the
 * bag root.
 */
import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Algorithm } from '../../src/fixity/index.js';
import { filesUnder } from './walk.js';

interface ChipmunkInfoOptions {
  externalId: string;
  bagId: string;
  contentType: string;
  /** The three Metadata-* tags; `content` is written to the tag file (null: do not write it). */
  metadata?: { url: string; type: string; tagfile: string; content?: string | Buffer | null };
}

export interface MakeBagOptions {
  /** Payload files, keyed by path relative to `data/`. */
  files: Record<string, string | Buffer>;
  /** Payload manifest algorithms. Default md5 and sha256. */
  algorithms?: Algorithm[];
  /** Tag manifest algorithms; default the payload ones; false writes no tag manifest. */
  tagAlgorithms?: Algorithm[] | false;
  /** BagIt-Version. Default '1.0'. */
  version?: string;
  /** Extra bag-info.txt entries, in order; false writes no bag-info.txt. */
  bagInfo?: Record<string, string> | Array<[string, string]> | false;
  /** Payload-Oxum to write instead of the true one; false leaves it out. */
  payloadOxum?: string | false;
  chipmunkInfo?: ChipmunkInfoOptions;
  /** More tag files, keyed by path relative to the bag root; listed in the tag manifests. */
  extraTagFiles?: Record<string, string | Buffer>;
  /** Payload paths (relative to `data/`) left out of every payload manifest. */
  unlisted?: string[];
  /**
   * Bag paths (relative to the bag root) whose bytes change after the manifests are written: same
   * length, first byte flipped, mtime set to 2000-01-01.
   */
  corrupt?: string[];
  /** Raw bagit.txt content instead of the correct one (written before the tag manifests). */
  bagitTxt?: string | Buffer;
  /**
   * Every file's mtime (default: now, in whole seconds). A bag uploaded over another of the same
   * request needs one of its own: rsync's quick check (size and mtime) would skip a tag manifest of
   * the same size and other bytes.
   */
  mtime?: Date;
}

const CORRUPT_MTIME = new Date('2000-01-01T00:00:00Z');

function digest(algorithm: Algorithm, bytes: Buffer): string {
  return createHash(algorithm).update(bytes).digest('hex');
}

/** Escape a path the way RFC 8493 manifests do (`%25` only from 1.0). */
function encodeManifestPath(path: string, version: string): string {
  const percent = Number(version.split('.')[0]) >= 1 ? path.replace(/%/g, '%25') : path;
  return percent.replace(/\r/g, '%0D').replace(/\n/g, '%0A');
}

async function put(root: string, rel: string, content: string | Buffer): Promise<void> {
  const abs = join(root, rel);
  await mkdir(dirname(abs), { recursive: true });
  await writeFile(abs, content);
}

interface ManifestOptions {
  algorithms?: Algorithm[];
  tagAlgorithms?: Algorithm[] | false;
  version?: string;
  /** Payload paths relative to the bag root (`data/...`) to leave out. */
  unlisted?: string[];
}

/**
 * (Re)write every payload manifest and tag manifest of the bag at `dir` from what is on disk.
 * Existing manifests are replaced. Tag manifests list every tag file except tag manifests.
 */
export async function writeManifests(dir: string, opts: ManifestOptions = {}): Promise<void> {
  const algorithms = opts.algorithms ?? ['md5', 'sha256'];
  const tagAlgorithms = opts.tagAlgorithms === undefined ? algorithms : opts.tagAlgorithms;
  const version = opts.version ?? '1.0';
  const unlisted = new Set(opts.unlisted ?? []);
  for (const name of await readdir(dir)) {
    if (/^(tag)?manifest-.+\.txt$/.test(name)) await rm(join(dir, name));
  }
  const all = filesUnder(dir, { regularOnly: true });
  const payload = all.filter((p) => p.startsWith('data/') && !unlisted.has(p));
  const contents = new Map<string, Buffer>();
  for (const p of all) contents.set(p, await readFile(join(dir, p)));
  for (const a of algorithms) {
    const lines = payload.map((p) => `${digest(a, contents.get(p)!)}  ${encodeManifestPath(p, version)}\n`);
    await writeFile(join(dir, `manifest-${a}.txt`), lines.join(''));
  }
  if (tagAlgorithms === false) return;
  const tagFiles = filesUnder(dir, { regularOnly: true }).filter(
    (p) => !p.startsWith('data/') && !/^tagmanifest-.+\.txt$/.test(p),
  );
  for (const a of tagAlgorithms) {
    const lines: string[] = [];
    for (const p of tagFiles)
      lines.push(`${digest(a, await readFile(join(dir, p)))}  ${encodeManifestPath(p, version)}\n`);
    await writeFile(join(dir, `tagmanifest-${a}.txt`), lines.join(''));
  }
}

/** Write a bag into `dir` (created if needed) and return `dir`. */
export async function makeBag(dir: string, opts: MakeBagOptions): Promise<string> {
  const version = opts.version ?? '1.0';
  await mkdir(join(dir, 'data'), { recursive: true });
  let bytes = 0;
  for (const [rel, content] of Object.entries(opts.files)) {
    await put(dir, `data/${rel}`, content);
    bytes += Buffer.byteLength(content);
  }
  await writeFile(
    join(dir, 'bagit.txt'),
    opts.bagitTxt ?? `BagIt-Version: ${version}\nTag-File-Character-Encoding: UTF-8\n`,
  );

  if (opts.bagInfo !== false) {
    const entries: Array<[string, string]> = [['Bagging-Date', '2026-11-22']];
    if (opts.payloadOxum !== false)
      entries.push(['Payload-Oxum', opts.payloadOxum ?? `${bytes}.${Object.keys(opts.files).length}`]);
    if (opts.bagInfo !== undefined)
      entries.push(...(Array.isArray(opts.bagInfo) ? opts.bagInfo : Object.entries(opts.bagInfo)));
    await writeFile(join(dir, 'bag-info.txt'), entries.map(([k, v]) => `${k}: ${v}\n`).join(''));
  }

  if (opts.chipmunkInfo !== undefined) {
    const c = opts.chipmunkInfo;
    const lines = [
      `External-Identifier: ${c.externalId}`,
      `Chipmunk-Content-Type: ${c.contentType}`,
      `Bag-ID: ${c.bagId}`,
    ];
    if (c.metadata !== undefined) {
      lines.push(
        `Metadata-URL: ${c.metadata.url}`,
        `Metadata-Type: ${c.metadata.type}`,
        `Metadata-Tagfile: ${c.metadata.tagfile}`,
      );
      const content = c.metadata.content === undefined ? '' : c.metadata.content;
      if (content !== null) await put(dir, c.metadata.tagfile, content);
    }
    await writeFile(join(dir, 'chipmunk-info.txt'), lines.map((l) => `${l}\n`).join(''));
  }
  for (const [rel, content] of Object.entries(opts.extraTagFiles ?? {})) await put(dir, rel, content);

  const manifestOptions: ManifestOptions = {
    version,
    unlisted: (opts.unlisted ?? []).map((p) => `data/${p}`),
  };
  if (opts.algorithms !== undefined) manifestOptions.algorithms = opts.algorithms;
  if (opts.tagAlgorithms !== undefined) manifestOptions.tagAlgorithms = opts.tagAlgorithms;
  await writeManifests(dir, manifestOptions);
  // A minute back, in whole seconds: rsync's quick check compares whole seconds, so a file a test
  // changes at the same size within the second the bag was made would not be sent again.
  const mtime = opts.mtime ?? new Date((Math.floor(Date.now() / 1000) - 60) * 1000);
  for (const rel of filesUnder(dir, { regularOnly: true })) await utimes(join(dir, rel), mtime, mtime);

  for (const rel of opts.corrupt ?? []) {
    const abs = join(dir, rel);
    const old = await readFile(abs);
    // Same length, different bytes: only the digests can tell.
    const changed = Buffer.from(old);
    if (changed.length === 0) await writeFile(abs, 'x');
    else {
      changed[0] = changed[0]! ^ 0xff;
      await writeFile(abs, changed);
    }
    // An old mtime, so rsync's quick check (size and mtime) never takes the corrupt file for a
    // good copy made in the same second, nor the reverse.
    await utimes(abs, CORRUPT_MTIME, CORRUPT_MTIME);
  }
  return dir;
}
