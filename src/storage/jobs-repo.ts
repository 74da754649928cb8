import { sql, type ExpressionBuilder, type Kysely, type Selectable } from 'kysely';
import { jobId, type JobId } from '../core/index.js';
import { JOB_STATUSES, type JobName, type JobPayloads, type JobStatus } from '../core/jobs.js';
import { inTransaction, writeLater, type Db } from './database.js';
import { deleteInBatches } from './purge.js';
import type { DB, JobsTable } from './schema.js';

export interface NewJob<N extends JobName> {
  readonly name: N;
  readonly payload: JobPayloads[N];
  /** When the job becomes due, in whole UTC seconds. */
  readonly runAt: number;
  /** At most one queued or running job holds a key; finished jobs release theirs. */
  readonly uniqueKey?: string;
  /**
   * Moves `uniqueKey` from this running job to the new one, atomically: how a job schedules its
   * own successor under the key it holds (see `ensureRecurring`).
   */
  readonly takeKeyFrom?: JobId;
}

export interface EnqueueResult {
  readonly id: JobId;
  /** False when a queued or running job already held the unique key (its id is returned). */
  readonly created: boolean;
}

/** A job row as stored. `name` is a string: a row may come from a newer build (see `isJobName`). */
export interface StoredJob {
  readonly id: JobId;
  readonly name: string;
  readonly payload: unknown;
  readonly uniqueKey: string | null;
  readonly status: JobStatus;
  readonly runAt: number;
  readonly attempts: number;
  readonly leaseOwner: string | null;
  readonly leaseExpiresAt: number | null;
  readonly lastError: string | null;
  readonly createdAt: number;
  readonly updatedAt: number;
}

const COLUMNS = [
  'id',
  'name',
  'payload',
  'unique_key',
  'status',
  'run_at',
  'attempts',
  'lease_owner',
  'lease_expires_at',
  'last_error',
  'created_at',
  'updated_at',
] as const;

// Errors are for operators reading the row, not a place to keep whole stack traces.
const MAX_ERROR_LENGTH = 2000;

/**
 * Claimable at `now`: queued and due, or running under a lease that has run out. A lease is held
 * through `lease_expires_at` inclusive (whole seconds), so a one-second lease lasts at least one
 * full second.
 */
function claimable(now: number) {
  return (eb: ExpressionBuilder<DB, 'jobs'>) =>
    eb.or([
      eb.and([eb('status', '=', 'queued'), eb('run_at', '<=', now)]),
      eb.and([eb('status', '=', 'running'), eb('lease_expires_at', '<', now)]),
    ]);
}

/** The row of a job queued now, due at `runAt`. */
export function queuedRow<N extends JobName>(job: Omit<NewJob<N>, 'takeKeyFrom'>, now: number) {
  return {
    name: job.name,
    payload: JSON.stringify(job.payload),
    unique_key: job.uniqueKey ?? null,
    status: 'queued',
    run_at: job.runAt,
    lease_owner: null,
    lease_expires_at: null,
    last_error: null,
    created_at: now,
    updated_at: now,
  };
}

/**
 * The durable job queue. Every state change is one UPDATE guarded by the state it expects, so
 * several workers (processes, or machines on PostgreSQL) can share the table safely.
 */
export class JobsRepo {
  constructor(private readonly db: Db) {}

  /**
   * Adds a job. With `uniqueKey`, a queued or running job that holds the key is kept and its id
   * returned with `created: false` (INSERT … ON CONFLICT DO NOTHING on `unique_key`).
   */
  /**
   * Queues a job as part of the caller's transaction (one statement, no retry loop of its own):
   * the job exists exactly when the transaction that needs it commits. A job already holding the
   * unique key wins; nothing is inserted then.
   */
  async enqueueInTransaction<N extends JobName>(job: Omit<NewJob<N>, 'takeKeyFrom'>, now: number): Promise<void> {
    const insert = this.db.kysely
      .insertInto('jobs')
      .values(queuedRow(job, now))
      .onConflict((oc) => oc.column('unique_key').doNothing());
    await writeLater(this.db, 'jobs', insert.compile());
  }

