/**
 * Validation step: the name checks over everything the bag has or claims to have (operating-system
 * files, names that collide by case or Unicode normalization). A name matched to a file by
 * normalization is that file's, no second name; what manifests list beyond the files on disk is
 * the missing paths, named without a copy of the lot.
 */
import type { ScannedBag } from './bag-context.js';
import { makeProblem, type BagProblem } from './problems.js';
import { findNameCollisions, findSystemFiles } from './scan.js';

/** The names of several sources, one after the other (the name checks count a name once). */
function* namesOf(...sources: Array<Iterable<string>>): Generator<string> {
  for (const source of sources) yield* source;
}

export function checkNames(bag: ScannedBag, missing: ReadonlyMap<string, string[]>): BagProblem[] {
  const filePaths = function* (): Generator<string> {
    for (const f of bag.scan.files) yield f.path;
  };
  const problems: BagProblem[] = [];
  for (const p of findSystemFiles(namesOf(filePaths(), bag.scan.directories, missing.keys())))
    problems.push(makeProblem(p));
  for (const p of findNameCollisions(namesOf(filePaths(), missing.keys()))) problems.push(makeProblem(p));
  return problems;
}
