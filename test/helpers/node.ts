/**
 * How the tests start node on our code: the daemon, the `preservd` command, a child script.
 *
 * tap's runner loads @tapjs/processinfo into each test process, and from there it adds itself to
 * the NODE_OPTIONS of every child, whatever environment the spawn passes. Its module hooks made a
 * daemon's start take 2.7 s instead of 1.5, a `preservd user add` 1.0 s instead of 0.4, and the
 * suite half again as long as its tests (test/http/grants: 62 s instead of 26). So a child runs
 * through coreutils' `env`, which drops NODE_OPTIONS after the hook has added it, unless
 * PRESERVD_TEST_COVERAGE=1 (`npm run coverage`) asks for the children's code to be counted too.
 */

/** The command and arguments that run `node ARGS`. */
export function node(args: readonly string[]): [string, string[]] {
  return process.env.PRESERVD_TEST_COVERAGE === '1'
    ? [process.execPath, [...args]]
    : ['env', ['-u', 'NODE_OPTIONS', process.execPath, ...args]];
}