  /**
   * Makes the queued job holding `uniqueKey` due at `runAt`, or queues one (in the caller's
   * transaction), in one statement. A running job keeps its key; it queues its own successor when
   * it ends.
   */
  async rescheduleInTransaction<N extends JobName>(
    job: Omit<NewJob<N>, 'takeKeyFrom'> & { uniqueKey: string },
    now: number,
  ): Promise<void> {
    const upsert = this.db.kysely
      .insertInto('jobs')
      .values(queuedRow(job, now))
      .onConflict((oc) =>
        oc.column('unique_key').doUpdateSet({ run_at: job.runAt, updated_at: now }).where('jobs.status', '=', 'queued'),
      );
    await writeLater(this.db, 'jobs', upsert.compile());
  }

  async enqueue<N extends JobName>(job: NewJob<N>, now: number): Promise<EnqueueResult> {
    const values = queuedRow(job, now);
    // A conflicting job can finish (and release the key) between our INSERT and SELECT: try again.
    for (let attempt = 0; attempt < 5; attempt++) {
      const result = await inTransaction(this.db, async ({ kysely: trx }) => {
        if (job.takeKeyFrom !== undefined && job.uniqueKey !== undefined) {
          await trx
            .updateTable('jobs')
            .set({ unique_key: null, updated_at: now })
            .where('id', '=', job.takeKeyFrom)
            .where('unique_key', '=', job.uniqueKey)
            .where('status', '=', 'running')
            .execute();
        }
        const inserted = await trx
          .insertInto('jobs')
          .values(values)
          .onConflict((oc) => oc.column('unique_key').doNothing())
          .returning('id')
          .executeTakeFirst();
        if (inserted !== undefined) return { id: jobId(inserted.id), created: true };
        const held = await trx
          .selectFrom('jobs')
          .select('id')
          .where('unique_key', '=', job.uniqueKey ?? '')
          .executeTakeFirst();
        return held === undefined ? undefined : { id: jobId(held.id), created: false };
      });
      if (result !== undefined) return result;
    }
    throw new Error(`enqueue ${job.name}: unique key ${job.uniqueKey ?? ''} kept changing hands`);
  }

  /**
   * Leases up to `limit` claimable jobs (see `claimable`) to `owner` until `now + leaseSeconds`,
   * earliest `run_at` first, and returns them with `attempts` incremented. A job is never leased
   * to two owners at once: PostgreSQL locks the candidates with FOR UPDATE SKIP LOCKED (other
   * workers skip them instead of waiting), SQLite takes the write lock first (BEGIN IMMEDIATE),
   * and on both the UPDATE repeats the claimable condition, so a row someone else took is not
   * changed and not returned. `names`: only jobs of these names (a worker's, so one of an older
   * build leaves a job it has no handler for to a newer worker instead of failing it).
   */
  async claimDue(
    owner: string,
    now: number,
    leaseSeconds: number,
    limit: number,
    names?: readonly string[],
  ): Promise<StoredJob[]> {
    if (!(leaseSeconds >= 1)) throw new Error('leaseSeconds must be at least 1');
    if (limit <= 0 || names?.length === 0) return [];
    const rows = await this.inWriteTransaction(async (trx) => {
      let candidates = trx
        .selectFrom('jobs')
        .select('id')
        .where(claimable(now))
        .orderBy('run_at')
        .orderBy('id')
        .limit(limit);
      if (names !== undefined) candidates = candidates.where('name', 'in', names);
      if (this.db.dialect === 'postgres') candidates = candidates.forUpdate().skipLocked();
      const ids = (await candidates.execute()).map((r) => r.id);
      if (ids.length === 0) return [];
      return trx
        .updateTable('jobs')
        .set((eb) => ({
          status: 'running',
          lease_owner: owner,
          lease_expires_at: now + leaseSeconds,
          attempts: eb('attempts', '+', 1),
          updated_at: now,
        }))
        .where('id', 'in', ids)
        .where(claimable(now))
        .returning(COLUMNS)
        .execute();
    });
    return rows.map(toJob).sort((a, b) => a.runAt - b.runAt || a.id - b.id);
  }

