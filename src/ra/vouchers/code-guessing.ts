import { isIPv6 } from 'node:net';
import { CertdeskError, type Clock } from '../../core/index.js';
import type { SignInFailuresRepo } from '../../storage/index.js';

// Guessing voucher codes (DESIGN §5.8): every anonymous lookup of a code that is not a live voucher
// counts against the client's address (an IPv6 address by its /64, which one host usually holds
// whole). After FREE failures each further one blocks the address for twice as long, up to
// MAX_DELAY; failures are forgotten an hour after the last. The counters live in the database
// beside the sign-in failures (`v:` keys), so every process counts them together. Numbers in
// docs/vouchers.md.

/** Failed lookups per address before any delay: a person mistyping a code a few times. */
export const FREE_FAILURES = 10;
/** The longest block, in seconds. */
export const MAX_DELAY = 900;
/** Failures are forgotten this long after the last (seconds). */
export const FORGET_AFTER = 3600;

const delay = (failures: number) =>
  failures < FREE_FAILURES ? 0 : Math.min(2 ** (failures - FREE_FAILURES), MAX_DELAY);

export class CodeGuessing {
  constructor(private readonly deps: { readonly signInFailures: SignInFailuresRepo; readonly clock: Clock }) {}

  /** Throws `rateLimited` (429 with Retry-After) while `address` is blocked. */
  async check(address: string | null): Promise<void> {
    if (address === null) return;
    const now = this.deps.clock.nowSeconds();
    const until = await this.deps.signInFailures.blockedUntil([keyOf(address)], now);
    if (until > now)
      throw Object.assign(
        new CertdeskError(
          'rateLimited',
          `Too many unknown voucher codes from this address: retry in ${until - now} s.`,
        ),
        { retryAfter: until - now },
      );
  }

  /** Counts a lookup of a code that is not a live voucher. */
  async failed(address: string | null): Promise<void> {
    if (address === null) return;
    await this.deps.signInFailures.recordFailure(keyOf(address), this.deps.clock.nowSeconds(), FORGET_AFTER, delay);
  }
}

/** The counter of an address: IPv4 whole, IPv6 by its /64 (IPv4-mapped ones as IPv4). */
export function keyOf(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped !== null) return `v:${mapped[1]!}`;
  if (!isIPv6(address)) return `v:${address}`;
  const [head = '', tail = ''] = address.toLowerCase().split('::');
  const left = head === '' ? [] : head.split(':');
  const right = address.includes('::') ? (tail === '' ? [] : tail.split(':')) : [];
  const groups = address.includes('::')
    ? [...left, ...Array(8 - left.length - right.length).fill('0'), ...right]
    : left;
  return `v:${groups
    .slice(0, 4)
    .map((g) => g.replace(/^0+(?=.)/, ''))
    .join(':')}::/64`;
}
