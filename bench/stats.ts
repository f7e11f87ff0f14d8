/** Figures of the benchmarks: percentiles of a series of samples. */

/** The p-th percentile of `samples` (the sample at rank floor(p% of n)); NaN for no samples. */
export function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}
