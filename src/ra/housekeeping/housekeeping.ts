import type { Clock, JobId } from '../../core/index.js';
import { ensureRecurring, type ExpiredRows, type JobsRepo } from '../../storage/index.js';

/**
 * Expired tokens, DCV values, sessions and authorization codes, and sign-in failures no longer
 * counted, are kept a day (support questions, clock skew), then deleted.
 */
const GRACE_SECONDS = 86400;
/** Jobs done are kept a week (what ran, when, how often it was tried), then deleted; dead ones stay. */
export const DONE_JOBS_KEPT_SECONDS = 7 * 86400;
/** How often the purge runs. */
export const PURGE_EVERY = 3600;

/** Periodic clean-up jobs. Each handler is idempotent and re-schedules itself last. */
export class Housekeeping {
  constructor(
    private readonly deps: {
      expired: Pick<ExpiredRows, 'purge'>;
      jobs: Pick<JobsRepo, 'enqueue' | 'purgeDone'>;
      clock: Clock;
    },
  ) {}

  /** Starts the recurring jobs if they are not queued yet; called once at start. */
  async schedule(): Promise<void> {
    await ensureRecurring(this.deps.jobs, 'housekeeping.purge', {}, PURGE_EVERY, this.deps.clock.nowSeconds());
  }

  /**
   * Job `housekeeping.purge`: deletes what expired more than a day ago (`ExpiredRows`) and jobs
   * done more than a week ago, each a batch at a time (`deleteInBatches`), then hands on to the
   * next run.
   */
  async purgeExpired(_payload: Record<string, never>, ctx: { readonly id: JobId }): Promise<void> {
    const now = this.deps.clock.nowSeconds();
    await this.deps.expired.purge(now - GRACE_SECONDS);
    await this.deps.jobs.purgeDone(now - DONE_JOBS_KEPT_SECONDS);
    await ensureRecurring(this.deps.jobs, 'housekeeping.purge', {}, PURGE_EVERY, now, { after: ctx.id });
  }
}
