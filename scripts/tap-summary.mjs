#!/usr/bin/env node
// tap reporter: echoes the raw TAP stream and closes with the plain line CI reads,
// "N passed, N failed[, N skipped]", counting top-level results (one per test file).
import { createInterface } from 'node:readline';

let passed = 0;
let failed = 0;
let skipped = 0;
const rl = createInterface({ input: process.stdin });
rl.on('line', (line) => {
  process.stdout.write(line + '\n');
  const m = /^(not ok|ok) \d+/.exec(line);
  if (!m) return;
  if (/#\s*(SKIP|TODO)/i.test(line)) skipped++;
  else if (m[1] === 'ok') passed++;
  else failed++;
});
rl.on('close', () => {
  process.stdout.write(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}\n`);
});
