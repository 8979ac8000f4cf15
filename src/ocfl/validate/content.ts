/**
 * What each version folder holds (spec §3.3): its inventory and sidecar, its content directory and
 * nothing else (E015, W002); content files exactly the manifest's (E023, E092), no empty folders
 * (E024); and, unless told not to, every file read once to check every digest any inventory gives
 * it: the manifest's (E092) and the fixity block's (E093).
 */
import type { Findings } from './codes.js';
import { digestFile, normalDigest } from './digests.js';
import type { History, PriorDigest } from './history.js';
import type { InventoryFacts } from './inventory.js';
import { INVENTORY, joinPath } from './inventory-file.js';
import type { OcflReader } from './reader.js';

export async function checkContent(
  reader: OcflReader,
  objectPath: string,
  facts: InventoryFacts,
  history: History,
  findings: Findings,
  digests: boolean,
): Promise<void> {
  const files = new Set<string>();
  for (const version of facts.sequence) {
    const entries = (await reader.list(joinPath(objectPath, version))) ?? [];
    const sidecar = history.sidecars.get(version) ?? `${INVENTORY}.${facts.digestAlgorithm}`;
    for (const { name, kind } of entries) {
      const at = joinPath(objectPath, version, name);
      if (kind === 'other') findings.add('E090', at, `${name} is a link or a special file`);
      else if (kind === 'file' && name !== INVENTORY && name !== sidecar)
        findings.add('E015', at, `${version} holds the file ${name} outside its content directory`);
      else if (kind === 'dir' && name !== facts.contentDirectory)
        findings.add('W002', at, `${version} holds the folder ${name} beside its content directory`);
      else if (kind === 'dir') {
        const before = files.size;
        await walk(reader, objectPath, joinPath(version, name), files, findings);
        if (files.size === before)
          findings.add('W003', at, `the content directory of ${version} holds no file`);
      }
    }
  }
  for (const path of facts.manifest.keys())
    if (!files.has(path))
      findings.add('E092', joinPath(objectPath, path), `the manifest lists ${path}, which is not there`);
  for (const path of files)
    if (!facts.manifest.has(path))
      findings.add('E023', joinPath(objectPath, path), `${path} is not in the manifest`);
  for (const [algorithm, listed] of facts.fixity)
    for (const path of listed.keys())
      if (!files.has(path))
        findings.add(
          'E093',
          joinPath(objectPath, path),
          `fixity for ${algorithm} lists ${path}, which is not there`,
        );
  if (!digests) return;
  for (const [path, digest] of facts.manifest)
    if (files.has(path))
      await checkDigests(
        reader,
        objectPath,
        path,
        expectedOf(facts, history, path, digest, objectPath),
        findings,
      );
}

/** Files into `files` (relative to the object), empty folders reported (E024). */
async function walk(
  reader: OcflReader,
  objectPath: string,
  dir: string,
  files: Set<string>,
  findings: Findings,
) {
  const entries = (await reader.list(joinPath(objectPath, dir))) ?? [];
  if (entries.length === 0) findings.add('E024', joinPath(objectPath, dir), `${dir} is an empty folder`);
  for (const { name, kind } of entries) {
    const path = `${dir}/${name}`;
    if (kind === 'dir') await walk(reader, objectPath, path, files, findings);
    else if (kind === 'file') files.add(path);
    else findings.add('E090', joinPath(objectPath, path), `${path} is a link or a special file`);
  }
}

/** Every digest an inventory gives the content path `path`. */
function expectedOf(
  facts: InventoryFacts,
  history: History,
  path: string,
  digest: string,
  objectPath: string,
): PriorDigest[] {
  const root = joinPath(objectPath, INVENTORY);
  const expected: PriorDigest[] = [
    { algorithm: facts.digestAlgorithm, digest: normalDigest(digest), code: 'E092', source: root },
  ];
  for (const [algorithm, files] of facts.fixity) {
    const d = files.get(path);
    if (d !== undefined) expected.push({ algorithm, digest: d, code: 'E093', source: root });
  }
  return [...expected, ...(history.prior.get(path) ?? [])];
}

async function checkDigests(
  reader: OcflReader,
  objectPath: string,
  path: string,
  expected: PriorDigest[],
  findings: Findings,
): Promise<void> {
  const at = joinPath(objectPath, path);
  const actual = await digestFile(reader, at, new Set(expected.map((e) => e.algorithm)));
  for (const { algorithm, digest, code, source } of expected) {
    const found = actual.get(algorithm);
    if (found !== undefined && found !== digest)
      findings.add(code, at, `${path} has ${algorithm} ${found}; ${source} gives ${digest}`);
  }
}
