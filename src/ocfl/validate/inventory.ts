/**
 * One inventory read on its own (spec §3.5): its keys, manifest and fixity blocks; the versions
 * block is versions.ts. Trusts nothing: every value is checked for its JSON type before it is used,
 * and what passes is handed on as facts the object checks build on (what the content must match).
 */
import type { Findings, OcflCode } from './codes.js';
import { CONTENT_ALGORITHMS, isDigestOf, isKnownAlgorithm, normalDigest } from './digests.js';
import { isObject, isUri, type Json } from './json.js';
import { pathFault, PathSet } from './paths.js';
import { checkVersions, type VersionFacts } from './versions.js';

/** What an inventory that could be read says, for the checks of the object's files. */
export interface InventoryFacts extends VersionFacts {
  json: Json;
  id: string | undefined;
  specVersion: string;
  digestAlgorithm: string;
  contentDirectory: string;
  contentDirectorySet: boolean;
  head: unknown;
  /** content path → digest as written (its case kept: state keys must match it exactly). */
  manifest: Map<string, string>;
  /** algorithm → content path → lower-case digest. */
  fixity: Map<string, Map<string, string>>;
}

const KEYS = ['id', 'type', 'digestAlgorithm', 'head', 'contentDirectory', 'fixity', 'manifest', 'versions'];
const TYPE = /^https:\/\/ocfl\.io\/(1\.0|1\.1)\/spec\/#inventory$/;

/** Reports into `findings` against the file `where`; undefined when too little is readable to go on. */
export function checkInventory(
  value: unknown,
  where: string,
  findings: Findings,
): InventoryFacts | undefined {
  const err = (code: OcflCode, detail: string) => findings.add(code, where, detail);
  if (!isObject(value)) return void err('E033', 'the inventory is not a JSON object');
  for (const key of Object.keys(value))
    if (!KEYS.includes(key)) err('E102', `the inventory has the key "${key}", which OCFL does not define`);
  for (const key of ['id', 'type', 'digestAlgorithm', 'head'])
    if (!(key in value)) err('E036', `the inventory has no "${key}"`);
  const id = checkId(value.id, err);
  const specVersion = checkType(value.type, err);
  const algorithm = value.digestAlgorithm;
  if (
    'digestAlgorithm' in value &&
    (typeof algorithm !== 'string' || !CONTENT_ALGORITHMS.includes(algorithm))
  )
    return void err('E025', `digestAlgorithm is ${JSON.stringify(algorithm)}, not sha512 or sha256`);
  if (algorithm === 'sha256') err('W004', 'content is addressed with sha256');
  const digestAlgorithm = typeof algorithm === 'string' ? algorithm : 'sha512';
  const contentDirectory = checkContentDirectory(value, err);
  const manifest = checkManifest(value, digestAlgorithm, contentDirectory ?? 'content', err);
  const versions = checkVersions(value, digestAlgorithm, manifest, err);
  if (versions.sequence.length > 0 && 'head' in value && value.head !== versions.sequence.at(-1))
    err('E040', `head is ${JSON.stringify(value.head)}, the last version is ${versions.sequence.at(-1)}`);
  for (const path of manifest.keys()) {
    const version = path.split('/')[0]!;
    if (versions.sequence.length > 0 && !versions.sequence.includes(version))
      err('E042', `the manifest lists ${path}, in ${version}, which is not a version of the inventory`);
  }
  const fixity = checkFixity(value, manifest, err);
  return {
    json: value,
    id,
    specVersion,
    digestAlgorithm,
    contentDirectory: contentDirectory ?? 'content',
    contentDirectorySet: contentDirectory !== undefined,
    head: value.head,
    manifest,
    fixity,
    ...versions,
  };
}

type Report = (code: OcflCode, detail: string) => void;

function checkId(id: unknown, err: Report): string | undefined {
  if (id === undefined) return undefined;
  if (typeof id !== 'string' || id === '') return void err('E037', 'id is not a non-empty string');
  if (!isUri(id)) err('W005', `id ${JSON.stringify(id)} is not a URI`);
  return id;
}

function checkType(type: unknown, err: Report): string {
  if (type === undefined) return '1.1';
  const m = typeof type === 'string' ? TYPE.exec(type) : null;
  if (m === null) err('E038', `type is ${JSON.stringify(type)}, not the inventory URI of an OCFL version`);
  return m?.[1] ?? '1.1';
}

