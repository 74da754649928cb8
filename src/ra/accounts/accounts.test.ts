import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDialects } from '../../../test/support/databases.js';
import { FixedClock } from '../../core/index.js';
import { ApplicationsRepo, AuditRepo, CustomersRepo, UsersRepo, inTransaction, type Db } from '../../storage/index.js';
import { Accounts, type AccountRepos } from './accounts.js';

describe.each(testDialects())('Accounts on $dialect', ({ open }) => {
  let db: Db;
  beforeAll(async () => {
    db = await open();
  });
  afterAll(async () => db.close());

  const reposOf = (d: Db): AccountRepos => ({
    customers: new CustomersRepo(d),
    users: new UsersRepo(d),
    applications: new ApplicationsRepo(d),
    audit: new AuditRepo(d),
  });
  const input = { name: 'Acme', email: 'ops@acme.example', currency: 'EUR', creditLimit: 10 };

  it('ok/creates customer, admin user, application and audit events', async () => {
    const accounts = new Accounts({
      ...reposOf(db),
      transact: (fn) => inTransaction(db, (tx) => fn(reposOf(tx))),
      clock: new FixedClock(5),
      currencies: ['EUR'],
    });
    const created = await accounts.createCustomer(input);
    expect(created.user.roles).toEqual(['ADMIN']);
    expect(created.customer.creditLimitMinor).toBe(1000);
    const events = await new AuditRepo(db).listByCustomer(created.customer.id);
    expect(events.map((e) => e.action).sort()).toEqual(['application.created', 'customer.created']);
  });

  it('fail/a failure part-way leaves nothing behind', async () => {
    const before = (await new CustomersRepo(db).list()).length;
    const failing = (d: Db): AccountRepos => {
      const repos = reposOf(d);
      return {
        ...repos,
        audit: {
          append: async () => {
            throw new Error('disk full');
          },
        } as unknown as AuditRepo,
      };
    };
    const accounts = new Accounts({
      ...reposOf(db),
      transact: (fn) => inTransaction(db, (tx) => fn(failing(tx))),
      clock: new FixedClock(5),
      currencies: ['EUR'],
    });
    await expect(accounts.createCustomer(input)).rejects.toThrow('disk full');
    expect((await new CustomersRepo(db).list()).length).toBe(before);
    const orphans = await db.kysely
      .selectFrom('users')
      .select('id')
      .where('customer_id', 'not in', db.kysely.selectFrom('customers').select('id'))
      .execute();
    expect(orphans).toEqual([]);
  });

  it('fail/a currency the catalog does not price is refused', async () => {
    const accounts = new Accounts({
      ...reposOf(db),
      transact: (fn) => inTransaction(db, (tx) => fn(reposOf(tx))),
      clock: new FixedClock(5),
      currencies: ['EUR'],
    });
    await expect(accounts.createCustomer({ ...input, currency: 'SEK' })).rejects.toMatchObject({
      kind: 'invalidInput',
      field: 'currency',
    });
  });
});
