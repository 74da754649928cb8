import pino from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { testDialects } from '../../test/support/databases.js';
import { FixedClock, type JobId } from '../core/index.js';
import { openDatabase, type Db } from '../storage/database.js';
import { JobsRepo } from '../storage/jobs-repo.js';
import { exponentialBackoff } from './backoff.js';
import type { Handlers, JobContext, WorkerLogger } from './handlers.js';
import { Worker, type WorkerOptions } from './worker.js';

const T = 1_800_000_000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function memoryLogger() {
  const lines: { level: string; msg: string | undefined; obj: object }[] = [];
  const at = (level: string) => (obj: object, msg?: string) => void lines.push({ level, msg, obj });
  const logger: WorkerLogger = { info: at('info'), warn: at('warn'), error: at('error') };
  return { logger, lines };
}

// Compile-time checks: a registry without a handler for every job name does not compile, and a
// pino logger is a WorkerLogger.
// @ts-expect-error 'housekeeping.purge' is missing
const _incomplete = {} satisfies Handlers;
const _pino: WorkerLogger = pino({ level: 'silent' });

describe('exponentialBackoff', () => {
  it('doubles per attempt from 2 × base, caps at an hour and takes off at most the jitter share', () => {
    const exact = exponentialBackoff({ baseSeconds: 5, jitter: 0.25, random: () => 0 });
    expect([1, 2, 3, 10, 30].map(exact)).toEqual([10, 20, 40, 3600, 3600]);
    const most = exponentialBackoff({ baseSeconds: 5, jitter: 0.25, random: () => 0.999_999 });
    expect(most(1)).toBe(8);
    expect(most(20)).toBe(2700);
  });
});

