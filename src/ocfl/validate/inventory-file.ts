/**
 * An inventory as a file: read and parsed (E033), and its sidecar `inventory.json.<algorithm>`,
 * which must exist (E058), read `<digest> inventory.json` (E061) and give the file's digest (E060).
 */
import type { Findings } from './codes.js';
import { digestBytes, normalDigest } from './digests.js';
import type { OcflReader } from './reader.js';

export const INVENTORY = 'inventory.json';
export const joinPath = (...parts: string[]): string => parts.filter((p) => p !== '').join('/');

/** The bytes and parsed JSON of `<dir>/inventory.json`, or undefined (reported) when it cannot be parsed. */
export async function readInventory(
  reader: OcflReader,
  dir: string,
  findings: Findings,
): Promise<{ bytes: Buffer; json: unknown } | undefined> {
  const path = joinPath(dir, INVENTORY);
  const bytes = await reader.read(path);
  try {
    return { bytes, json: JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes)) as unknown };
  } catch (err) {
    findings.add('E033', path, `the inventory is not JSON in UTF-8 (${(err as Error).message})`);
    return undefined;
  }
}

export async function checkSidecar(
  reader: OcflReader,
  dir: string,
  algorithm: string,
  inventory: Buffer,
  findings: Findings,
): Promise<void> {
  const path = joinPath(dir, `${INVENTORY}.${algorithm}`);
  if ((await reader.stat(path))?.kind !== 'file')
    return findings.add('E058', path, `there is no ${algorithm} sidecar beside the inventory`);
  const text = (await reader.read(path)).toString('utf8');
  const m = /^([0-9a-fA-F]+)[ \t]+inventory\.json\r?\n?$/.exec(text);
  if (m === null) return findings.add('E061', path, 'the sidecar is not "<digest> inventory.json"');
  const actual = await digestBytes(algorithm, inventory);
  if (actual !== normalDigest(m[1]!))
    findings.add(
      'E060',
      path,
      `the sidecar gives ${m[1]!}, the inventory's ${algorithm} is ${actual ?? '?'}`,
    );
}
