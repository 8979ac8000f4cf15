/**
 * The inventories in version folders (spec §3.5.5, §3.5.6): each one SHOULD be there (W010), the
 * last one MUST be the root inventory byte for byte (E064), and each earlier one must be a valid
 * inventory of the same object up to its version, telling the same story of every version it holds
 * (E066, W011). The digests they give (another algorithm, perhaps) are checked against the content too.
 */
import type { Findings } from './codes.js';
import { normalDigest } from './digests.js';
import { checkInventory, type InventoryFacts } from './inventory.js';
import { checkSidecar, INVENTORY, joinPath, readInventory } from './inventory-file.js';
import type { OcflReader } from './reader.js';

/** A digest some version's inventory gives a content path, to check against the file. */
export interface PriorDigest {
  algorithm: string;
  digest: string;
  code: 'E092' | 'E093';
  /** The inventory that gives it. */
  source: string;
}

export interface History {
  /** version → the sidecar its folder holds (the algorithm of that version's inventory). */
  sidecars: Map<string, string>;
  /** content path → digests the version inventories give it. */
  prior: Map<string, PriorDigest[]>;
}

export async function checkHistory(
  reader: OcflReader,
  objectPath: string,
  root: InventoryFacts,
  rootBytes: Buffer,
  findings: Findings,
): Promise<History> {
  const history: History = { sidecars: new Map(), prior: new Map() };
  let previousSpec = '1.0';
  for (const [i, version] of root.sequence.entries()) {
    const dir = joinPath(objectPath, version);
    const path = joinPath(dir, INVENTORY);
    if ((await reader.stat(path))?.kind !== 'file') {
      findings.add('W010', path, `version ${version} has no inventory of its own`);
      continue;
    }
    let spec = root.specVersion;
    if (i === root.sequence.length - 1) {
      const bytes = await reader.read(path);
      if (!bytes.equals(rootBytes))
        findings.add('E064', path, `the inventory of ${version}, the head, differs from the root inventory`);
      history.sidecars.set(version, `${INVENTORY}.${root.digestAlgorithm}`);
      await checkSidecar(reader, dir, root.digestAlgorithm, bytes, findings);
    } else {
      const read = await readInventory(reader, dir, findings);
      const facts = read && checkInventory(read.json, path, findings);
      if (read === undefined || facts === undefined) continue;
      spec = facts.specVersion;
      history.sidecars.set(version, `${INVENTORY}.${facts.digestAlgorithm}`);
      await checkSidecar(reader, dir, facts.digestAlgorithm, read.bytes, findings);
      comparePrior(root, facts, version, path, findings);
      collectDigests(root, facts, path, history.prior);
    }
    if (spec < previousSpec)
      findings.add(
        'E103',
        path,
        `${version} is OCFL ${spec}, an earlier version of the spec than ${previousSpec} before it`,
      );
    previousSpec = spec;
  }
  return history;
}

/** The inventory of `version` against the root inventory: same object, same versions up to it. */
function comparePrior(
  root: InventoryFacts,
  prior: InventoryFacts,
  version: string,
  path: string,
  findings: Findings,
) {
  if (prior.head !== version)
    findings.add('E040', path, `the inventory of ${version} has head ${JSON.stringify(prior.head)}`);
  if (prior.id !== root.id)
    findings.add(
      'E037',
      path,
      `the inventory of ${version} has id ${String(prior.id)}, the root ${String(root.id)}`,
    );
  // The root's content directory must be the one the first version set (E019), and no later one changes it (E020).
  if (prior.contentDirectory !== root.contentDirectory)
    findings.add(
      version === root.sequence[0] ? 'E019' : 'E020',
      path,
      `the content directory of ${version} is ${prior.contentDirectory}, the root's ${root.contentDirectory}`,
    );
  const expected = root.sequence.slice(0, root.sequence.indexOf(version) + 1);
  if (prior.sequence.join() !== expected.join())
    findings.add('E066', path, `the inventory of ${version} has versions ${prior.sequence.join(', ')}`);
  for (const [contentPath, digest] of root.manifest) {
    if (expected.includes(contentPath.split('/')[0]!) && !prior.manifest.has(contentPath))
      findings.add(
        'E023',
        path,
        `the inventory of ${version} does not list ${contentPath} in its manifest (${digest})`,
      );
  }
  for (const name of prior.sequence.filter((v) => expected.includes(v))) {
    const difference = stateDifference(root, prior, name);
    if (difference !== undefined)
      findings.add('E066', path, `version ${name} here differs from the root inventory's: ${difference}`);
    const [mine, theirs] = [prior.json.versions, root.json.versions] as Array<
      Record<string, Record<string, unknown>>
    >;
    for (const key of ['created', 'message', 'user'])
      if (JSON.stringify(mine?.[name]?.[key]) !== JSON.stringify(theirs?.[name]?.[key]))
        findings.add('W011', path, `the ${key} of version ${name} here differs from the root inventory's`);
  }
}

/** The first difference between two inventories' states of `version`, by content path (digests may differ in algorithm). */
function stateDifference(root: InventoryFacts, prior: InventoryFacts, version: string): string | undefined {
  const [a, b] = [contentOf(root, version), contentOf(prior, version)];
  for (const [logical, paths] of b) {
    const there = a.get(logical);
    if (there === undefined) return `${logical} is not in the root's state`;
    if (!paths.every((p) => there.includes(p))) return `${logical} is stored at ${paths.join(', ')} here`;
    if (root.digestAlgorithm === prior.digestAlgorithm) {
      const [d1, d2] = [root.states.get(version)?.get(logical), prior.states.get(version)?.get(logical)];
      if (normalDigest(d1 ?? '') !== normalDigest(d2 ?? ''))
        return `${logical} has digest ${d2 ?? '?'} here, ${d1 ?? '?'} there`;
    }
  }
  for (const logical of a.keys()) if (!b.has(logical)) return `${logical} is only in the root's state`;
  return undefined;
}

/** logical path → the content paths that hold it, in one version of one inventory. */
function contentOf(facts: InventoryFacts, version: string): Map<string, string[]> {
  const byDigest = new Map<string, string[]>();
  for (const [path, digest] of facts.manifest) byDigest.set(digest, [...(byDigest.get(digest) ?? []), path]);
  const out = new Map<string, string[]>();
  for (const [logical, digest] of facts.states.get(version) ?? [])
    out.set(logical, byDigest.get(digest) ?? []);
  return out;
}

function collectDigests(
  root: InventoryFacts,
  prior: InventoryFacts,
  source: string,
  out: Map<string, PriorDigest[]>,
) {
  const add = (path: string, d: PriorDigest) => {
    const list = out.get(path) ?? [];
    if (!list.some((x) => x.algorithm === d.algorithm && x.digest === d.digest && x.code === d.code))
      list.push(d);
    out.set(path, list);
  };
  for (const [path, digest] of prior.manifest) {
    const same =
      prior.digestAlgorithm === root.digestAlgorithm &&
      normalDigest(digest) === normalDigest(root.manifest.get(path) ?? '');
    if (!same)
      add(path, { algorithm: prior.digestAlgorithm, digest: normalDigest(digest), code: 'E092', source });
  }
  for (const [algorithm, files] of prior.fixity)
    for (const [path, digest] of files) add(path, { algorithm, digest, code: 'E093', source });
}
