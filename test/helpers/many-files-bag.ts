/**
 * A valid bag of many tiny payload files, written fast (one sha256 manifest, 1,000 files to a
 * folder, Payload-Oxum), for the tests that measure memory against the file count.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Writes the bag into `dir`; it has `files` payload files and three tag files. */
export function writeManyFilesBag(dir: string, files: number): void {
  const lines: string[] = [];
  let bytes = 0;
  for (let i = 0; i < files; i++) {
    const rel = `data/d${Math.floor(i / 1000)}/f${i}.txt`;
    if (i % 1000 === 0) mkdirSync(join(dir, rel, '..'), { recursive: true });
    const content = `${i}\n`;
    writeFileSync(join(dir, rel), content);
    bytes += content.length;
    lines.push(`${createHash('sha256').update(content).digest('hex')}  ${rel}\n`);
  }
  writeFileSync(join(dir, 'manifest-sha256.txt'), lines.join(''));
  writeFileSync(join(dir, 'bagit.txt'), 'BagIt-Version: 1.0\nTag-File-Character-Encoding: UTF-8\n');
  writeFileSync(join(dir, 'bag-info.txt'), `Payload-Oxum: ${bytes}.${files}\n`);
}
