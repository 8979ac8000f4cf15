/**
 * Validation steps on the bag's shape: the root tag files the RFC names are files, and the
 * payload folder data/ is there.
 */
import type { ScannedBag } from './bag-context.js';
import { FETCH_FILE } from './fetch.js';
import { parseManifestFileName } from './manifest.js';
import { makeProblem, type BagProblem } from './problems.js';

/** Root tag files the RFC names; each must be a file, never a folder. */
function isNamedTagFile(name: string): boolean {
  return (
    ['bagit.txt', 'bag-info.txt', 'package-info.txt', FETCH_FILE].includes(name) ||
    parseManifestFileName(name) !== undefined
  );
}

export function checkTagFilesAreFiles(bag: ScannedBag): BagProblem[] {
  return bag.scan.directories
    .filter((name) => !name.includes('/') && isNamedTagFile(name))
    .map((path) => makeProblem({ code: 'not-a-file', path }));
}

export function checkDataDir(bag: ScannedBag): BagProblem[] {
  return bag.directories.has('data') ? [] : [makeProblem({ code: 'data-dir-missing', path: 'data' })];
}
