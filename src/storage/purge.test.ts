// A purge a batch at a time (`deleteInBatches`): every row it selects deleted, once, even by two
// purges at once, the others kept; on SQLite the event loop serves between two batches.
import { sql } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { testDialects } from '../../test/support/databases.js';
import type { Db } from './database.js';
import { JobsRepo } from './jobs-repo.js';
import { deleteInBatches, ExpiredRows } from './purge.js';

/** 1,050 jobs done long ago, and beside them ones to keep: done lately, queued, dead. */
async function seed(db: Db): Promise<void> {
  await db.kysely.deleteFrom('jobs').execute();
  const row = (status: string, updatedAt: number, i: number) => ({
    name: 'mail.deliver',
    payload: JSON.stringify({ i }),
    status,
    run_at: updatedAt,
    created_at: updatedAt,
    updated_at: updatedAt,
  });
  const rows = [
    ...Array.from({ length: 1_050 }, (_, i) => row('done', 1_000 + i, i)),
    ...Array.from({ length: 30 }, (_, i) => row('done', 100_000 + i, i)),
    ...Array.from({ length: 20 }, (_, i) => row('queued', 1_000 + i, i)),
    ...Array.from({ length: 10 }, (_, i) => row('dead', 1_000 + i, i)),
  ];
  for (let i = 0; i < rows.length; i += 200)
    await db.kysely
      .insertInto('jobs')
      .values(rows.slice(i, i + 200))
      .execute();
}

const oldDone = sql`status = 'done' AND updated_at < ${50_000}`;

describe.each(testDialects())('deleteInBatches on $dialect', ({ open }) => {
  let db: Db;
  beforeAll(async () => {
    db = await open();
  });
  afterAll(async () => db.close());

  beforeEach(async () => seed(db));
  const left = async () =>
    (
      await db.kysely
        .selectFrom('jobs')
        .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
        .groupBy('status')
        .orderBy('status')
        .execute()
    ).map((r) => [r.status, Number(r.n)]);

  it('ok/deletes every row selected, a batch at a time, and keeps the rest', async () => {
    expect(await deleteInBatches(db, 'jobs', oldDone, 100)).toBe(1_050);
    expect(await left()).toEqual([
      ['dead', 10],
      ['done', 30],
      ['queued', 20],
    ]);
    expect(await deleteInBatches(db, 'jobs', oldDone, 100)).toBe(0);
  });

  it('ok/JobsRepo.purgeDone: jobs done before the time given, never a queued or dead one', async () => {
    expect(await new JobsRepo(db).purgeDone(50_000)).toBe(1_050);
    expect(await left()).toEqual([
      ['dead', 10],
      ['done', 30],
      ['queued', 20],
    ]);
  });

  it('ok/two purges at once (two workers): each row deleted once, none left', async () => {
    const counts = await Promise.all([
      deleteInBatches(db, 'jobs', oldDone, 50),
      deleteInBatches(db, 'jobs', oldDone, 50),
    ]);
    // One may stop early on a batch the other had emptied; a last run finds what is left.
    const rest = await deleteInBatches(db, 'jobs', oldDone, 50);
    expect(counts[0]! + counts[1]! + rest).toBe(1_050);
    expect(await left()).toEqual([
      ['dead', 10],
      ['done', 30],
      ['queued', 20],
    ]);
  });
});

describe.each(testDialects())('ExpiredRows on $dialect', ({ open }) => {
  let db: Db;
  beforeAll(async () => {
    db = await open();
  });
  afterAll(async () => db.close());

  it('ok/deletes sessions, operator sessions and codes that expired before the time given, and sign-in failures neither counted nor blocking since; keeps the rest', async () => {
    const B = 1_000_000;
    const session = (hash: string, expiresAt: number) => ({
      token_hash: hash,
      user_id: 1,
      customer_id: 1,
      csrf: 'c',
      created_at: 1,
      expires_at: expiresAt,
      revoked_at: null,
    });
    await db.kysely
      .insertInto('web_sessions')
      .values([session('ended', B - 1), session('live', B + 1)])
      .execute();
    await db.kysely
      .insertInto('operator_sessions')
      .values(
        [session('ended', B - 1), session('live', B + 1)].map(({ user_id, customer_id, ...s }) => ({
          ...s,
          operator_id: user_id + customer_id,
          last_seen_at: 1,
        })),
      )
      .execute();
    const code = (hash: string, expiresAt: number) => ({
      code_hash: hash,
      application_id: 1,
      user_id: 1,
      customer_id: 1,
      redirect_uri: 'https://app.example/cb',
      scopes: 'read',
      code_challenge: null,
      created_at: 1,
      expires_at: expiresAt,
      used_at: null,
    });
    await db.kysely
      .insertInto('oauth_codes')
      .values([code('ended', B - 1), code('live', B + 1)])
      .execute();
    await db.kysely
      .insertInto('sign_in_failures')
      .values([
        { key: 'a:forgotten', failures: 9, blocked_until: B - 1, updated_at: B - 1 },
        { key: 'a:still-blocked', failures: 9, blocked_until: B + 60, updated_at: B - 1 },
        { key: 'a:counted', failures: 2, blocked_until: 0, updated_at: B + 1 },
      ])
      .execute();

    expect(await new ExpiredRows(db).purge(B)).toEqual({
      oauth_tokens: 0,
      oauth_codes: 1,
      web_sessions: 1,
      operator_sessions: 1,
      dcv_values: 0,
      sign_in_failures: 1,
    });
    const keys = async (table: 'web_sessions' | 'operator_sessions') =>
      (await db.kysely.selectFrom(table).select('token_hash').execute()).map((r) => r.token_hash);
    expect(await keys('web_sessions')).toEqual(['live']);
    expect(await keys('operator_sessions')).toEqual(['live']);
    expect((await db.kysely.selectFrom('oauth_codes').select('code_hash').execute()).map((r) => r.code_hash)).toEqual([
      'live',
    ]);
    const failures = await db.kysely.selectFrom('sign_in_failures').select('key').orderBy('key').execute();
    expect(failures.map((r) => r.key)).toEqual(['a:counted', 'a:still-blocked']);
  });
});

describe('deleteInBatches on SQLite, whose statements hold the event loop', () => {
  let db: Db;
  beforeAll(async () => {
    db = await testDialects()[0]!.open();
    await seed(db);
  });
  afterAll(async () => db.close());

  it('ok/what waits on the event loop runs between two batches, while rows are still left', async () => {
    const purge = deleteInBatches(db, 'jobs', oldDone, 100);
    const seen = await new Promise<number>((resolve) =>
      setImmediate(() => {
        void db.kysely
          .selectFrom('jobs')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('status', '=', 'done')
          .executeTakeFirstOrThrow()
          .then((r) => resolve(Number(r.n)));
      }),
    );
    expect(await purge).toBe(1_050);
    // Some batches were deleted and some still to go when it ran.
    expect(seen).toBeLessThan(1_080);
    expect(seen).toBeGreaterThan(30);
  });
});
