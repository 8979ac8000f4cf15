/**
 * The primary copy's OCFL object, for audits: its structure and inventories checked by our OCFL
 * validator without reading content (verify.ts reads and hashes every content file, once), and
 * the head version's inventory compared with the catalog: every recorded file's digest is the
 * manifest digest of its logical path, and its md5, sha1 and sha512 the inventory's fixity.
 * Nothing here writes; what it finds is a `Finding`.
 */
import { join } from 'node:path';
import type { FileRecord } from '../catalog/types.js';
import { errorCode, type Algorithm } from '../fixity/index.js';
import { INVENTORY } from '../ocfl/inventory.js';
import { fsReader, validateObject, type OcflReader } from '../ocfl/validate/index.js';
import { byPackageThenPath, type Finding } from './findings.js';
import { verifyPackage, type PackageHasher, type VerifyOptions } from './verify.js';

/** The digests OCFL keeps in `fixity` (ocfl/inventory.ts writes every other recorded one there). */
const FIXITY: readonly Algorithm[] = ['md5', 'sha1', 'sha512'];

/** An inventory as read back: only what the comparison needs, every part checked before use. */
interface ReadInventory {
  digestAlgorithm: string;
  head: string;
  manifest: Record<string, string[]>;
  versions: Record<string, { state: Record<string, string[]> }>;
  fixity?: Record<string, Record<string, string[]>>;
}

/**
 * The primary copy of a package checked as audits check it: its content (`contentDir`, verify.ts)
 * and its OCFL object (`objectDir`) at once. An OCFL error that only repeats what the content
 * check named (a missing, added or irregular content file) is left out; a package folder missing
 * or unreadable is the one finding.
 */
export async function verifyPrimary(
  objectDir: string,
  contentDir: string,
  files: Iterable<FileRecord>,
  hasher: PackageHasher,
  opts: VerifyOptions,
): Promise<Finding[]> {
  const [content, object] = await Promise.all([
    verifyPackage(contentDir, files, hasher, opts),
    checkObject(objectDir, files),
  ]);
  if (content.some((f) => f.code === 'package-missing' || f.code === 'package-unreadable')) return content;
  const named = new Set(content.flatMap((f) => ('path' in f ? [f.path, f.path.replace(/\/$/, '')] : [])));
  return [...content, ...withoutNamed(object, named)].sort(byPackageThenPath);
}

/**
 * `verifyPrimary` of a package with more than one version: each version's content folder against
 * the files whose bytes it holds (`content`: every content file of the object, each once, with its
 * content path; catalog/revisions.ts), the object against the current files. A finding in a
 * later version's content names its content path (`v2/content/data/a.txt`).
 */
export async function verifyPrimaryVersions(
  objectDir: string,
  current: Iterable<FileRecord>,
  content: readonly FileRecord[],
  hasher: PackageHasher,
  opts: VerifyOptions,
): Promise<Finding[]> {
  const byFolder = new Map<string, FileRecord[]>([['v1/content', []]]);
  for (const file of content) {
    const m = /^(v[0-9]+\/content)\/(.+)$/.exec(file.contentPath ?? `v1/content/${file.path}`);
    if (m === null) continue;
    const list = byFolder.get(m[1]!) ?? [];
    list.push({ ...file, path: m[2]! });
    byFolder.set(m[1]!, list);
  }
  const check = async ([folder, files]: [string, FileRecord[]]): Promise<Finding[]> => {
    const found = await verifyPackage(join(objectDir, folder), files, hasher, opts);
    if (folder === 'v1/content') return found;
    return found.map((f) => ('path' in f ? { ...f, path: `${folder}/${f.path}` } : f));
  };
  const [contents, object] = await Promise.all([
    Promise.all([...byFolder].map(check)),
    checkObject(objectDir, current),
  ]);
  const found = contents.flat();
  if (found.some((f) => f.code === 'package-missing' || f.code === 'package-unreadable')) return found;
  const named = new Set(found.flatMap((f) => ('path' in f ? [f.path, f.path.replace(/\/$/, '')] : [])));
  return [...found, ...withoutNamed(object, named)].sort(byPackageThenPath);
}

