import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDialects } from '../../../test/support/databases.js';
import { FixedClock, jobId } from '../../core/index.js';
import { CustomersRepo, DcvValuesRepo, JobsRepo, TokensRepo, UsersRepo, type Db } from '../../storage/index.js';
import { Housekeeping, PURGE_EVERY } from './housekeeping.js';

describe.each(testDialects())('Housekeeping on $dialect', ({ open }) => {
  let db: Db;
  beforeAll(async () => {
    db = await open();
  });
  afterAll(async () => db.close());

  it('schedules housekeeping.purge once, purges tokens and DCV values expired over a day ago, and re-schedules itself', async () => {
    const clock = new FixedClock(1_000_000);
    const jobs = new JobsRepo(db);
    const tokens = new TokensRepo(db);
    const dcvValues = new DcvValuesRepo(db);
    const hk = new Housekeeping({ tokens, dcvValues, jobs, clock });
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

    const [job] = await jobs.claimDue('test', clock.nowSeconds(), 60, 1);
    expect(job?.name).toBe('housekeeping.purge');
    await hk.purgeExpired({}, { id: jobId(job!.id) });
    const values = await db.kysely.selectFrom('dcv_values').select('csr_sha256').execute();
    expect(values.map((r) => r.csr_sha256)).toEqual(['live']);
    const left = await db.kysely.selectFrom('oauth_tokens').select('token_hash').orderBy('token_hash').execute();
    expect(left.map((r) => r.token_hash)).toEqual(['live', 'recent']);

    const next = await db.kysely
      .selectFrom('jobs')
      .select(['run_at', 'status'])
      .where('status', '=', 'queued')
      .execute();
    expect(next).toEqual([{ run_at: 1_000_000 + PURGE_EVERY, status: 'queued' }]);
  });
});
