/**
 * An inventory's versions block (spec §3.5.3): the version names (v1, v2, … or zero-padded alike,
 * from 1 without gaps), and each version's created, state, message and user.
 */
import type { OcflCode } from './codes.js';
import { isDigestOf } from './digests.js';
import { isObject, isUri, type Json } from './json.js';
import { pathFault, PathSet } from './paths.js';

export interface VersionFacts {
  /** The version names in order of their numbers. */
  sequence: string[];
  /** version → logical path → digest as written. */
  states: Map<string, Map<string, string>>;
}

type Report = (code: OcflCode, detail: string) => void;

const VERSION_KEYS = ['created', 'state', 'message', 'user'];
const RFC3339 = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/i;

export function checkVersions(
  inventory: Json,
  algorithm: string,
  manifest: Map<string, string>,
  err: Report,
): VersionFacts {
  const facts: VersionFacts = { sequence: [], states: new Map() };
  if (!('versions' in inventory)) return (void err('E041', 'the inventory has no versions block'), facts);
  const versions = inventory.versions;
  if (!isObject(versions)) return (void err('E044', 'versions is not a JSON object'), facts);
  if (Object.keys(versions).length === 0) return (void err('E008', 'versions is empty'), facts);
  facts.sequence = checkSequence(Object.keys(versions), err);
  const digests = new Set(manifest.values());
  const used = new Set<string>();
  for (const name of facts.sequence) {
    const version = versions[name];
    if (!isObject(version)) {
      err('E047', `version ${name} is not a JSON object`);
      continue;
    }
    for (const key of Object.keys(version))
      if (!VERSION_KEYS.includes(key))
        err('E102', `version ${name} has the key "${key}", which OCFL does not define`);
    checkCreated(name, version, err);
    checkMetadata(name, version, err);
    const state = checkState(name, version, algorithm, digests, err);
    for (const digest of state.values()) used.add(digest);
    facts.states.set(name, state);
  }
  for (const digest of digests)
    if (!used.has(digest)) err('E107', `the manifest lists ${digest}, which no version's state uses`);
  return facts;
}

/** The digits of a zero-padded version name, 0 for one without padding. */
const widthOf = (name: string): number => (name.startsWith('v0') ? name.length - 1 : 0);

/** The names in order of their numbers; the names that are no version name are reported and left out. */
function checkSequence(names: string[], err: Report): string[] {
  const numbered: Array<[number, string]> = [];
  const widths = new Set<number>();
  for (const name of names) {
    const m = /^v(\d+)$/.exec(name);
    if (m === null) err('E104', `the version name ${JSON.stringify(name)} is not v followed by a number`);
    else if (Number(m[1]) === 0) err('E105', `the version name ${name} has the number 0`);
    else {
      numbered.push([Number(m[1]), name]);
      widths.add(widthOf(name));
    }
  }
  numbered.sort((a, b) => a[0] - b[0]);
  const width = widthOf(numbered[0]?.[1] ?? 'v1');
  if (widths.size > 1) {
    err('E012', `the version names mix zero-padded and other forms: ${names.join(', ')}`);
    const breaking = numbered.filter(([, name]) => widthOf(name) !== width).map(([, name]) => name);
    err('E013', `${breaking.join(', ')} do not follow the naming of ${numbered[0]![1]}`);
  }
  if (width > 0) err('W001', `the version names are zero-padded (${numbered[0]?.[1] ?? ''})`);
  if (width > 0 && numbered.length > 10 ** (width - 1) - 1)
    err('E011', `${numbered.length} versions do not fit names zero-padded to ${width} digits`);
  if (numbered.length > 0 && numbered[0]![0] !== 1)
    err('E009', `the versions start at ${numbered[0]![1]}, not at version 1`);
  numbered.forEach(([n], i) => {
    if (i > 0 && n !== numbered[i - 1]![0] + 1)
      err('E010', `the versions skip from ${numbered[i - 1]![1]} to ${numbered[i]![1]}`);
  });
  return numbered.map(([, name]) => name);
}

function checkCreated(name: string, version: Json, err: Report): void {
  const created = version.created;
  if (!('created' in version)) err('E048', `version ${name} has no created`);
  else if (typeof created !== 'string' || !RFC3339.test(created) || Number.isNaN(Date.parse(created)))
    err(
      'E049',
      `version ${name} was created ${JSON.stringify(created)}, not an RFC 3339 date-time to the second`,
    );
}

function checkMetadata(name: string, version: Json, err: Report): void {
  if (!('message' in version)) err('W007', `version ${name} has no message`);
  else if (typeof version.message !== 'string') err('E094', `the message of version ${name} is not a string`);
  if (!('user' in version)) return void err('W007', `version ${name} has no user`);
  const user = version.user;
  if (!isObject(user)) return void err('E054', `the user of version ${name} is not a JSON object`);
  if (typeof user.name !== 'string') err('E054', `the user of version ${name} has no name`);
  if (!('address' in user)) err('W008', `the user of version ${name} has no address`);
  else if (typeof user.address !== 'string')
    err('E054', `the user address of version ${name} is not a string`);
  else if (!isUri(user.address)) err('W009', `the user address of version ${name} is not a URI`);
}

/** logical path → digest, for the well-formed paths of the version's state. */
function checkState(name: string, version: Json, algorithm: string, manifest: Set<string>, err: Report) {
  const files = new Map<string, string>();
  if (!('state' in version)) return (void err('E048', `version ${name} has no state`), files);
  const state = version.state;
  if (!isObject(state)) return (void err('E050', `the state of version ${name} is not a JSON object`), files);
  const paths = new PathSet();
  for (const [digest, list] of Object.entries(state)) {
    if (!isDigestOf(algorithm, digest))
      err('E050', `the state of ${name} has the key ${digest}, not a ${algorithm} digest`);
    else if (!manifest.has(digest))
      err('E050', `the state of ${name} has ${digest}, which the manifest does not list`);
    if (!Array.isArray(list)) {
      err('E051', `the state of ${name} gives ${digest} no list of logical paths`);
      continue;
    }
    for (const path of list as unknown[]) {
      const fault = pathFault(path);
      if (fault === 'not-a-string')
        err('E051', `the state of ${name} has a logical path that is not a string`);
      else if (fault === 'slash-at-end')
        err('E053', `logical path ${String(path)} of ${name} begins or ends with /`);
      else if (fault === 'bad-element')
        err('E052', `logical path ${String(path)} of ${name} has an empty, "." or ".." element`);
      else if (!paths.add(path as string)) err('E095', `the state of ${name} lists ${String(path)} twice`);
      else files.set(path as string, digest);
    }
  }
  for (const path of paths.conflicts())
    err('E095', `the state of ${name} has ${path} both as a file and as the folder of another file`);
  return files;
}
