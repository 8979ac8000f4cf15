/**
 * `validateBag`: is this directory a valid BagIt bag (RFC 8493, versions 0.93 to 1.0)? It walks
 * the bag, reads its tag files, hashes every regular file once (every algorithm at once, through
 * the caller's FileHasher) and reports every problem it finds, errors and warnings together.
 * The checks are named steps, each in its own file, run here in an order that matters: the
 * declaration decides the rules of the rest, hashing comes before matching, and matching's
 * missing paths feed the name checks.
 * It knows nothing of HTTP, the catalog or chipmunk, and never writes to the bag.
 */
import { resolve } from 'node:path';
import { ALGORITHMS } from '../fixity/index.js';
import { openBag } from './bag-context.js';
import { checkCompleteness } from './check-completeness.js';
import { checkFetchHoles, readFetchFile } from './check-fetch.js';
import { checkDataDir, checkTagFilesAreFiles } from './check-layout.js';
import { checkNames } from './check-names.js';
import { checkOxum, payloadSize } from './check-oxum.js';
import { checkTagManifests } from './check-tag-manifests.js';
import { hashBag } from './hash-bag.js';
import { loadManifests, payloadManifestsOf } from './load-manifests.js';
import { matchManifests } from './match-manifests.js';
import { makeProblem, type BagProblem, type Severity } from './problems.js';
import { readBagInfo } from './read-bag-info.js';
import { readDeclaration, underDeclaredRules } from './read-declaration.js';
import type { BagReport, ValidateOptions } from './report.js';

export async function validateBag(bagDir: string, opts: ValidateOptions): Promise<BagReport> {
  const scanned = await openBag(resolve(bagDir), opts.signal);
  if ('unreadable' in scanned)
    return emptyReport([makeProblem({ code: 'bag-unreadable', detail: scanned.unreadable })]);
  // Each step's problems, in the order found (a list of lists: one step may find a great many).
  const found: BagProblem[][] = [
    scanned.scan.problems.map((p) => makeProblem(p)),
    checkTagFilesAreFiles(scanned),
  ];
  const declaration = await readDeclaration(scanned);
  found.push(declaration.problems);
  const bag = underDeclaredRules(scanned, declaration);
  const bagInfo = await readBagInfo(bag);
  found.push(bagInfo.problems, checkDataDir(bag));
  const { manifests, problems: manifestProblems } = await loadManifests(bag);
  const payloadManifests = payloadManifestsOf(manifests);
  found.push(manifestProblems, checkTagManifests(bag, manifests));
  const fetch = await readFetchFile(bag);
  found.push(fetch.problems);
  const { hashed, problems: hashProblems } = await hashBag(bag, manifests, opts);
  found.push(hashProblems);
  const matching = matchManifests(bag, manifests, fetch.entries, hashed);
  found.push(
    matching.problems,
    checkCompleteness(bag, payloadManifests, matching.covered),
    checkFetchHoles(bag, fetch.entries, payloadManifests),
  );
  const payload = payloadSize(bag, hashed);
  found.push(checkOxum(bag, bagInfo, payload), checkNames(bag, matching.missing));

  const problems = errorsFirst(limitPerCode(withoutNamedEmptyFolders(found.flat())));
  const result: BagReport = {
    valid: !problems.some((p) => p.severity === 'error'),
    algorithms: ALGORITHMS.filter((a) => payloadManifests.some((m) => m.algorithm === a)),
    problems,
    files: hashed.filter((f) => f !== undefined),
    payloadBytes: payload.bytes,
    payloadFiles: payload.files,
    bagInfo: bagInfo.entries,
  };
  if (declaration.version !== undefined) result.version = declaration.version;
  if (declaration.encoding !== undefined) result.encoding = declaration.encoding;
  return result;
}

/**
 * An `empty-folder` warning says nothing more when another problem names the folder or a path in
 * it (a folder where bagit.txt should be, a listed file missing from it): those are dropped.
 */
function withoutNamedEmptyFolders(problems: BagProblem[]): BagProblem[] {
  const empty = problems.filter((p) => p.code === 'empty-folder');
  if (empty.length === 0) return problems;
  const named = problems.flatMap((p) => (p.code === 'empty-folder' || p.path === undefined ? [] : [p.path]));
  const namedInside = (folder: string) => named.some((n) => n === folder || n.startsWith(`${folder}/`));
  return problems.filter((p) => p.code !== 'empty-folder' || !namedInside(p.path));
}

/** Severity order for the report: errors first, then warnings, each in the order found. */
function errorsFirst(problems: BagProblem[]): BagProblem[] {
  return [
    ...problems.filter((p) => p.severity === 'error'),
    ...problems.filter((p) => p.severity === 'warning'),
  ];
}

/**
 * Problems of one code listed one by one; beyond, one `problems-omitted` says how many more. A
 * hostile manifest of a million bogus lines would otherwise become a million-line queue item.
 */
const PROBLEMS_PER_CODE = 1000;

function limitPerCode(problems: BagProblem[]): BagProblem[] {
  const seen = new Map<string, { count: number; severity: Severity }>();
  const kept = problems.filter((p) => {
    const entry = seen.get(p.code) ?? { count: 0, severity: p.severity };
    seen.set(p.code, entry);
    if (p.severity === 'error') entry.severity = 'error';
    return ++entry.count <= PROBLEMS_PER_CODE;
  });
  for (const [code, { count, severity }] of seen) {
    if (count > PROBLEMS_PER_CODE)
      kept.push(
        makeProblem(
          { code: 'problems-omitted', omittedCode: code, count: count - PROBLEMS_PER_CODE },
          severity,
        ),
      );
  }
  return kept;
}

function emptyReport(problems: BagProblem[]): BagReport {
  return { valid: false, algorithms: [], problems, files: [], payloadBytes: 0, payloadFiles: 0, bagInfo: [] };
}
