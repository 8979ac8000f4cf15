/**
 * Starting a child that file permissions bind, wherever the checkout lives. Root reads through
 * any permission, so a test run as root used to start such children as `nobody`; but `nobody`
 * cannot enter a checkout in a folder only its owner may (`mktemp -d`, `/root`, a 0700 home), and
 * the child died before its first line. Instead the child runs as the checkout's owner, who can
 * read it, without the two capabilities that let root read what it may not: a file or folder
 * made mode 000 is then unreadable to it, as to anyone.
 */
import { statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The checkout (tests run from dist/test/...). */
const checkout = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

/** Whether the tests run as root, whom permissions do not bind. */
const runAsRoot = process.getuid?.() === 0;

/**
 * The command that runs `argv` so that permissions bind it: `setpriv` as the checkout's owner
 * without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH when the tests run as root; `argv` itself
 * otherwise (an ordinary user is bound already).
 */
export function boundByPermissions(argv: string[]): [string, string[]] {
  if (!runAsRoot) return [argv[0]!, argv.slice(1)];
  const owner = checkoutOwner();
  const dropped = '-dac_override,-dac_read_search';
  return [
    'setpriv',
    [
      `--reuid=${owner.uid}`,
      `--regid=${owner.gid}`,
      '--clear-groups',
      `--inh-caps=${dropped}`,
      `--bounding-set=${dropped}`,
      '--',
      ...argv,
    ],
  ];
}

/** The checkout's owner: who a child started by `boundByPermissions` runs as. */
export function checkoutOwner(): { uid: number; gid: number } {
  const owner = statSync(checkout);
  return { uid: owner.uid, gid: owner.gid };
}
