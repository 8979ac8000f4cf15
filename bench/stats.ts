/** The few statistics the benchmarks report: repeated rounds on a shared, noisy machine. */

/** The median (the mean of the two middle values for an even count). */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** "median [min–max]", each with `digits` decimals. */
export function range(xs: readonly number[], digits: number): string {
  return `${median(xs).toFixed(digits)} [${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)}]`;
}