function checkContentDirectory(inventory: Json, err: Report): string | undefined {
  if (!('contentDirectory' in inventory)) return undefined;
  const dir = inventory.contentDirectory;
  if (typeof dir !== 'string' || dir === '' || dir.includes('/'))
    return void err('E017', `contentDirectory ${JSON.stringify(dir)} is not one folder name`);
  if (dir === '.' || dir === '..') return void err('E018', `contentDirectory is "${dir}"`);
  return dir;
}

/** content path → digest, for the paths that are well formed. */
function checkManifest(inventory: Json, algorithm: string, contentDir: string, err: Report) {
  const files = new Map<string, string>();
  if (!('manifest' in inventory)) return (void err('E041', 'the inventory has no manifest'), files);
  const manifest = inventory.manifest;
  if (!isObject(manifest)) return (void err('E106', 'the manifest is not a JSON object'), files);
  const seen = new Set<string>();
  const paths = new PathSet();
  for (const [digest, list] of Object.entries(manifest)) {
    if (!isDigestOf(algorithm, digest))
      err('E025', `the manifest key ${digest} is not a ${algorithm} digest`);
    else if (seen.has(normalDigest(digest)))
      err('E096', `the manifest lists ${digest} twice (letter case aside)`);
    seen.add(normalDigest(digest));
    if (!Array.isArray(list) || list.length === 0) {
      err('E092', `the manifest gives ${digest} no list of content paths`);
      continue;
    }
    for (const path of list as unknown[]) {
      if (!contentPathOk(path, contentDir, err)) continue;
      if (!paths.add(path)) err('E101', `the manifest lists ${path} more than once`);
      files.set(path, digest);
    }
  }
  for (const path of paths.conflicts())
    err('E101', `the manifest lists ${path} both as a file and as the folder of another file`);
  return files;
}

function contentPathOk(path: unknown, contentDir: string, err: Report): path is string {
  const fault = pathFault(path);
  if (fault === 'not-a-string')
    return (void err('E098', `content path ${JSON.stringify(path)} is not a string`), false);
  if (fault === 'slash-at-end')
    return (void err('E100', `content path ${String(path)} begins or ends with /`), false);
  if (fault === 'bad-element')
    return (void err('E099', `content path ${String(path)} has an empty, "." or ".." element`), false);
  const [version, dir, ...rest] = (path as string).split('/');
  if (!/^v\d+$/.test(version!) || dir !== contentDir || rest.length === 0)
    return (void err('E042', `content path ${String(path)} is not inside <version>/${contentDir}/`), false);
  return true;
}

function checkFixity(inventory: Json, manifest: Map<string, string>, err: Report) {
  const fixity = new Map<string, Map<string, string>>();
  if (!('fixity' in inventory)) return fixity;
  if (!isObject(inventory.fixity)) return (void err('E111', 'fixity is not a JSON object'), fixity);
  for (const [algorithm, block] of Object.entries(inventory.fixity)) {
    if (!isKnownAlgorithm(algorithm)) {
      err('E056', `fixity uses "${algorithm}", an algorithm neither the spec nor extension 0001 names`);
      continue;
    }
    if (!isObject(block)) {
      err('E057', `fixity for ${algorithm} is not a JSON object`);
      continue;
    }
    const files = new Map<string, string>();
    const seen = new Set<string>();
    for (const [digest, list] of Object.entries(block)) {
      if (!isDigestOf(algorithm, digest))
        err('E057', `the fixity key ${digest} is not a ${algorithm} digest`);
      else if (seen.has(normalDigest(digest)))
        err('E097', `fixity for ${algorithm} lists ${digest} twice (letter case aside)`);
      seen.add(normalDigest(digest));
      if (!Array.isArray(list)) {
        err('E057', `fixity for ${algorithm} gives ${digest} no list of content paths`);
        continue;
      }
      for (const path of list as unknown[]) {
        const fault = pathFault(path);
        if (fault === 'slash-at-end')
          err('E100', `fixity content path ${String(path)} begins or ends with /`);
        else if (fault !== undefined) err('E099', `fixity content path ${String(path)} is not a path`);
        else if (!manifest.has(path as string))
          err('E057', `fixity for ${algorithm} lists ${String(path)}, which is not in the manifest`);
        else files.set(path as string, normalDigest(digest));
      }
    }
    fixity.set(algorithm, files);
  }
  return fixity;
}
