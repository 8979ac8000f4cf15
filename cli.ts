#!/usr/bin/env -S node --max-semi-space-size=4
/**
 * The `preservd` command at the path CLI.md names, `dist/cli.js`: the whole program is
 * `src/cli.ts`; this only gives it its documented address. The first line starts node with V8's
 * young generation small, which keeps the daemon's memory down (docs/operators.md, "Memory").
 */
import './src/cli.js';
