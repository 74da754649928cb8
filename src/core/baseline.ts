/**
 * The Baseline Requirements schedule of ballot SC-081: from each date on, the longest TLS
 * certificate lifetime (§6.3.2) and how long a domain validation may be reused (§4.2.1).
 */
const at = (iso: string) => Date.parse(iso) / 1000;
const STEPS: readonly { from: number; lifetimeDays: number; reuseDays: number }[] = [
  { from: at('2029-03-15T00:00:00Z'), lifetimeDays: 47, reuseDays: 10 },
  { from: at('2027-03-15T00:00:00Z'), lifetimeDays: 100, reuseDays: 100 },
  { from: at('2026-03-15T00:00:00Z'), lifetimeDays: 200, reuseDays: 200 },
  { from: 0, lifetimeDays: 398, reuseDays: 398 },
];

const stepAt = (now: number) => STEPS.find((s) => now >= s.from) ?? STEPS[STEPS.length - 1]!;

/** Longest TLS server certificate allowed when issued at `now`, in days. */
export function tlsMaxLifetimeDays(now: number): number {
  return stepAt(now).lifetimeDays;
}

/** Seconds a name validated earlier still counts at `now` (reissues, subscriptions). */
export function dcvReuseSeconds(now: number): number {
  return stepAt(now).reuseDays * 86_400;
}