  /** Marks a job leased to `owner` as done, releasing its unique key. False if `owner` no longer holds it. */
  async markDone(id: JobId, owner: string, now: number): Promise<boolean> {
    return this.finish(id, owner, {
      status: 'done',
      unique_key: null,
      lease_expires_at: null,
      last_error: null,
      updated_at: now,
    });
  }

  /**
   * Puts a job leased to `owner` back in the queue to run at `runAt`, recording the error.
   * False if `owner` no longer holds it (its lease was taken over: the new owner decides).
   */
  async markRetry(id: JobId, owner: string, runAt: number, error: string, now: number): Promise<boolean> {
    return this.finish(id, owner, {
      status: 'queued',
      run_at: runAt,
      lease_owner: null,
      lease_expires_at: null,
      last_error: error.slice(0, MAX_ERROR_LENGTH),
      updated_at: now,
    });
  }

  /** Gives up on a job leased to `owner`, recording the error and releasing its unique key. False if `owner` no longer holds it. */
  async markDead(id: JobId, owner: string, error: string, now: number): Promise<boolean> {
    return this.finish(id, owner, {
      status: 'dead',
      unique_key: null,
      lease_expires_at: null,
      last_error: error.slice(0, MAX_ERROR_LENGTH),
      updated_at: now,
    });
  }

  /** Moves the lease of a job held by `owner` to `until`. False if `owner` no longer holds it. */
  async extendLease(id: JobId, owner: string, until: number): Promise<boolean> {
    return this.finish(id, owner, { lease_expires_at: until });
  }

  /**
   * Ends the leases held by owners that `isGone` says are gone (a process killed on this host), so
   * their jobs are claimable at once instead of when the leases lapse. Guarded by the owner: a job
   * that changed hands meanwhile is not touched. Returns how many leases were ended.
   */
  async endLeasesOfGoneOwners(isGone: (owner: string) => boolean, now: number): Promise<number> {
    const owners = await this.db.kysely
      .selectFrom('jobs')
      .select('lease_owner')
      .distinct()
      .where('status', '=', 'running')
      .where('lease_owner', 'is not', null)
      .execute();
    const gone = owners.map((r) => r.lease_owner!).filter(isGone);
    if (gone.length === 0) return 0;
    const r = await this.db.kysely
      .updateTable('jobs')
      .set({ lease_expires_at: now - 1, updated_at: now })
      .where('status', '=', 'running')
      .where('lease_owner', 'in', gone)
      .executeTakeFirst();
    return Number(r.numUpdatedRows);
  }

  /** The job with this id, or undefined. */
  async byId(id: JobId): Promise<StoredJob | undefined> {
    const row = await this.db.kysely.selectFrom('jobs').select(COLUMNS).where('id', '=', id).executeTakeFirst();
    return row === undefined ? undefined : toJob(row);
  }

  /** How many jobs are in each status (every status present, zero when none); for metrics and tests. */
  async countByStatus(): Promise<Record<JobStatus, number>> {
    const rows = await this.db.kysely
      .selectFrom('jobs')
      .select((eb) => ['status', eb.fn.countAll<number | string>().as('n')])
      .groupBy('status')
      .execute();
    const counts = Object.fromEntries(JOB_STATUSES.map((s) => [s, 0])) as Record<JobStatus, number>;
    for (const row of rows) if (row.status in counts) counts[row.status as JobStatus] = Number(row.n);
    return counts;
  }

