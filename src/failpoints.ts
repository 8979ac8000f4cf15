/**
 * Failpoints for crash tests: at a named point, the process kills itself with SIGKILL when
 * `PRESERVD_FAILPOINT` names that point (optionally `name@N` to die at its N-th pass). Unset, a
 * failpoint is one comparison. They mark the step boundaries that crash safety depends on.
 */
const wanted = process.env.PRESERVD_FAILPOINT;
const [wantedName, wantedPass] = (wanted ?? '').split('@');
let passes = 0;

export function failpoint(name: string): void {
  if (wanted === undefined || name !== wantedName) return;
  passes++;
  if (passes >= Number(wantedPass ?? 1)) process.kill(process.pid, 'SIGKILL');
}
