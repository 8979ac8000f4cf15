/**
 * `npm run bench`: runs every benchmark in this folder, one after another (they measure the
 * machine, so never two at once), each in its own process, except the long `scale` and `rebuild`. `npm run
 * bench -- audit fixity` runs only those (`-- scale` that one); options after the names go to each of
 * them (`npm run bench -- scale --parts bag`). Each prints its own ratios against the limits it measures in the same run.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const available = readdirSync(here)
  .filter((name) => name.endsWith('.js') && name !== 'run.js' && name !== 'stats.js')
  .map((name) => basename(name, '.js'))
  .sort();
/** Benchmarks that take long (hours) run only when named: `npm run bench -- scale`, `-- rebuild`. */
const LONG = ['rebuild', 'scale'];
const args = process.argv.slice(2);
const firstOption = args.findIndex((arg) => arg.startsWith('--'));
const wanted = firstOption < 0 ? args : args.slice(0, firstOption);
const options = firstOption < 0 ? [] : args.slice(firstOption);
const unknown = wanted.filter((name) => !available.includes(name));
if (unknown.length > 0) {
  console.error(`unknown benchmark: ${unknown.join(', ')} (there are: ${available.join(', ')})`);
  process.exit(2);
}

let failed = 0;
for (const name of wanted.length > 0 ? wanted : available.filter((name) => !LONG.includes(name))) {
  console.log(`\n## bench/${name}`);
  const run = spawnSync(process.execPath, [join(here, `${name}.js`), ...options], { stdio: 'inherit' });
  if (run.status !== 0) {
    console.error(`bench/${name} exited with ${run.status ?? run.signal}`);
    failed++;
  }
}
process.exit(failed > 0 ? 1 : 0);
