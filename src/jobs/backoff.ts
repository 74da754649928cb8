/** Seconds to wait before the next attempt, given how many attempts have run so far (≥ 1). */
export type Backoff = (attempts: number) => number;

export interface ExponentialBackoffOptions {
  /** The delay after the first attempt is 2 × base (default 5 s: 10 s, 20 s, 40 s, …). */
  readonly baseSeconds?: number;
  /** Upper bound before jitter (default one hour). */
  readonly maxSeconds?: number;
  /**
   * Fraction of the delay taken off at random (default 0.25: a delay of d becomes 0.75d–d), so
   * jobs that failed together (an upstream outage) do not all come back in the same second.
   */
  readonly jitter?: number;
  /** Source of randomness in [0, 1); tests fix it. */
  readonly random?: () => number;
}

/**
 * Exponential backoff with jitter: `min(2^attempts × base, max)`, less a random share of up to
 * `jitter`, in whole seconds and never under one second.
 */
export function exponentialBackoff(options: ExponentialBackoffOptions = {}): Backoff {
  const base = options.baseSeconds ?? 5;
  const max = options.maxSeconds ?? 3600;
  const jitter = Math.min(Math.max(options.jitter ?? 0.25, 0), 1);
  const random = options.random ?? Math.random;
  return (attempts) => {
    const delay = Math.min(max, base * 2 ** Math.max(attempts, 1));
    return Math.max(1, Math.round(delay * (1 - jitter * random())));
  };
}
