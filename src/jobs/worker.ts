import { holderIsGone, newHolderId, type Clock, type JobId } from '../core/index.js';
import { JOB_NAMES, isJobName } from '../core/jobs.js';
import type { JobsRepo, StoredJob } from '../storage/jobs-repo.js';
import { databaseUnavailable } from '../storage/unavailable.js';
import { exponentialBackoff, type Backoff } from './backoff.js';
import type { Handlers, JobContext, WorkerLogger } from './handlers.js';

export type WorkerRepo = Pick<
  JobsRepo,
  'claimDue' | 'markDone' | 'markRetry' | 'markDead' | 'extendLease' | 'endLeasesOfGoneOwners'
>;

/** How often a poll failing for the database being unavailable is logged while that lasts. */
const OUTAGE_LOG_MS = 60_000;

export interface WorkerOptions {
  readonly repo: WorkerRepo;
  readonly handlers: Handlers;
  readonly clock: Clock;
  readonly logger: WorkerLogger;
  /** Lease holder name, unique per worker (default `hostname:pid:random`, see `newHolderId`). */
  readonly owner?: string;
  /**
   * Whether a lease owner is certainly gone (default `holderIsGone`: a dead process on this host).
   * Their jobs are taken over at start and at every sweep instead of when the leases lapse.
   */
  readonly isGone?: (owner: string) => boolean;
  /** Seconds between sweeps for leases of gone owners (default: the lease time). */
  readonly sweepSeconds?: number;
  /** How long a claim lasts without renewal (default 60 s); renewed every third of it while the handler runs. */
  readonly leaseSeconds?: number;
  /** Pause between polls when there is nothing to do (default 1000 ms). */
  readonly pollIntervalMs?: number;
  /** Attempts before a job is marked dead (default 10). */
  readonly maxAttempts?: number;
  /** Delay before a retry (default `exponentialBackoff()`: 2^attempts × 5 s, at most an hour, with jitter). */
  readonly backoff?: Backoff;
  /** Jobs run at once by this worker (default 4). */
  readonly concurrency?: number;
  /** How long `stop()` waits for jobs in hand (default 30 000 ms). */
  readonly drainTimeoutMs?: number;
}

interface InFlight {
  readonly job: StoredJob;
  readonly controller: AbortController;
  renew: NodeJS.Timeout | undefined;
  finished: boolean;
  done: Promise<void>;
}

/**
 * Leases due jobs, runs their handlers, and records done / retry / dead. Any number of workers
 * may share one database; the repository's guarded claim keeps each job with one of them.
 */
export class Worker {
  readonly owner: string;
  private readonly o: Required<Omit<WorkerOptions, 'owner'>>;
  private readonly inFlight = new Map<JobId, InFlight>();
  private readonly claims = new Set<Promise<unknown>>();
  private reserved = 0;
  private timer: NodeJS.Timeout | undefined;
  private looping = false;
  private ticking = false;
  private again = false;
  private stopped: Promise<boolean> | undefined;
  private lastSweep = Number.NEGATIVE_INFINITY;

  constructor(options: WorkerOptions) {
    this.owner = options.owner ?? newHolderId();
    const leaseSeconds = options.leaseSeconds ?? 60;
    this.o = {
      leaseSeconds,
      pollIntervalMs: 1000,
      maxAttempts: 10,
      backoff: exponentialBackoff(),
      concurrency: 4,
      drainTimeoutMs: 30_000,
      isGone: holderIsGone,
      sweepSeconds: leaseSeconds,
      ...withoutUndefined(options),
    };
    if (!Number.isInteger(this.o.leaseSeconds) || this.o.leaseSeconds < 1)
      throw new Error('leaseSeconds must be a whole number ≥ 1');
    if (this.o.maxAttempts < 1 || this.o.concurrency < 1) throw new Error('maxAttempts and concurrency must be ≥ 1');
  }

  /** Starts the poll loop (setTimeout-based: one poll at a time). Throws after `stop()`. */
  start(): void {
    if (this.stopped !== undefined) throw new Error('worker stopped');
    if (this.looping) return;
    this.looping = true;
    this.schedule(0);
  }

  /**
   * Claims the jobs due now (up to the free slots), runs them, and resolves with how many it ran
   * once they have all finished and been recorded. Used by the loop and by tests.
   */
  async runOnce(): Promise<number> {
    const runs = await this.claimAndStart();
    await Promise.all(runs);
    return runs.length;
  }

