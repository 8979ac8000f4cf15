/**
 * An OCFL storage root (spec §4): its declaration `0=ocfl_1.1`, `ocfl_layout.json`, its extensions
 * folder, and the hierarchy below: every folder either an object (it holds `0=ocfl_object_1.x`,
 * and is validated as one) or an intermediate folder holding folders only, never empty; no object
 * inside another; and, when the layout is preservd's (extension 0003 with sha256 and three tuples
 * of three), every object at the path its id gives. Files at the top that OCFL does not name are
 * allowed (E087).
 */
import { LAYOUT_EXTENSION, layoutFiles, objectPathOf } from '../layout.js';
import { Findings, type OcflProblem } from './codes.js';
import { REGISTERED_EXTENSIONS, STORAGE_LAYOUTS } from './extensions.js';
import { joinPath } from './inventory-file.js';
import { isObject, type Json } from './json.js';
import { checkObject, type ValidateOptions } from './object.js';
import type { Entry, OcflReader } from './reader.js';

export interface RootReport {
  /** No error anywhere in the root or its objects (warnings allowed). */
  valid: boolean;
  problems: OcflProblem[];
  /** Every object found, by its path from the root. */
  objects: Array<{ path: string; id?: string; valid: boolean }>;
}

interface Walk {
  reader: OcflReader;
  findings: Findings;
  options: ValidateOptions;
  report: RootReport;
  rootVersion: string;
  /** Whether objects must sit where `objectPathOf` puts them. */
  ourLayout: boolean;
  ids: Map<string, string>;
}

const OBJECT_DECLARATION = /^0=ocfl_object_/;

/** Validates the storage root at the top of `reader`, and every object in it. */
export async function validateRoot(reader: OcflReader, options: ValidateOptions = {}): Promise<RootReport> {
  const findings = new Findings();
  const report: RootReport = { valid: false, problems: findings.list, objects: [] };
  const entries = await reader.list('');
  if (entries === undefined) return (void findings.add('E069', '', 'there is no folder here'), report);
  const rootVersion = await checkDeclaration(reader, entries, findings);
  const layout = await readJson(reader, 'ocfl_layout.json');
  if (layout !== undefined) checkLayout(layout, findings);
  if (entries.some((e) => e.name === 'extensions')) await checkExtensions(reader, findings);
  const walk: Walk = {
    reader,
    findings,
    options,
    report,
    rootVersion: rootVersion ?? '1.1',
    ourLayout: isObject(layout) && layout.extension === LAYOUT_EXTENSION && (await hasOurConfig(reader)),
    ids: new Map(),
  };
  for (const { name, kind } of entries) {
    if (kind === 'other') findings.add('E090', name, `${name} is a link or a special file`);
    else if (kind === 'dir' && name !== 'extensions') await walkFolder(walk, name);
  }
  report.valid = findings.errors === 0;
  return report;
}

async function checkDeclaration(reader: OcflReader, entries: Entry[], findings: Findings) {
  const declarations = entries.filter((e) => e.name.startsWith('0='));
  if (declarations.length === 0)
    return void findings.add('E069', '0=ocfl_1.1', 'the root has no declaration');
  if (declarations.length > 1)
    findings.add(
      'E076',
      '',
      `the root has ${declarations.length} declarations: ${declarations.map((e) => e.name).join(', ')}`,
    );
  let version: string | undefined;
  for (const { name, kind } of declarations) {
    const m = /^0=ocfl_(1\.0|1\.1)$/.exec(name);
    if (m === null)
      findings.add('E079', name, `${name} does not declare an OCFL storage root of version 1.0 or 1.1`);
    else if (kind !== 'file') findings.add('E075', name, `${name} is not a file`);
    else {
      version = m[1]!;
      const text = (await reader.read(name)).toString('utf8');
      if (text !== `ocfl_${version}\n`)
        findings.add(
          'E080',
          name,
          `${name} holds ${JSON.stringify(text.slice(0, 40))}, not "ocfl_${version}\\n"`,
        );
    }
  }
  return version;
}