/**
 * Findings on the object at `objectDir` (absolute): one `object-invalid` naming every OCFL error,
 * or, for a valid object, an `inventory-differs` per file whose digests the inventory and the
 * catalog do not agree on. The root inventory is read once, by the validator.
 */
async function checkObject(objectDir: string, files: Iterable<FileRecord>): Promise<Finding[]> {
  let inventory: Buffer | undefined;
  const disk = fsReader(objectDir);
  // The validator's own read of the root inventory is the one the comparison uses.
  const reader: OcflReader = {
    ...disk,
    read: async (path) => {
      const bytes = await disk.read(path);
      if (path === INVENTORY) inventory = bytes;
      return bytes;
    },
  };
  let report;
  try {
    report = await validateObject(reader, '', { digests: false });
  } catch (err) {
    // Something in the object could not be listed or read (EACCES, EIO): the package, unreadable.
    return [{ code: 'package-unreadable', reason: errorCode(err) }];
  }
  const errors = report.problems.filter((p) => p.severity === 'error');
  if (errors.length > 0)
    return [{ code: 'object-invalid', problems: errors.map((p) => ({ code: p.code, path: p.path })) }];
  return inventoryDiffers(JSON.parse(inventory!.toString('utf8')) as ReadInventory, files);
}

/** Drops the OCFL errors about content that the content check already named (`named`: its paths). */
function withoutNamed(findings: Finding[], named: ReadonlySet<string>): Finding[] {
  return findings.flatMap((f): Finding[] => {
    if (f.code !== 'object-invalid') return [f];
    const problems = f.problems.filter((p) => !CONTENT_CODES.has(p.code) || !named.has(bagPathOf(p.path)));
    return problems.length === 0 ? [] : [{ ...f, problems }];
  });
}

/** OCFL errors that follow from a content file missing, added or not a regular file. */
const CONTENT_CODES = new Set(['E023', 'E024', 'E090', 'E092', 'E093']);

/** `v1/content/data/a.txt` → `data/a.txt`, the path the content check names it by. */
const bagPathOf = (path: string): string => path.replace(/^v1\/content\//, '');

function inventoryDiffers(inv: ReadInventory, files: Iterable<FileRecord>): Finding[] {
  const findings: Finding[] = [];
  const differs = (path: string, reason: string) =>
    findings.push({ code: 'inventory-differs', path, reason });
  const algorithm = inv.digestAlgorithm as Algorithm;
  // logical path → its digest in the head version's state; what is left at the end the catalog lacks.
  const state = new Map<string, string>();
  for (const [digest, paths] of Object.entries(inv.versions[inv.head]!.state))
    for (const path of paths) state.set(path, digest);
  const fixity = new Map<string, Map<string, string>>();
  for (const a of FIXITY) {
    const byPath = new Map<string, string>();
    for (const [digest, paths] of Object.entries(inv.fixity?.[a] ?? {}))
      for (const path of paths) byPath.set(path, digest.toLowerCase());
    fixity.set(a, byPath);
  }
  for (const file of files) {
    const digest = state.get(file.path);
    state.delete(file.path);
    if (digest === undefined) {
      differs(file.path, `the head version ${inv.head} does not hold it`);
      continue;
    }
    const recorded = file.digests[algorithm];
    // A file without this digest is reported by the content check (digest-not-recorded).
    if (recorded !== undefined && recorded.toLowerCase() !== digest.toLowerCase()) {
      differs(file.path, `${algorithm} is ${digest} in the inventory, ${recorded} in the catalog`);
      continue;
    }
    const contentPath = inv.manifest[digest]?.[0] ?? '';
    for (const a of FIXITY) {
      const listed = fixity.get(a)!.get(contentPath);
      const own = file.digests[a]?.toLowerCase();
      if (listed !== own)
        differs(
          file.path,
          `${a} is ${listed ?? 'absent'} in the inventory, ${own ?? 'absent'} in the catalog`,
        );
    }
  }
  for (const path of state.keys())
    differs(path, `the head version ${inv.head} holds it, the catalog does not`);
  return findings;
}
