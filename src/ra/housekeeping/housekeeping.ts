import type { Clock, JobId } from '../../core/index.js';
import { ensureRecurring, type DcvValuesRepo, type JobsRepo, type TokensRepo } from '../../storage/index.js';

/** Expired tokens and DCV values are kept a day (support questions, clock skew), then deleted. */
const GRACE_SECONDS = 86400;
/** How often the purge runs. */
export const PURGE_EVERY = 3600;

/** Periodic clean-up jobs. Each handler is idempotent and re-schedules itself last. */
export class Housekeeping {
  constructor(
    private readonly deps: {
      tokens: Pick<TokensRepo, 'purgeExpired'>;
      dcvValues: Pick<DcvValuesRepo, 'purgeExpired'>;
      jobs: Pick<JobsRepo, 'enqueue'>;
      clock: Clock;
    },
  ) {}

  /** Starts the recurring jobs if they are not queued yet; called once at start. */
  async schedule(): Promise<void> {
    await ensureRecurring(this.deps.jobs, 'housekeeping.purge', {}, PURGE_EVERY, this.deps.clock.nowSeconds());
  }

  /**
   * Job `housekeeping.purge`: deletes tokens and DCV values expired for more than a day, then
   * hands on to the next run.
   */
  async purgeExpired(_payload: Record<string, never>, ctx: { readonly id: JobId }): Promise<void> {
    const now = this.deps.clock.nowSeconds();
    await this.deps.tokens.purgeExpired(now - GRACE_SECONDS);
    await this.deps.dcvValues.purgeExpired(now - GRACE_SECONDS);
    await ensureRecurring(this.deps.jobs, 'housekeeping.purge', {}, PURGE_EVERY, now, { after: ctx.id });
  }
}
