#!/usr/bin/env node
// tap reporter: echoes the raw TAP stream and closes with the plain line CI reads,
// "N passed, N failed[, N skipped]", counting top-level results (one per test file).
// Each failed assertion is repeated just above that line, with the subtests it sits in and the
// start of its diagnostics, so that the tail of a long log says what failed.
import { createInterface } from 'node:readline';

const DIAGNOSTIC_LINES = 20;
/** Diagnostics keys left out of the repeat: the source excerpt repeats what `at` says. */
const LEFT_OUT = new Set(['source']);
const SKIPPED = /#\s*(SKIP|TODO)/i;

let passed = 0;
let failed = 0;
let skipped = 0;
/** The "# Subtest:" names open at each depth (four spaces of indentation a level). */
const open = [];
/** Each failed assertion: the subtests it sits in, its line, and its diagnostics. */
const failures = [];
/** 'maybe' right after a failure (its YAML block may follow), 'in' inside that block. */
let diagnostics = null;
/** Inside the block: its indentation, and whether the current key is left out. */
let blockIndent = 0;
let leavingOut = false;

const depthOf = (line) => Math.floor((line.length - line.trimStart().length) / 4);

function onResult(line, depth, ok) {
  if (depth === 0) {
    if (SKIPPED.test(line)) skipped++;
    else if (ok) passed++;
    else failed++;
  }
  if (ok || SKIPPED.test(line)) return;
  const within = open.slice(0, depth);
  // A failed subtest ends with its own "not ok", after the failures inside it: report those.
  const last = failures.at(-1);
  const name = open[depth];
  const summarises = last && last.within.length > depth && last.within[depth] === name;
  if (summarises) return;
  failures.push({ within, line: line.trim(), lines: [] });
  diagnostics = 'maybe';
}

const rl = createInterface({ input: process.stdin });
rl.on('line', (line) => {
  process.stdout.write(line + '\n');
  const text = line.trim();
  const indent = line.length - line.trimStart().length;
  if (diagnostics === 'maybe') {
    diagnostics = text === '---' ? 'in' : null;
    blockIndent = indent;
    leavingOut = false;
    if (diagnostics) return;
  }
  if (diagnostics === 'in') {
    if (text === '...') diagnostics = null;
    else {
      if (indent === blockIndent) leavingOut = LEFT_OUT.has(text.split(':')[0]);
      const lines = failures.at(-1).lines;
      if (!leavingOut && lines.length < DIAGNOSTIC_LINES) lines.push(line.slice(blockIndent).trimEnd());
    }
    return;
  }
  const subtest = /^\s*# Subtest: (.*)$/.exec(line);
  if (subtest) {
    const depth = depthOf(line);
    open.length = depth;
    open[depth] = subtest[1];
    return;
  }
  const result = /^\s*(not ok|ok) \d+/.exec(line);
  if (!result) return;
  const depth = depthOf(line);
  onResult(line, depth, result[1] === 'ok');
  open.length = Math.min(open.length, depth); // a result closes the subtest of its name
});

rl.on('close', () => {
  if (failures.length > 0) {
    process.stdout.write(`\n# ${failures.length} failed assertion(s):\n`);
    for (const f of failures) {
      process.stdout.write(`# ${[...f.within, f.line].join(' > ')}\n`);
      for (const l of f.lines) process.stdout.write(`#     ${l}\n`);
    }
  }
  process.stdout.write(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}\n`);
});
