/**
 * Validation step: bagit.txt, which decides the version's rules and the encoding of every other
 * tag file. Its own faults are reported here; the context the later steps read is built from it.
 */
import { existsInBag, readTagBytes, type BagContext, type ScannedBag } from './bag-context.js';
import { makeProblem, type BagProblem } from './problems.js';
import { decodeTagBytes, parseBagDeclaration } from './tagfile.js';
import { rulesFor } from './version-rules.js';

export interface Declaration {
  /** As bagit.txt gives them, even when invalid; absent without a readable bagit.txt. */
  version: string | undefined;
  encoding: string | undefined;
  problems: BagProblem[];
}

export async function readDeclaration(bag: ScannedBag): Promise<Declaration> {
  if (!bag.fileIndex.has('bagit.txt')) {
    const problems = existsInBag(bag, 'bagit.txt')
      ? []
      : [makeProblem({ code: 'bagit-txt-missing', path: 'bagit.txt' })];
    return { version: undefined, encoding: undefined, problems };
  }
  const read = await readTagBytes(bag, 'bagit.txt');
  if (read.value === undefined) return { version: undefined, encoding: undefined, problems: read.problems };
  const declaration = parseBagDeclaration(read.value);
  return {
    version: declaration.version,
    encoding: declaration.encoding,
    problems: declaration.problems.map((p) => makeProblem(p)),
  };
}

/** The bag under the rules of the version it declares. */
export function underDeclaredRules(bag: ScannedBag, declaration: Declaration): BagContext {
  const declared = declaration.encoding ?? 'UTF-8';
  // An encoding we cannot read was reported already; UTF-8 is the best remaining guess.
  const tagEncoding = decodeTagBytes(new Uint8Array(0), declared).ok ? declared : 'UTF-8';
  return { ...bag, rules: rulesFor(declaration.version), tagEncoding };
}
