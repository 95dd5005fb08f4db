/**
 * Unbiased pass@k estimator (Chen et al. 2021, "Evaluating Large Language Models Trained on Code"):
 * 1 − C(n−c, k) / C(n, k) for n samples of which c pass, computed as a product so it stays stable
 * for large n: 1 − ∏_{i=n−c+1}^{n} (1 − k/i).
 */
export function passAtK(n: number, c: number, k: number): number {
  if (!Number.isInteger(n) || !Number.isInteger(c) || !Number.isInteger(k) || n < 0 || c < 0 || k < 1)
    throw new RangeError(`passAtK needs integers n ≥ 0, c ≥ 0, k ≥ 1 (got n=${n}, c=${c}, k=${k})`);
  if (c > n) throw new RangeError(`passAtK: c (${c}) exceeds n (${n})`);
  if (k > n) throw new RangeError(`passAtK: k (${k}) exceeds n (${n}); pass@k needs at least k samples`);
  if (n - c < k) return 1;
  let prod = 1;
  for (let i = n - c + 1; i <= n; i++) prod *= 1 - k / i;
  return 1 - prod;
}
