/**
 * An OCFL 1.1 validator (ocfl.io/1.1/spec): objects and storage roots, every problem reported with
 * the spec's code (E0xx, W0xx), its severity, a message and the file it concerns. A library: it
 * reads through `OcflReader` (a filesystem reader here) and knows nothing of preservd's catalog.
 */
export { fsReader, type OcflReader } from './reader.js';
export { validateObject, type ObjectReport } from './object.js';
export { validateRoot, type RootReport } from './root.js';
export type { OcflProblem } from './codes.js';