  /**
   * Stops taking jobs and waits for the jobs in hand. Resolves true once idle, or false after
   * `timeoutMs`: the jobs still running are then given up (their signal aborted, their leases no
   * longer renewed) so another worker takes them over once the leases run out. Idempotent.
   */
  stop(timeoutMs = this.o.drainTimeoutMs): Promise<boolean> {
    this.stopped ??= this.drain(timeoutMs);
    return this.stopped;
  }

  private async drain(timeoutMs: number): Promise<boolean> {
    this.looping = false;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    let deadline: NodeJS.Timeout | undefined;
    const timedOut = new Promise<false>((resolve) => {
      deadline = setTimeout(() => resolve(false), timeoutMs);
    });
    const idle = (async () => {
      // A claim in progress still hands us jobs: wait for it, then for what it started.
      while (this.claims.size > 0 || this.inFlight.size > 0) {
        await Promise.allSettled([...this.claims, ...[...this.inFlight.values()].map((f) => f.done)]);
      }
      return true as const;
    })();
    const drained = await Promise.race([idle, timedOut]);
    clearTimeout(deadline);
    if (!drained) {
      for (const flight of this.inFlight.values()) {
        clearInterval(flight.renew);
        flight.controller.abort(new Error('worker stopped; job left to its lease'));
        this.o.logger.warn({ job: flight.job.id, name: flight.job.name }, 'drain timeout: job left to its lease');
      }
    }
    return drained;
  }

  private schedule(ms: number): void {
    this.timer = setTimeout(() => void this.tick(), ms);
  }

  private async tick(): Promise<void> {
    this.timer = undefined;
    this.ticking = true;
    this.again = false;
    let more = false;
    try {
      const room = this.room();
      const started = (await this.claimAndStart()).length;
      // A full batch means more may be due; otherwise wait for a slot to free (`wake`) or the interval.
      more = started > 0 && started === room && this.room() > 0;
      if (this.outage !== undefined) {
        if (this.outage.told) {
          const seconds = Math.round((Date.now() - this.outage.since) / 1000);
          this.o.logger.info({ seconds }, 'job poll: the database is back');
        }
        this.outage = undefined;
      }
    } catch (err) {
      if (databaseUnavailable(err) === undefined) this.o.logger.error({ err }, 'job poll failed');
      else this.pollUnavailable(err);
    }
    this.ticking = false;
    if (this.looping) this.schedule(more || this.again ? 0 : this.o.pollIntervalMs);
  }

  /** Since when polls fail for the database being unavailable, and whether that was told. */
  private outage: { since: number; told: boolean } | undefined;
  /** When an outage was last warned of: at most once a minute, across short recoveries too. */
  private outageWarned = -Infinity;

  /**
   * A poll failed for the database being out of reach (a restart, a failover): an outage, not a
   * fault; warned when it starts and once a minute while it lasts, not at every poll, nor at every
   * start when polls fail and pass in turn.
   */
  private pollUnavailable(err: unknown): void {
    const now = Date.now();
    const starts = this.outage === undefined;
    this.outage ??= { since: now, told: false };
    if (now - this.outageWarned < OUTAGE_LOG_MS) return;
    this.outageWarned = now;
    this.outage.told = true;
    if (starts) this.o.logger.warn({ err }, 'job poll failed: database unavailable; polling on');
    else {
      const seconds = Math.round((now - this.outage.since) / 1000);
      this.o.logger.warn({ err, seconds }, 'job poll failed: database still unavailable');
    }
  }

  // A finished job frees a slot: poll now instead of waiting out the interval.
  private wake(): void {
    if (!this.looping) return;
    if (this.ticking) {
      this.again = true;
      return;
    }
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.schedule(0);
  }

  private room(): number {
    return Math.max(0, this.o.concurrency - this.inFlight.size - this.reserved);
  }

  private claimAndStart(): Promise<Promise<void>[]> {
    const room = this.room();
    if (this.stopped !== undefined || room === 0) return Promise.resolve([]);
    this.reserved += room;
    // The sweep included: a stop() meanwhile waits for all of it (`drain`), and it then claims nothing.
    const claiming = (async () => {
      try {
        await this.sweep();
        if (this.stopped !== undefined) return [];
        // Only names this build has handlers for: a job of a newer build waits for a newer worker.
        const jobs = await this.o.repo.claimDue(
          this.owner,
          this.o.clock.nowSeconds(),
          this.o.leaseSeconds,
          room,
          JOB_NAMES,
        );
        return jobs.map((job) => this.startJob(job));
      } finally {
        this.reserved -= room;
      }
    })();
    this.claims.add(claiming);
    void claiming.then(
      () => this.claims.delete(claiming),
      () => this.claims.delete(claiming),
    );
    return claiming;
  }

