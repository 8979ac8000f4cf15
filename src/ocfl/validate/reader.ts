/**
 * What the validator reads through: a folder's entries, one entry's kind and size, a file's bytes
 * or its stream. Paths are relative to the reader's root, `/`-separated, `''` for the root. The
 * filesystem reader is here; an S3 reader (prefix listings with a delimiter) can implement the same.
 */
import { createReadStream } from 'node:fs';
import { lstat, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';

/** `other`: a symbolic link, a device, a FIFO or a socket, none of which belongs in OCFL storage. */
type EntryKind = 'file' | 'dir' | 'other';

export interface Entry {
  name: string;
  kind: EntryKind;
}

export interface OcflReader {
  /** The entries of a folder, or undefined when there is no folder at `path`. */
  list(path: string): Promise<Entry[] | undefined>;
  /** The kind and size of what is at `path`, or undefined when nothing is. */
  stat(path: string): Promise<{ kind: EntryKind; size: number } | undefined>;
  read(path: string): Promise<Buffer>;
  stream(path: string): AsyncIterable<Uint8Array>;
}

const kindOf = (e: { isFile(): boolean; isDirectory(): boolean }): EntryKind =>
  e.isFile() ? 'file' : e.isDirectory() ? 'dir' : 'other';

const missing = (err: unknown): boolean => {
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'ENOENT' || code === 'ENOTDIR';
};

/** A reader of the folder `root` on a local filesystem; links are reported, never followed. */
export function fsReader(root: string): OcflReader {
  const at = (path: string) => join(root, path);
  return {
    async list(path) {
      try {
        const entries = await readdir(at(path), { withFileTypes: true });
        return entries.map((e) => ({ name: e.name, kind: kindOf(e) }));
      } catch (err) {
        if (missing(err)) return undefined;
        throw err;
      }
    },
    async stat(path) {
      try {
        const s = await lstat(at(path));
        return { kind: kindOf(s), size: s.size };
      } catch (err) {
        if (missing(err)) return undefined;
        throw err;
      }
    },
    read: (path) => readFile(at(path)),
    stream: (path) => createReadStream(at(path), { highWaterMark: 1 << 20 }),
  };
}
