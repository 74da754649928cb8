import { addressGroup, type Clock } from '../../core/index.js';
import type { SignInFailuresRepo } from '../../storage/index.js';

// Growing delays after failed sign-ins, per account and per client address, kept in the database
// so that every process counts them together. The same for an account that does not exist: the
// delay says nothing about which usernames are real.

/** Failures before any delay: per account (a person mistyping), per address (many people behind one NAT). */
const FREE = { account: 3, address: 20 } as const;
/** The delay doubles with each failure past the free ones, up to this (seconds). */
const MAX_DELAY = 900;
/** Failures older than this are forgotten (seconds). */
const FORGET_AFTER = 3600;

const delayAfter = (free: number) => (failures: number) =>
  failures < free ? 0 : Math.min(2 ** (failures - free), MAX_DELAY);

export class SignInThrottle {
  constructor(
    private readonly deps: {
      readonly signInFailures: SignInFailuresRepo;
      readonly clock: Clock;
      /** What account keys start with: `u:` for customers' users (the default), `o:` for operators. */
      readonly accountPrefix?: string;
    },
  ) {}

  /** Seconds until `username` from `address` may try again; 0 when it may now. */
  async wait(username: string, address: string | null): Promise<number> {
    const now = this.deps.clock.nowSeconds();
    const until = await this.deps.signInFailures.blockedUntil(keys(this.accountKey(username), address), now);
    return until > now ? until - now : 0;
  }

  /** Counts a failed password or code for the account and the address. */
  async failed(username: string, address: string | null): Promise<void> {
    const now = this.deps.clock.nowSeconds();
    await this.deps.signInFailures.recordFailure(
      this.accountKey(username),
      now,
      FORGET_AFTER,
      delayAfter(FREE.account),
    );
    if (address !== null)
      await this.deps.signInFailures.recordFailure(
        `a:${addressGroup(address)}`,
        now,
        FORGET_AFTER,
        delayAfter(FREE.address),
      );
  }

  /** The account signed in: its failures are forgotten (the address's are not). */
  async succeeded(username: string): Promise<void> {
    await this.deps.signInFailures.reset(this.accountKey(username));
  }

  private accountKey(username: string): string {
    return `${this.deps.accountPrefix ?? 'u:'}${username.toLowerCase().slice(0, 64)}`;
  }
}

const keys = (accountKey: string, address: string | null) => [
  accountKey,
  ...(address === null ? [] : [`a:${addressGroup(address)}`]),
];
