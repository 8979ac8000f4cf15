/**
 * A small filesystem of its own for tests of a full disk: tmpfs where it may be mounted, else
 * ext4 on a loop device; and a filler that takes its free space away. Mounting needs root (or
 * CAP_SYS_ADMIN); without it `mountSmallFilesystem` says why, for the test to skip.
 */
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import {
  closeSync,
  fstatSync,
  ftruncateSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  rmSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface SmallFilesystem {
  dir: string;
  kind: string;
  unmount(): void;
}

function run(cmd: string, args: string[]): string | undefined {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.error !== undefined) return `${cmd}: ${r.error.message}`;
  return r.status === 0 ? undefined : `${cmd} ${args.join(' ')}: ${(r.stderr || r.stdout).trim()}`;
}

/** A fresh filesystem of `sizeMB`: tmpfs if it may be mounted, else ext4 on a loop device. */
export function mountSmallFilesystem(sizeMB: number): SmallFilesystem | { skip: string } {
  const base = mkdtempSync(join(tmpdir(), 'preservd-smallfs-'));
  const dir = join(base, 'mnt');
  mkdirSync(dir);
  const cleanup = () => rmSync(base, { recursive: true, force: true });
  const unmount = () => {
    if (run('umount', [dir]) !== undefined) run('umount', ['-l', dir]);
    cleanup();
  };
  const tmpfs = run('mount', ['-t', 'tmpfs', '-o', `size=${sizeMB}m,mode=0755`, 'preservd-test', dir]);
  if (tmpfs === undefined) return { dir, kind: 'tmpfs', unmount };
  const image = join(base, 'fs.img');
  const loop =
    run('truncate', ['-s', `${sizeMB}M`, image]) ??
    run('mkfs.ext4', ['-q', '-F', '-m', '0', image]) ??
    run('mount', ['-o', 'loop', image, dir]);
  if (loop === undefined) return { dir, kind: 'ext4 on a loop device', unmount };
  cleanup();
  return { skip: `cannot mount a small filesystem here (needs root or CAP_SYS_ADMIN): ${tmpfs}; ${loop}` };
}

/** Takes away all free space but `leave` bytes; returns the filler's path (unlink it to free). */
export function fill(dir: string, leave = 0): string {
  const path = join(dir, `filler-${randomUUID()}`);
  const fd = openSync(path, 'w');
  try {
    for (const chunk of [Buffer.alloc(1 << 20, 0xaa), Buffer.alloc(4096, 0xaa)]) {
      for (;;) {
        try {
          writeSync(fd, chunk);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'ENOSPC') break;
          throw err;
        }
      }
    }
    if (leave > 0) ftruncateSync(fd, Math.max(0, fstatSync(fd).size - leave));
  } finally {
    closeSync(fd);
  }
  return path;
}