  /**
   * Seconds the longest-waiting claimable job has waited at `now` (0 when none): queued since its
   * `run_at`, or running since its lease ran out. Climbs while no worker keeps up. Two index probes.
   */
  async overdueSeconds(now: number): Promise<number> {
    const earliest = (status: JobStatus, column: 'run_at' | 'lease_expires_at', op: '<=' | '<') =>
      this.db.kysely
        .selectFrom('jobs')
        .select((eb) => eb.fn.min(column).as('since'))
        .where('status', '=', status)
        .where(column, op, now)
        .executeTakeFirst();
    const [queued, lapsed] = await Promise.all([
      earliest('queued', 'run_at', '<='),
      earliest('running', 'lease_expires_at', '<'),
    ]);
    const since = [queued?.since, lapsed?.since].filter((v) => v !== null && v !== undefined).map(Number);
    return since.length === 0 ? 0 : Math.max(0, now - Math.min(...since));
  }

  /** Jobs the worker gave up on (`dead`), the most recently failed first; for operators. */
  async listDead(limit: number): Promise<StoredJob[]> {
    const rows = await this.db.kysely
      .selectFrom('jobs')
      .select(COLUMNS)
      .where('status', '=', 'dead')
      .orderBy('updated_at', 'desc')
      .orderBy('id', 'desc')
      .limit(limit)
      .execute();
    return rows.map(toJob);
  }

  /**
   * An operator's retry of a dead job: dead → queued, due now, attempts from zero (its last error
   * kept until it runs). One guarded UPDATE: false, changing nothing, when the job is not dead
   * (already retried, or never failed), so two retries at once queue it once.
   */
  async retryDead(id: JobId, now: number): Promise<boolean> {
    const res = await this.db.kysely
      .updateTable('jobs')
      .set({ status: 'queued', run_at: now, attempts: 0, lease_owner: null, lease_expires_at: null, updated_at: now })
      .where('id', '=', id)
      .where('status', '=', 'dead')
      .executeTakeFirst();
    return res.numUpdatedRows > 0n;
  }

  // The guard every worker-side transition shares: the job is running and leased to `owner`.
  private async finish(id: JobId, owner: string, changes: Partial<Selectable<JobsTable>>): Promise<boolean> {
    const res = await this.db.kysely
      .updateTable('jobs')
      .set(changes)
      .where('id', '=', id)
      .where('status', '=', 'running')
      .where('lease_owner', '=', owner)
      .executeTakeFirst();
    return res.numUpdatedRows > 0n;
  }

  /**
   * Deletes jobs that ended done before `before` (a failed one, `dead`, is kept for the operator);
   * for housekeeping. Returns how many.
   */
  async purgeDone(before: number): Promise<number> {
    return deleteInBatches(this.db, 'jobs', sql`status = 'done' AND updated_at < ${before}`);
  }

  // PostgreSQL: an ordinary transaction (row locks do the work), run again should PostgreSQL abort
  // it for a deadlock or a serialization conflict (`inTransaction`). SQLite: BEGIN IMMEDIATE takes
  // the write lock before the SELECT, so another process cannot claim between our read and write
  // (a deferred transaction would instead fail with SQLITE_BUSY when it upgraded).
  private async inWriteTransaction<T>(fn: (trx: Kysely<DB>) => Promise<T>): Promise<T> {
    if (this.db.dialect === 'postgres') return inTransaction(this.db, (tx) => fn(tx.kysely));
    return this.db.kysely.connection().execute(async (conn) => {
      await sql`begin immediate`.execute(conn);
      try {
        const result = await fn(conn);
        await sql`commit`.execute(conn);
        return result;
      } catch (err) {
        await sql`rollback`.execute(conn).catch(() => undefined);
        throw err;
      }
    });
  }
}

function toJob(row: Selectable<JobsTable>): StoredJob {
  return {
    id: jobId(row.id),
    name: row.name,
    payload: JSON.parse(row.payload) as unknown,
    uniqueKey: row.unique_key,
    status: row.status as JobStatus,
    runAt: row.run_at,
    attempts: row.attempts,
    leaseOwner: row.lease_owner,
    leaseExpiresAt: row.lease_expires_at,
    lastError: row.last_error,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}
