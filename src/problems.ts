/**
 * One mechanism for every module that finds problems (bagit, chipmunk, ingest, audit, replicas),
 * modelled on fastify's `createError` table: the module declares a table keyed by code, typed by
 * its union of problem values, giving each code its severity (an error unless it says otherwise)
 * and the one sentence that describes it. From the table come `make` (the value with its
 * severity and sentence attached), `CODES` (every code with its severity, which the docs test
 * reads) and `describe`. A leaf: it imports nothing, so the libraries can use it too.
 */

export type Severity = 'error' | 'warning';

/** Each code's entry: its severity (default `'error'`) and its sentence, given the value of that code. */
export type ProblemTable<Init extends { code: string }> = {
  [C in Init['code']]: { severity?: Severity; describe(p: Extract<Init, { code: C }>): string };
};

/** A problem as reported: the typed value, its severity and its sentence. */
export type Problem<Init extends { code: string }> = Init & { severity: Severity; message: string };

export interface Problems<Init extends { code: string }> {
  /** Every code, with its usual severity (for documentation and tests). */
  readonly CODES: Readonly<Record<Init['code'], Severity>>;
  /** The one place a problem of this module becomes a sentence. */
  describe(p: Init): string;
  /** Attach severity (the table's, unless the caller decides it) and sentence to a problem value. */
  make(init: Init, severity?: Severity): Problem<Init>;
}

export function defineProblems<Init extends { code: string }>(table: ProblemTable<Init>): Problems<Init> {
  // The table is keyed by code, so the entry for `p.code` takes exactly the value `p` is.
  const entries = table as unknown as Record<string, { severity?: Severity; describe(p: Init): string }>;
  const CODES = Object.fromEntries(
    Object.entries(entries).map(([code, entry]) => [code, entry.severity ?? 'error']),
  ) as Record<Init['code'], Severity>;
  const describe = (p: Init): string => entries[p.code]!.describe(p);
  return {
    CODES,
    describe,
    make: (init, severity) => ({
      ...init,
      severity: severity ?? CODES[init.code as Init['code']],
      message: describe(init),
    }),
  };
}
