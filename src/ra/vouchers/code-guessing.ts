import { addressGroup, CertdeskError, type Clock } from '../../core/index.js';
import type { SignInFailuresRepo } from '../../storage/index.js';

// Guessing voucher codes (DESIGN §5.8): every anonymous lookup counts against the client's address
// (an IPv6 address by its /64, which one host usually holds whole) before the code is looked up,
// and is taken back when the code exists (live, redeemed or voided: a real code is no guess).
// After FREE_FAILURES each further one blocks the address for twice as long, up to MAX_DELAY;
// the count is forgotten an hour after the last. Counting before looking, in one guarded update,
// means requests sent at once cannot all pass before any is counted. The counters live in the
// database beside the sign-in failures (`v:` keys), so every process counts them together.
// Numbers in docs/vouchers.md.

/** Failed lookups per address before any delay: a person mistyping a code a few times. */
export const FREE_FAILURES = 10;
/** The longest block, in seconds. */
export const MAX_DELAY = 900;
/** Failures are forgotten this long after the last (seconds). */
export const FORGET_AFTER = 3600;

/** The block after the n-th failure (index n - 1): none before the FREE_FAILURES-th, then 1, 2, 4 … s. */
const SCHEDULE: readonly number[] = Array.from({ length: FREE_FAILURES + 10 }, (_, i) =>
  i + 1 < FREE_FAILURES ? 0 : Math.min(2 ** (i + 1 - FREE_FAILURES), MAX_DELAY),
);

export class CodeGuessing {
  constructor(private readonly deps: { readonly signInFailures: SignInFailuresRepo; readonly clock: Clock }) {}

  /** Counts a lookup from `address`; throws `rateLimited` (429 with Retry-After) while it is blocked. */
  async admit(address: string | null): Promise<void> {
    if (address === null) return;
    const key = keyOf(address);
    const now = this.deps.clock.nowSeconds();
    if (await this.deps.signInFailures.admit(key, now, FORGET_AFTER, SCHEDULE, MAX_DELAY)) return;
    const wait = Math.max(1, (await this.deps.signInFailures.blockedUntil([key], now)) - now);
    throw Object.assign(
      new CertdeskError('rateLimited', `Too many unknown voucher codes from this address: retry in ${wait} s.`),
      { retryAfter: wait },
    );
  }

  /** The code looked up exists: its lookup was no guess. */
  async found(address: string | null): Promise<void> {
    if (address !== null) await this.deps.signInFailures.forgive(keyOf(address));
  }
}

/** The counter of an address: IPv4 whole, IPv6 by its /64 (`addressGroup`). */
export function keyOf(address: string): string {
  return `v:${addressGroup(address)}`;
}
