import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDialects } from '../../../test/support/databases.js';
import { FixedClock, jobId } from '../../core/index.js';
import {
  CustomersRepo,
  DcvValuesRepo,
  ExpiredRows,
  JobsRepo,
  TokensRepo,
  UsersRepo,
  type Db,
} from '../../storage/index.js';
import { DONE_JOBS_KEPT_SECONDS, Housekeeping, PURGE_EVERY } from './housekeeping.js';

describe.each(testDialects())('Housekeeping on $dialect', ({ open }) => {
  let db: Db;
  beforeAll(async () => {
    db = await open();
  });
  afterAll(async () => db.close());

  it('schedules housekeeping.purge once, purges tokens and DCV values expired over a day ago and jobs done over a week ago (not dead ones), and re-schedules itself', async () => {
    const clock = new FixedClock(1_000_000);
    const jobs = new JobsRepo(db);
    const tokens = new TokensRepo(db);
    const dcvValues = new DcvValuesRepo(db);
    const hk = new Housekeeping({ expired: new ExpiredRows(db), jobs, clock });
    await hk.schedule();
    await hk.schedule();
    expect((await jobs.countByStatus()).queued).toBe(1);

    const c = await new CustomersRepo(db).create(
      {
        name: 'c',
        email: 'c@x.example',
        currency: 'EUR',
        creditLimitMinor: 0,
        country: 'DE',
        locale: 'de_DE',
        timezone: 'UTC',
      },
      1,
    );
    const u = await new UsersRepo(db).create(
      {
        customerId: c.id,
        username: 'hk-user',
        fullName: 'u',
        email: 'u@x.example',
        passwordHash: 'x',
        roles: ['ADMIN'],
      },
      1,
    );
    const base = {
      kind: 'access' as const,
      family: 'f',
      applicationId: null,
      userId: u.id,
      customerId: c.id,
      scopes: ['read' as const],
      authType: 'API' as const,
    };
    await tokens.insert(
      [
        { ...base, hash: 'old', expiresAt: 1_000_000 - 90_000 },
        { ...base, hash: 'recent', expiresAt: 1_000_000 - 10 },
        { ...base, hash: 'live', expiresAt: 1_000_000 + 10 },
      ],
      1,
    );

    await dcvValues.getOrCreate(
      { customerId: c.id, caBrand: 'B', csrSha256: 'old' },
      'v1',
      1_000_000 - 200_000,
      100_000,
    );
    await dcvValues.getOrCreate({ customerId: c.id, caBrand: 'B', csrSha256: 'live' }, 'v2', 1_000_000, 100_000);

    // Jobs that ended long ago and lately (the recurring job's own run is the one queued now).
    const ended = (status: string, updatedAt: number) => ({
      name: 'mail.deliver',
      payload: JSON.stringify({ status, updatedAt }),
      status,
      run_at: updatedAt,
      created_at: updatedAt,
      updated_at: updatedAt,
    });
    await db.kysely
      .insertInto('jobs')
      .values([
        ended('done', 1_000_000 - DONE_JOBS_KEPT_SECONDS - 1),
        ended('done', 1_000_000 - DONE_JOBS_KEPT_SECONDS + 1),
        ended('dead', 1),
      ])
      .execute();

    const [job] = await jobs.claimDue('test', clock.nowSeconds(), 60, 1);
    expect(job?.name).toBe('housekeeping.purge');
    await hk.purgeExpired({}, { id: jobId(job!.id) });
    const values = await db.kysely.selectFrom('dcv_values').select('csr_sha256').execute();
    expect(values.map((r) => r.csr_sha256)).toEqual(['live']);
    const left = await db.kysely.selectFrom('oauth_tokens').select('token_hash').orderBy('token_hash').execute();
    expect(left.map((r) => r.token_hash)).toEqual(['live', 'recent']);

    const kept = await db.kysely
      .selectFrom('jobs')
      .select(['status', 'updated_at'])
      .where('name', '=', 'mail.deliver')
      .orderBy('updated_at')
      .execute();
    expect(kept).toEqual([
      { status: 'dead', updated_at: 1 },
      { status: 'done', updated_at: 1_000_000 - DONE_JOBS_KEPT_SECONDS + 1 },
    ]);

    const next = await db.kysely
      .selectFrom('jobs')
      .select(['run_at', 'status'])
      .where('status', '=', 'queued')
      .execute();
    expect(next).toEqual([{ run_at: 1_000_000 + PURGE_EVERY, status: 'queued' }]);
  });
});