describe.each(testDialects())('Worker on $dialect', ({ open }) => {
  let db: Db;
  let repo: JobsRepo;
  let clock: FixedClock;
  beforeAll(async () => {
    db = await open();
    repo = new JobsRepo(db);
  });
  afterAll(async () => {
    await db.close();
  });
  beforeEach(async () => {
    await db.kysely.deleteFrom('jobs').execute();
    clock = new FixedClock(T);
  });

  const enqueue = async () =>
    (await repo.enqueue({ name: 'housekeeping.purge', payload: {}, runAt: clock.nowSeconds() }, clock.nowSeconds())).id;
  const worker = (run: Handlers['housekeeping.purge'], options: Partial<WorkerOptions> = {}) =>
    new Worker({
      repo,
      clock,
      logger: memoryLogger().logger,
      handlers: {
        'housekeeping.purge': run,
        'ca.refresh-crls': async () => undefined,
        'order.validate': async () => undefined,
        'order.renew-subscriptions': async () => undefined,
        'notify.reminders': async () => undefined,
        'order.revoke-certificates': async () => undefined,
        'scan.vulnerability': async () => undefined,
        'scan.configuration': async () => undefined,
        'mail.deliver': async () => undefined,
      } satisfies Handlers,
      pollIntervalMs: 20,
      ...options,
    });

  it('runs a due job with its payload and marks it done', async () => {
    const id = await enqueue();
    const seen: [unknown, JobContext][] = [];
    const w = worker(async (payload, ctx) => void seen.push([payload, ctx]));
    expect(await w.runOnce()).toBe(1);
    expect(seen).toEqual([[{}, expect.objectContaining({ id, name: 'housekeeping.purge', attempts: 1 })]]);
    expect(await repo.byId(id)).toMatchObject({ status: 'done', attempts: 1, leaseOwner: w.owner });
    expect(await w.runOnce()).toBe(0);
  });

  it('retries a failing job after an exponential backoff', async () => {
    const id = await enqueue();
    let calls = 0;
    const w = worker(
      async () => {
        if (++calls <= 2) throw new Error(`flaky ${calls}`);
      },
      { backoff: exponentialBackoff({ baseSeconds: 5, random: () => 0 }) },
    );
    expect(await w.runOnce()).toBe(1);
    expect(await repo.byId(id)).toMatchObject({ status: 'queued', runAt: T + 10, lastError: 'flaky 1' });
    clock.advance(9);
    expect(await w.runOnce()).toBe(0);
    clock.advance(1);
    expect(await w.runOnce()).toBe(1);
    expect(await repo.byId(id)).toMatchObject({ status: 'queued', runAt: T + 30, attempts: 2, lastError: 'flaky 2' });
    clock.set(T + 30);
    expect(await w.runOnce()).toBe(1);
    expect(await repo.byId(id)).toMatchObject({ status: 'done', attempts: 3 });
  });

  it('marks a job dead after maxAttempts failures; one of a newer build is left queued for a worker that knows it', async () => {
    const id = await enqueue();
    await db.kysely
      .insertInto('jobs')
      .values({ name: 'from.newer.build', payload: '{}', status: 'queued', run_at: T, created_at: T, updated_at: T })
      .execute();
    const { logger, lines } = memoryLogger();
    const w = worker(
      async () => {
        throw new Error('always');
      },
      { maxAttempts: 3, logger },
    );
    for (let i = 0; i < 3; i++) {
      expect(await w.runOnce()).toBe(1);
      clock.advance(3600);
    }
    expect(await w.runOnce()).toBe(0);
    expect(await repo.byId(id)).toMatchObject({ status: 'dead', attempts: 3, lastError: 'always' });
    expect(await repo.countByStatus()).toEqual({ queued: 1, running: 0, done: 0, dead: 1 });
    expect(lines.filter((l) => l.msg === 'job failed for the last time: dead')).toHaveLength(1);
    // A rolling upgrade: this build has no handler for it, so it never leases it (no attempt used).
    const newer = await db.kysely
      .selectFrom('jobs')
      .select(['status', 'attempts', 'lease_owner'])
      .where('name', '=', 'from.newer.build')
      .executeTakeFirstOrThrow();
    expect(newer).toEqual({ status: 'queued', attempts: 0, lease_owner: null });
  });

  it('renews the lease while a long handler runs', async () => {
    const id = await enqueue();
    let leaseSeen: number | null | undefined;
    const w = worker(
      async () => {
        clock.advance(30);
        await sleep(500); // renewal every third of the one-second lease
        leaseSeen = (await repo.byId(id))?.leaseExpiresAt;
      },
      { leaseSeconds: 1 },
    );
    await w.runOnce();
    expect(leaseSeen).toBe(T + 31);
  });

  it('stop() during the sweep before a claim waits for the sweep, then claims nothing', async () => {
    await enqueue();
    let sweeping!: () => void;
    const inSweep = new Promise<void>((resolve) => (sweeping = resolve));
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let claims = 0;
    class SlowSweep extends JobsRepo {
      override async endLeasesOfGoneOwners(...args: Parameters<JobsRepo['endLeasesOfGoneOwners']>) {
        sweeping();
        await released;
        return super.endLeasesOfGoneOwners(...args);
      }
      override claimDue(...args: Parameters<JobsRepo['claimDue']>) {
        claims++;
        return super.claimDue(...args);
      }
    }
    const ran = vi.fn(async () => undefined);
    const w = worker(ran, { repo: new SlowSweep(db) });
    w.start();
    await inSweep;
    let stopped = false;
    const stopping = w.stop().then(() => (stopped = true));
    await sleep(100);
    // Before: stop() resolved at once, and the poll went on to claim and run the job.
    expect(stopped).toBe(false);
    release();
    await stopping;
    expect(claims).toBe(0);
    expect(ran).not.toHaveBeenCalled();
  });

  it('polls that fail for the database and pass in turn: one warning and one "back" a minute, not one each', async () => {
    const unreachable = await openDatabase({ url: 'postgres://postgres@127.0.0.1:9/none', poolSize: 1 });
    const refused = await new JobsRepo(unreachable).claimDue('w', T, 10, 1, ['housekeeping.purge']).then(
      () => undefined,
      (e: unknown) => e,
    );
    await unreachable.close();
    expect(refused).toBeInstanceOf(Error);
    let polls = 0;
    class EveryOtherPollFails extends JobsRepo {
      override claimDue(...args: Parameters<JobsRepo['claimDue']>) {
        return polls++ % 2 === 0 ? Promise.reject(refused as Error) : super.claimDue(...args);
      }
    }
    const { logger, lines } = memoryLogger();
    const w = worker(async () => undefined, { repo: new EveryOtherPollFails(db), logger, pollIntervalMs: 5 });
    w.start();
    await vi.waitFor(() => expect(polls).toBeGreaterThanOrEqual(20), { timeout: 20_000 });
    await w.stop();
    expect(lines.filter((l) => l.level !== 'info').map((l) => l.msg)).toEqual([
      'job poll failed: database unavailable; polling on',
    ]);
    expect(lines.filter((l) => l.msg === 'job poll: the database is back')).toHaveLength(1);
  });

  it('stop() takes no new job and resolves once the job in hand has finished', async () => {
    const first = await enqueue();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const started: JobId[] = [];
    const w = worker(
      async (_p, ctx) => {
        started.push(ctx.id);
        await gate;
      },
      { concurrency: 1 },
    );
    w.start();
    await vi.waitFor(() => expect(started).toEqual([first]));
    const second = await enqueue();
    let stopped: boolean | undefined;
    const stopping = w.stop().then((drained) => (stopped = drained));
    await sleep(100);
    expect(stopped).toBeUndefined();
    release();
    await stopping;
    expect(stopped).toBe(true);
    expect((await repo.byId(first))?.status).toBe('done');
    expect((await repo.byId(second))?.status).toBe('queued');
    expect(started).toEqual([first]);
  });

  it('leaves a job that outlasts the drain timeout to its lease, for another worker to take over', async () => {
    const id = await enqueue();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let signal: AbortSignal | undefined;
    const { logger, lines } = memoryLogger();
    const w = worker(
      async (_p, ctx) => {
        signal = ctx.signal;
        await gate;
      },
      { leaseSeconds: 10, logger },
    );
    w.start();
    await vi.waitFor(() => expect(signal).toBeDefined());
    expect(await w.stop(50)).toBe(false);
    expect(signal?.aborted).toBe(true);
    expect(await repo.byId(id)).toMatchObject({ status: 'running', leaseOwner: w.owner, leaseExpiresAt: T + 10 });
    clock.advance(11);
    const other = worker(async () => undefined);
    expect(await other.runOnce()).toBe(1);
    release(); // the first handler ends late: its outcome must not overwrite the new owner's
    await vi.waitFor(() => expect(lines.some((l) => l.msg === 'job outcome not recorded: lease lost')).toBe(true));
    expect(await repo.byId(id)).toMatchObject({ status: 'done', attempts: 2, leaseOwner: other.owner });
  });

  it('runs each of 40 jobs exactly once with two workers polling one database', async () => {
    const ids = new Set<JobId>();
    for (let i = 0; i < 40; i++) ids.add(await enqueue());
    const runs = new Map<JobId, number>();
    const byWorker = [0, 0];
    const make = (n: number) =>
      worker(async (_p, ctx) => {
        runs.set(ctx.id, (runs.get(ctx.id) ?? 0) + 1);
        byWorker[n]! += 1;
        await sleep(5);
      });
    const workers = [make(0), make(1)];
    for (const w of workers) w.start();
    await vi.waitFor(async () => expect((await repo.countByStatus()).done).toBe(40), { timeout: 10_000, interval: 50 });
    expect(await Promise.all(workers.map((w) => w.stop()))).toEqual([true, true]);
    expect([...runs.keys()].sort()).toEqual([...ids].sort());
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    expect(byWorker.every((n) => n > 0)).toBe(true);
  });
});

describe('Worker while the database cannot be reached', () => {
  it('warns once when polls start failing for it, not at every poll, and never logs it as an error', async () => {
    // Nothing listens on the discard port: every poll fails at once with ECONNREFUSED, as in a restart.
    const db = await openDatabase({ url: 'postgres://postgres@127.0.0.1:9/none', poolSize: 1 });
    let polls = 0;
    class CountingRepo extends JobsRepo {
      override claimDue(...args: Parameters<JobsRepo['claimDue']>) {
        polls++;
        return super.claimDue(...args);
      }
    }
    const { logger, lines } = memoryLogger();
    const w = new Worker({
      repo: new CountingRepo(db),
      clock: new FixedClock(T),
      logger,
      handlers: {} as Handlers,
      pollIntervalMs: 5,
    });
    try {
      w.start();
      await vi.waitFor(() => expect(polls).toBeGreaterThanOrEqual(10), { timeout: 20_000 });
    } finally {
      await w.stop();
      await db.close();
    }
    expect(lines.filter((l) => l.level === 'error')).toEqual([]);
    expect(lines.filter((l) => l.level === 'warn').map((l) => l.msg)).toEqual([
      'job poll failed: database unavailable; polling on',
    ]);
  });
});
