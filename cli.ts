#!/usr/bin/env node
/**
 * The `preservd` command at the path CLI.md names, `dist/cli.js`: the whole program is
 * `src/cli.ts`; this only gives it its documented address.
 */
import './src/cli.js';
