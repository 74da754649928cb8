import { sql } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { testDialects } from '../../test/support/databases.js';
import { jobId, type JobId } from '../core/index.js';
import type { Db } from './database.js';
import { JobsRepo } from './jobs-repo.js';
import { ensureRecurring } from './recurring-jobs.js';

const T = 1_800_000_000;
const purge = (runAt: number, uniqueKey?: string) => ({
  name: 'housekeeping.purge' as const,
  payload: {},
  runAt,
  uniqueKey,
});

describe.each(testDialects())('JobsRepo on $dialect', ({ dialect, open }) => {
  let db: Db;
  let repo: JobsRepo;
  beforeAll(async () => {
    db = await open();
  });
  afterAll(async () => {
    await db.close();
  });
  beforeEach(async () => {
    await db.kysely.deleteFrom('jobs').execute();
    repo = new JobsRepo(db);
  });

  it('stores the payload as JSON and reads it back', async () => {
    const { id, created } = await repo.enqueue(purge(T), T);
    expect(created).toBe(true);
    expect(await repo.byId(id)).toMatchObject({
      name: 'housekeeping.purge',
      payload: {},
      status: 'queued',
      runAt: T,
      attempts: 0,
      leaseOwner: null,
    });
  });

  it('keeps one queued or running job per unique key, and frees the key when the job finishes', async () => {
    const first = await repo.enqueue(purge(T, 'k'), T);
    const again = await repo.enqueue(purge(T + 50, 'k'), T + 1);
    expect(again).toEqual({ id: first.id, created: false });
    expect((await repo.byId(first.id))?.runAt).toBe(T);
    const [claimed] = await repo.claimDue('w1', T, 30, 10);
    expect(claimed?.id).toBe(first.id);
    expect(await repo.enqueue(purge(T, 'k'), T)).toEqual({ id: first.id, created: false });
    expect(await repo.markDone(first.id, 'w1', T + 2)).toBe(true);
    const next = await repo.enqueue(purge(T + 100, 'k'), T + 3);
    expect(next.created).toBe(true);
    expect(next.id).not.toBe(first.id);
    expect(await repo.countByStatus()).toEqual({ queued: 1, running: 0, done: 1, dead: 0 });
  });

  it('claims only jobs of the names given: an earlier job of another name stays queued, unleased; no names, no claim', async () => {
    await db.kysely
      .insertInto('jobs')
      .values({
        name: 'from.newer.build',
        payload: '{}',
        status: 'queued',
        run_at: T - 10,
        created_at: T,
        updated_at: T,
      })
      .execute();
    const known = await repo.enqueue(purge(T), T);
    expect(await repo.claimDue('w', T, 30, 10, [])).toEqual([]);
    const claimed = await repo.claimDue('w', T, 30, 10, ['housekeeping.purge', 'order.validate']);
    expect(claimed.map((j) => j.id)).toEqual([known.id]);
    const newer = await db.kysely
      .selectFrom('jobs')
      .select(['status', 'attempts', 'lease_owner'])
      .where('name', '=', 'from.newer.build')
      .executeTakeFirstOrThrow();
    expect(newer).toEqual({ status: 'queued', attempts: 0, lease_owner: null });
    // Without names (tools, tests), every due job.
    expect((await repo.claimDue('w2', T, 30, 10)).length).toBe(1);
  });

  it('reschedule: queues the job, moves a queued one, leaves a running one alone (one statement)', async () => {
    const jobs = () =>
      db.kysely.selectFrom('jobs').select(['id', 'status', 'run_at', 'updated_at']).orderBy('id').execute();
    await repo.rescheduleInTransaction({ ...purge(T + 100), uniqueKey: 'r' }, T);
    const [queued] = await jobs();
    expect(queued).toMatchObject({ status: 'queued', run_at: T + 100 });
    await repo.rescheduleInTransaction({ ...purge(T + 500), uniqueKey: 'r' }, T + 1);
    expect(await jobs()).toEqual([{ ...queued, run_at: T + 500, updated_at: T + 1 }]);
    // Running, it keeps its key and its time; its successor is its own to queue.
    await db.kysely.updateTable('jobs').set({ run_at: T }).execute();
    const [running] = await repo.claimDue('w1', T, 30, 10);
    expect(running?.id).toBe(queued!.id);
    const before = await jobs();
    await repo.rescheduleInTransaction({ ...purge(T + 900), uniqueKey: 'r' }, T + 2);
    expect(await jobs()).toEqual(before);
  });

  it('claims due jobs earliest run_at first, and only up to the limit', async () => {
    const late = await repo.enqueue(purge(T - 10), T - 100);
    const early = await repo.enqueue(purge(T - 50), T - 100);
    const future = await repo.enqueue(purge(T + 10), T - 100);
    const middle = await repo.enqueue(purge(T - 30), T - 100);
    const two = await repo.claimDue('w1', T, 30, 2);
    expect(two.map((j) => j.id)).toEqual([early.id, middle.id]);
    expect(two[0]).toMatchObject({ status: 'running', attempts: 1, leaseOwner: 'w1', leaseExpiresAt: T + 30 });
    expect((await repo.claimDue('w2', T, 30, 10)).map((j) => j.id)).toEqual([late.id]);
    expect(await repo.claimDue('w2', T, 30, 10)).toEqual([]);
    expect((await repo.byId(future.id))?.status).toBe('queued');
  });

  it('never hands one job to two of 8 concurrent claimers', async () => {
    for (let i = 0; i < 50; i++) await repo.enqueue(purge(T - i), T - 100);
    const claimers = Array.from({ length: 8 }, (_, i) => ({
      owner: `w${i}`,
      repo: new JobsRepo(db),
      got: [] as JobId[],
    }));
    await Promise.all(
      claimers.map(async (c) => {
        for (;;) {
          const jobs = await c.repo.claimDue(c.owner, T, 60, 3);
          if (jobs.length === 0) return;
          c.got.push(...jobs.map((j) => j.id));
        }
      }),
    );
    const all = claimers.flatMap((c) => c.got);
    expect(all).toHaveLength(50);
    expect(new Set(all).size).toBe(50);
    const rows = await db.kysely.selectFrom('jobs').select(['id', 'lease_owner', 'attempts']).execute();
    for (const row of rows) {
      const holder = claimers.find((c) => c.got.includes(jobId(row.id)));
      expect(row.lease_owner).toBe(holder?.owner);
      expect(row.attempts).toBe(1);
    }
  });

  it('overdueSeconds: how long the longest-waiting claimable job has waited, queued or under a lapsed lease', async () => {
    expect(await repo.overdueSeconds(T)).toBe(0);
    await repo.enqueue(purge(T + 100), T); // not due yet
    expect(await repo.overdueSeconds(T + 50)).toBe(0);
    expect(await repo.overdueSeconds(T + 130)).toBe(30);
    const [claimed] = await repo.claimDue('w1', T + 130, 30, 10);
    expect(claimed).toBeDefined();
    // Running under its lease (through T + 160): not overdue; past it, overdue since it lapsed.
    expect(await repo.overdueSeconds(T + 160)).toBe(0);
    expect(await repo.overdueSeconds(T + 200)).toBe(40);
    // A queued job due earlier than the lease lapsed counts first.
    await repo.enqueue(purge(T + 140), T + 150);
    expect(await repo.overdueSeconds(T + 200)).toBe(60);
    expect(await repo.markDone(claimed!.id, 'w1', T + 150)).toBe(true);
    expect(await repo.overdueSeconds(T + 200)).toBe(60);
    const [second] = await repo.claimDue('w2', T + 200, 30, 10);
    expect(await repo.markDone(second!.id, 'w2', T + 201)).toBe(true);
    expect(await repo.overdueSeconds(T + 1000)).toBe(0);
  });

  it('lets another worker reclaim a job whose lease ran out, and refuses the old owner then', async () => {
    const { id } = await repo.enqueue(purge(T), T);
    await repo.claimDue('old', T, 10, 1);
    expect(await repo.claimDue('new', T + 10, 10, 1)).toEqual([]); // the lease holds through T+10
    const [taken] = await repo.claimDue('new', T + 11, 10, 1);
    expect(taken).toMatchObject({ id, attempts: 2, leaseOwner: 'new', leaseExpiresAt: T + 21 });
    expect(await repo.extendLease(id, 'old', T + 100)).toBe(false);
    expect(await repo.markDone(id, 'old', T + 12)).toBe(false);
    expect(await repo.markRetry(id, 'old', T + 20, 'x', T + 12)).toBe(false);
    expect(await repo.markDead(id, 'old', 'x', T + 12)).toBe(false);
    expect(await repo.extendLease(id, 'new', T + 40)).toBe(true);
    expect(await repo.claimDue('third', T + 30, 10, 1)).toEqual([]);
    expect(await repo.markDone(id, 'new', T + 13)).toBe(true);
    expect(await repo.markDone(id, 'new', T + 14)).toBe(false);
    expect((await repo.byId(id))?.status).toBe('done');
  });

  it('queues a retry for later with its error, and keeps a dead job out of the queue', async () => {
    const { id } = await repo.enqueue(purge(T, 'r'), T);
    await repo.claimDue('w', T, 10, 1);
    expect(await repo.markRetry(id, 'w', T + 40, 'upstream down', T + 1)).toBe(true);
    expect(await repo.byId(id)).toMatchObject({
      status: 'queued',
      runAt: T + 40,
      lastError: 'upstream down',
      leaseOwner: null,
      uniqueKey: 'r',
    });
    expect(await repo.claimDue('w', T + 39, 10, 1)).toEqual([]);
    const [again] = await repo.claimDue('w', T + 40, 10, 1);
    expect(again?.attempts).toBe(2);
    expect(await repo.markDead(id, 'w', 'x'.repeat(5000), T + 41)).toBe(true);
    const dead = await repo.byId(id);
    expect(dead).toMatchObject({ status: 'dead', uniqueKey: null, leaseExpiresAt: null });
    expect(dead?.lastError).toHaveLength(2000);
    expect(await repo.claimDue('w', T + 10_000, 10, 1)).toEqual([]);
    expect(await repo.countByStatus()).toEqual({ queued: 0, running: 0, done: 0, dead: 1 });
  });

  it('keeps one recurring job, and hands its key on to the next run', async () => {
    const first = await ensureRecurring(repo, 'housekeeping.purge', {}, 3600, T);
    expect(await ensureRecurring(repo, 'housekeeping.purge', {}, 3600, T + 5)).toBe(first);
    const [run] = await repo.claimDue('w', T, 60, 5);
    expect(run?.id).toBe(first);
    expect(await ensureRecurring(repo, 'housekeeping.purge', {}, 3600, T + 1)).toBe(first); // a restart while it runs
    const next = await ensureRecurring(repo, 'housekeeping.purge', {}, 3600, T + 2, { after: first });
    expect(next).not.toBe(first);
    // The old run re-executed after a crash finds its successor and adds nothing.
    expect(await ensureRecurring(repo, 'housekeeping.purge', {}, 3600, T + 3, { after: first })).toBe(next);
    expect(await repo.markDone(first, 'w', T + 3)).toBe(true);
    expect(await repo.byId(next)).toMatchObject({
      status: 'queued',
      runAt: T + 3602,
      uniqueKey: 'recurring:housekeeping.purge',
    });
    expect(await repo.countByStatus()).toEqual({ queued: 1, running: 0, done: 1, dead: 0 });
  });

  it('ends only the leases of owners judged gone, so their jobs are claimable before the leases lapse', async () => {
    const a = (await repo.enqueue(purge(T), T)).id;
    const b = (await repo.enqueue(purge(T), T)).id;
    await repo.claimDue('gone', T, 600, 1);
    await repo.claimDue('alive', T, 600, 1);
    expect(await repo.claimDue('w', T + 1, 600, 10)).toEqual([]);
    expect(await repo.endLeasesOfGoneOwners((owner) => owner === 'gone', T + 1)).toBe(1);
    const taken = await repo.claimDue('w', T + 1, 600, 10);
    expect(taken).toHaveLength(1);
    expect(taken[0]).toMatchObject({ leaseOwner: 'w', attempts: 2 });
    // The live owner keeps its job; a second sweep finds nothing more to end.
    expect((await repo.byId(taken[0]!.id === a ? b : a))?.leaseOwner).toBe('alive');
    expect(await repo.endLeasesOfGoneOwners((owner) => owner === 'gone', T + 2)).toBe(0);
  });

  const pg = dialect === 'postgres';
  if (!pg) console.warn('the jobs conflict-rerun tests are PostgreSQL only (SQLite has one writer at a time)');
  /**
   * PostgreSQL aborts the next `event` on jobs once with a serialization failure, as it would for a
   * conflict with another transaction (a sequence counts the calls: it is not rolled back).
   */
  async function conflictOnce(event: 'INSERT' | 'UPDATE', fn: () => Promise<void>): Promise<void> {
    await sql`CREATE SEQUENCE jobs_conflict_calls`.execute(db.kysely);
    await sql
      .raw(
        `CREATE FUNCTION jobs_conflict_once() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF nextval('jobs_conflict_calls') = 1 THEN
          RAISE EXCEPTION 'could not serialize access due to concurrent update' USING ERRCODE = '40001';
        END IF;
        RETURN NEW;
      END $$`,
      )
      .execute(db.kysely);
    await sql
      .raw(
        `CREATE TRIGGER jobs_conflict_once BEFORE ${event} ON jobs FOR EACH ROW EXECUTE FUNCTION jobs_conflict_once()`,
      )
      .execute(db.kysely);
    try {
      await fn();
      expect(
        Number(
          (await sql<{ n: string }>`SELECT last_value AS n FROM jobs_conflict_calls`.execute(db.kysely)).rows[0]!.n,
        ),
      ).toBeGreaterThan(1);
    } finally {
      await sql`DROP TRIGGER jobs_conflict_once ON jobs`.execute(db.kysely);
      await sql`DROP FUNCTION jobs_conflict_once()`.execute(db.kysely);
      await sql`DROP SEQUENCE jobs_conflict_calls`.execute(db.kysely);
    }
  }

  it.skipIf(!pg)('ok/an enqueue PostgreSQL aborted for a conflict runs again: the job is queued once', async () => {
    await conflictOnce('INSERT', async () => {
      const { created } = await repo.enqueue(purge(T, 'rerun'), T);
      expect(created).toBe(true);
    });
    expect(await repo.countByStatus()).toEqual({ queued: 1, running: 0, done: 0, dead: 0 });
  });

  it.skipIf(!pg)(
    'ok/a claim PostgreSQL aborted for a conflict runs again: the job is leased once, its attempt counted once',
    async () => {
      const { id } = await repo.enqueue(purge(T), T);
      await conflictOnce('UPDATE', async () => {
        const claimed = await repo.claimDue('w1', T, 30, 10);
        expect(claimed.map((j) => [j.id, j.attempts])).toEqual([[id, 1]]);
      });
      expect(await repo.byId(id)).toMatchObject({ status: 'running', leaseOwner: 'w1', attempts: 1 });
    },
  );
});