/** The parsed JSON of a file, undefined when there is no file, null when it is not JSON. */
async function readJson(reader: OcflReader, path: string): Promise<unknown> {
  if ((await reader.stat(path))?.kind !== 'file') return undefined;
  try {
    return JSON.parse((await reader.read(path)).toString('utf8')) as unknown;
  } catch {
    return null;
  }
}

function checkLayout(layout: unknown, findings: Findings): void {
  const at = 'ocfl_layout.json';
  if (!isObject(layout) || typeof layout.extension !== 'string' || typeof layout.description !== 'string')
    findings.add(
      'E070',
      at,
      'ocfl_layout.json is not a JSON object with the strings "extension" and "description"',
    );
  else if (!STORAGE_LAYOUTS.includes(layout.extension))
    findings.add('E071', at, `ocfl_layout.json names ${layout.extension}, not a registered storage layout`);
}

async function checkExtensions(reader: OcflReader, findings: Findings): Promise<void> {
  for (const { name, kind } of (await reader.list('extensions')) ?? []) {
    const at = joinPath('extensions', name);
    if (kind !== 'dir') findings.add('E112', at, `extensions/ holds ${name}, which is no folder`);
    else if (!REGISTERED_EXTENSIONS.includes(name))
      findings.add('W016', at, `${name} is not a registered extension`);
  }
}

/** Extension 0003's parameters are preservd's (its config absent means the same defaults). */
async function hasOurConfig(reader: OcflReader): Promise<boolean> {
  const ours = JSON.parse(layoutFiles()[1]!.text) as Json;
  const config = await readJson(reader, `extensions/${LAYOUT_EXTENSION}/config.json`);
  if (config === undefined) return true;
  return (
    isObject(config) && ['digestAlgorithm', 'tupleSize', 'numberOfTuples'].every((k) => config[k] === ours[k])
  );
}

async function walkFolder(walk: Walk, path: string): Promise<void> {
  const entries = (await walk.reader.list(path)) ?? [];
  if (entries.some((e) => e.kind === 'file' && OBJECT_DECLARATION.test(e.name)))
    return visitObject(walk, path, entries);
  if (entries.length === 0) walk.findings.add('E073', path, `${path} is an empty folder`);
  for (const { name, kind } of entries) {
    const at = joinPath(path, name);
    if (kind === 'dir') await walkFolder(walk, at);
    else if (kind === 'file')
      walk.findings.add('E084', at, `${name} is a file in a folder of the hierarchy, outside any object`);
    else walk.findings.add('E090', at, `${name} is a link or a special file`);
  }
}

async function visitObject(walk: Walk, path: string, entries: Entry[]): Promise<void> {
  const { findings } = walk;
  const before = findings.errors;
  const { id, specVersion } = await checkObject(walk.reader, path, findings, walk.options);
  if (specVersion !== undefined && specVersion > walk.rootVersion)
    findings.add(
      'E081',
      path,
      `the object is OCFL ${specVersion}, later than the root's ${walk.rootVersion}`,
    );
  if (id !== undefined) {
    const other = walk.ids.get(id);
    if (other !== undefined) findings.add('E037', path, `the object has the id ${id}, as has ${other}`);
    walk.ids.set(id, path);
    if (walk.ourLayout && objectPathOf(id) !== path)
      findings.add('E083', path, `the object ${id} belongs at ${objectPathOf(id)} by the root's layout`);
  }
  for (const { name, kind } of entries)
    if (kind === 'dir' && !/^v\d+$/.test(name)) await findNested(walk, joinPath(path, name));
  walk.report.objects.push({ path, ...(id === undefined ? {} : { id }), valid: findings.errors === before });
}

/** An object folder inside an object (outside its version folders, whose content is content). */
async function findNested(walk: Walk, path: string): Promise<void> {
  for (const { name, kind } of (await walk.reader.list(path)) ?? []) {
    if (kind === 'file' && OBJECT_DECLARATION.test(name))
      walk.findings.add('E082', path, `${path} is an object inside another object`);
    else if (kind === 'dir') await findNested(walk, joinPath(path, name));
  }
}
