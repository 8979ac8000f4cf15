/**
 * One OCFL storage root read through a replica target's `list` and `open` (a folder, the
 * primary's `storage/` included, or an S3 bucket and prefix): its objects' folders, the files of
 * one object, and small files whole. For the rebuild, which must work from any one root.
 */
import type { Readable } from 'node:stream';
import type { ReplicaTarget } from '../replicas/index.js';

/** A layout-0003 object folder: three tuples of three hex digits, then the encoded id. */
const OBJECT_FOLDER = /^([0-9a-f]{3}\/[0-9a-f]{3}\/[0-9a-f]{3}\/[^/]+)\/./;

/** Largest file read whole (an inventory, a record): bigger is not something preservd wrote. */
const MAX_WHOLE = 256 * 1024 * 1024;

export class RootReader {
  constructor(readonly target: ReplicaTarget) {}

  /** Keys as the root names them (a folder target's walk of the whole root starts them with `/`). */
  private static relative(key: string): string {
    return key.replace(/^\/+/, '');
  }

  /**
   * The folder of every object under the root, in the listing's order (each object's keys come
   * together in a folder's sorted walk and in S3's key order alike), and the root's other files.
   */
  async *objects(signal?: AbortSignal): AsyncGenerator<string> {
    let last: string | undefined;
    for await (const { key } of this.target.list('', signal)) {
      const folder = OBJECT_FOLDER.exec(RootReader.relative(key))?.[1];
      if (folder === undefined || folder === last) continue;
      last = folder;
      yield folder;
    }
  }

  /** The files of one object: path inside the object → size. */
  async filesOf(object: string, signal?: AbortSignal): Promise<Map<string, number>> {
    const files = new Map<string, number>();
    const prefix = `${object}/`;
    for await (const { key, size } of this.target.list(prefix, signal)) {
      const rel = RootReader.relative(key);
      if (rel.startsWith(prefix)) files.set(rel.slice(prefix.length), size);
    }
    return files;
  }

  /**
   * A file's bytes as a stream, or undefined when it is missing. With the size the listing gave,
   * the read asks for one byte more (a file grown since shows as such) and a folder target's
   * stream takes a buffer of that size, not of a whole 1 MiB read, for each small file.
   */
  open(key: string, signal?: AbortSignal, listedSize?: number): Promise<Readable | undefined> {
    const range = listedSize !== undefined && listedSize > 0 ? { start: 0, end: listedSize } : undefined;
    return this.target.open(key, range, signal);
  }

  /** A small file whole, or undefined when it is missing. */
  async read(key: string, signal?: AbortSignal): Promise<Buffer | undefined> {
    const stream = await this.open(key, signal);
    if (stream === undefined) return undefined;
    const chunks: Buffer[] = [];
    let length = 0;
    for await (const chunk of stream) {
      length += (chunk as Buffer).length;
      if (length > MAX_WHOLE) {
        stream.destroy();
        throw new Error(`${key} is larger than ${MAX_WHOLE} bytes`);
      }
      chunks.push(chunk as Buffer);
    }
    return Buffer.concat(chunks);
  }
}