  /**
   * A process killed on this host leaves its jobs leased for up to `leaseSeconds`; ending those
   * leases at once lets a restarted worker resume them promptly. Owners on other hosts are not
   * judged: their leases lapse on time. At most one sweep per `sweepSeconds`.
   */
  private async sweep(): Promise<void> {
    const now = this.o.clock.nowSeconds();
    if (now - this.lastSweep < this.o.sweepSeconds) return;
    this.lastSweep = now;
    try {
      const ended = await this.o.repo.endLeasesOfGoneOwners(this.o.isGone, now);
      if (ended > 0) this.o.logger.warn({ ended }, 'took over the jobs of a worker process that is gone');
    } catch (err) {
      // The database out of reach is reported by the poll that follows (`pollUnavailable`).
      if (databaseUnavailable(err) === undefined)
        this.o.logger.warn({ err }, 'sweep for leases of gone workers failed');
    }
  }

  private startJob(job: StoredJob): Promise<void> {
    const flight: InFlight = {
      job,
      controller: new AbortController(),
      renew: undefined,
      finished: false,
      done: Promise.resolve(),
    };
    flight.renew = setInterval(() => void this.renew(flight), (this.o.leaseSeconds * 1000) / 3);
    flight.renew.unref();
    this.inFlight.set(job.id, flight);
    flight.done = this.execute(flight).finally(() => {
      this.inFlight.delete(job.id);
      this.wake();
    });
    return flight.done;
  }

  private async execute(flight: InFlight): Promise<void> {
    const { job } = flight;
    const startedMs = Date.now();
    let failure: unknown;
    let failed = false;
    try {
      if (!isJobName(job.name)) throw new Error(`no handler for job name ${job.name}`);
      const handler = this.o.handlers[job.name] as (payload: unknown, ctx: JobContext) => Promise<void>;
      await handler(job.payload, {
        id: job.id,
        name: job.name,
        attempts: job.attempts,
        signal: flight.controller.signal,
      });
    } catch (err) {
      failed = true;
      failure = err;
    }
    flight.finished = true;
    clearInterval(flight.renew);
    const log = { job: job.id, name: job.name, attempts: job.attempts, ms: Date.now() - startedMs };
    try {
      const now = this.o.clock.nowSeconds();
      const error = failure instanceof Error ? failure.message : String(failure);
      let recorded: boolean;
      if (!failed) {
        recorded = await this.o.repo.markDone(job.id, this.owner, now);
        this.o.logger.info(log, 'job done');
      } else if (job.attempts >= this.o.maxAttempts) {
        recorded = await this.o.repo.markDead(job.id, this.owner, error, now);
        this.o.logger.error({ ...log, err: failure }, 'job failed for the last time: dead');
      } else {
        const retryIn = this.o.backoff(job.attempts);
        recorded = await this.o.repo.markRetry(job.id, this.owner, now + retryIn, error, now);
        this.o.logger.warn({ ...log, err: failure, retryIn }, 'job failed: will retry');
      }
      // Another worker took the job over after our lease ran out: its outcome is the one that counts.
      if (!recorded) this.o.logger.warn(log, 'job outcome not recorded: lease lost');
    } catch (err) {
      // The lease runs out and another worker retries the job.
      if (databaseUnavailable(err) === undefined)
        this.o.logger.error({ ...log, err }, 'job outcome not recorded: storage failed');
      else this.o.logger.warn({ ...log, err }, 'job outcome not recorded: database unavailable');
    }
  }

  private async renew(flight: InFlight): Promise<void> {
    try {
      const until = this.o.clock.nowSeconds() + this.o.leaseSeconds;
      const held = await this.o.repo.extendLease(flight.job.id, this.owner, until);
      if (held || flight.finished || flight.controller.signal.aborted) return;
      clearInterval(flight.renew);
      flight.controller.abort(new Error('lease lost'));
      this.o.logger.warn({ job: flight.job.id, name: flight.job.name }, 'lease lost: another worker may run the job');
    } catch (err) {
      this.o.logger.warn({ job: flight.job.id, err }, 'lease renewal failed');
    }
  }
}

function withoutUndefined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}
