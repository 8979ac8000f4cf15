/**
 * One OCFL object (spec §3): its declaration, its root inventory and sidecar, what its root may
 * hold, the inventories of its versions (history.ts) and its content (content.ts). Every problem
 * is reported, not just the first; a check that needs what an earlier one could not read is skipped.
 */
import { Findings, type OcflProblem } from './codes.js';
import { checkContent } from './content.js';
import { checkHistory } from './history.js';
import { checkInventory, type InventoryFacts } from './inventory.js';
import { checkSidecar, INVENTORY, joinPath, readInventory } from './inventory-file.js';
import type { Entry, OcflReader } from './reader.js';
import { REGISTERED_EXTENSIONS } from './extensions.js';

export interface ValidateOptions {
  /** Compute content digests (the default); false checks structure and inventories only. */
  digests?: boolean;
}

export interface ObjectReport {
  /** No error (warnings allowed). */
  valid: boolean;
  problems: OcflProblem[];
  /** The root inventory's id, when it could be read. */
  id?: string;
  /** The OCFL version the object declares (`1.0`, `1.1`), when it declares one. */
  specVersion?: string;
}

/** Validates the object whose root is the folder `path` of `reader`. */
export async function validateObject(
  reader: OcflReader,
  path: string,
  options: ValidateOptions = {},
): Promise<ObjectReport> {
  const findings = new Findings();
  const found = await checkObject(reader, path, findings, options);
  return { valid: findings.errors === 0, problems: findings.list, ...found };
}

const DECLARATION = /^0=ocfl_object_(1\.0|1\.1)$/;

/** The checks, reporting into `findings` (a storage root's validation shares one). */
export async function checkObject(
  reader: OcflReader,
  path: string,
  findings: Findings,
  options: ValidateOptions,
): Promise<{ id?: string; specVersion?: string }> {
  const entries = await reader.list(path);
  if (entries === undefined) return (void findings.add('E003', path, 'there is no folder here'), {});
  const specVersion = await checkDeclaration(reader, path, entries, findings);
  const out = specVersion === undefined ? {} : { specVersion };
  if (!entries.some((e) => e.name === INVENTORY && e.kind === 'file'))
    return (void findings.add('E063', joinPath(path, INVENTORY), 'the object has no inventory'), out);
  const read = await readInventory(reader, path, findings);
  if (read === undefined) return out;
  const inventoryPath = joinPath(path, INVENTORY);
  const facts = checkInventory(read.json, inventoryPath, findings);
  if (facts === undefined) return out;
  if (specVersion !== undefined && facts.specVersion !== specVersion)
    findings.add(
      'E038',
      inventoryPath,
      `the inventory's type is OCFL ${facts.specVersion}, the object declares ${specVersion}`,
    );
  await checkSidecar(reader, path, facts.digestAlgorithm, read.bytes, findings);
  await checkObjectRoot(reader, path, entries, facts, findings);
  const history = await checkHistory(reader, path, facts, read.bytes, findings);
  await checkContent(reader, path, facts, history, findings, options.digests ?? true);
  return facts.id === undefined ? out : { ...out, id: facts.id };
}

async function checkDeclaration(
  reader: OcflReader,
  path: string,
  entries: Entry[],
  findings: Findings,
): Promise<string | undefined> {
  const declarations = entries.filter((e) => e.name.startsWith('0='));
  if (declarations.length === 0)
    return void findings.add('E003', path, 'the object has no 0=ocfl_object_1.1');
  if (declarations.length > 1)
    findings.add(
      'E003',
      path,
      `the object has ${declarations.length} declarations: ${declarations.map((e) => e.name).join(', ')}`,
    );
  let version: string | undefined;
  for (const { name, kind } of declarations) {
    const at = joinPath(path, name);
    const m = DECLARATION.exec(name);
    if (m === null) findings.add('E006', at, `${name} does not declare an OCFL object of version 1.0 or 1.1`);
    else if (kind !== 'file') findings.add('E002', at, `${name} is not a file`);
    else {
      version = m[1]!;
      const text = (await reader.read(at)).toString('utf8');
      if (text !== `ocfl_object_${version}\n`)
        findings.add(
          'E007',
          at,
          `${name} holds ${JSON.stringify(text.slice(0, 40))}, not "ocfl_object_${version}\\n"`,
        );
    }
  }
  return version;
}

/** Only the declaration, the inventory and its sidecar, version folders, logs/ and extensions/ (E001). */
async function checkObjectRoot(
  reader: OcflReader,
  path: string,
  entries: Entry[],
  facts: InventoryFacts,
  findings: Findings,
): Promise<void> {
  const files = [INVENTORY, `${INVENTORY}.${facts.digestAlgorithm}`];
  for (const { name, kind } of entries) {
    const at = joinPath(path, name);
    if (name.startsWith('0=')) continue;
    if (kind === 'other') findings.add('E090', at, `${name} is a link or a special file`);
    else if (kind === 'file' && !files.includes(name))
      findings.add('E001', at, `the object root holds the file ${name}`);
    else if (kind !== 'dir' || facts.sequence.includes(name) || name === 'logs') continue;
    else if (name === 'extensions') await checkExtensions(reader, at, findings);
    else if (/^v\d+$/.test(name))
      findings.add('E046', at, `${name} is a version folder the inventory does not list`);
    else findings.add('E001', at, `the object root holds the folder ${name}`);
  }
  // A missing folder before the last is a gap in the sequence of version folders (E010).
  const present = facts.sequence.map((v) => entries.some((e) => e.name === v && e.kind === 'dir'));
  facts.sequence.forEach((version, i) => {
    if (!present[i])
      findings.add(
        present.slice(i + 1).includes(true) ? 'E010' : 'E046',
        joinPath(path, version),
        `the inventory lists ${version}, which has no folder`,
      );
  });
}

async function checkExtensions(reader: OcflReader, path: string, findings: Findings): Promise<void> {
  for (const { name, kind } of (await reader.list(path)) ?? []) {
    if (kind !== 'dir')
      findings.add('E067', joinPath(path, name), `extensions/ holds ${name}, which is no folder`);
    else if (!REGISTERED_EXTENSIONS.includes(name))
      findings.add('W013', joinPath(path, name), `${name} is not a registered extension`);
  }
}
