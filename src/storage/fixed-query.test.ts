import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDialects } from '../../test/support/databases.js';
import { CustomersRepo } from './customers-repo.js';
import { fixedQuery, inTransaction, type Db } from './database.js';

const base = {
  email: 'ops@acme.test',
  currency: 'EUR',
  creditLimitMinor: 0,
  country: 'DE',
  locale: 'de_DE',
  timezone: 'UTC',
};

const customerNamed = fixedQuery((k, name: string) =>
  k.selectFrom('customers').select(['id', 'name']).where('name', '=', name).orderBy('id').limit(sql.lit(5)),
);

describe.each(testDialects())('fixedQuery on $dialect', ({ open }) => {
  let db: Db;
  beforeAll(async () => {
    db = await open();
    const customers = new CustomersRepo(db);
    await customers.create({ ...base, name: 'Alpha' }, 1);
    await customers.create({ ...base, name: 'Beta' }, 1);
  });
  afterAll(async () => {
    await db.close();
  });

  it('ok/compiled once, each call runs with its own arguments', async () => {
    expect((await customerNamed(db, 'Alpha')).map((r) => r.name)).toEqual(['Alpha']);
    expect((await customerNamed(db, 'Beta')).map((r) => r.name)).toEqual(['Beta']);
    expect(await customerNamed(db, 'Gamma')).toEqual([]);
    // A value that only looks like SQL is a parameter like any other.
    expect(await customerNamed(db, "Alpha' OR '1'='1")).toEqual([]);
  });

  it('ok/inside a transaction it reads what the transaction wrote', async () => {
    await inTransaction(db, async (tx) => {
      await new CustomersRepo(tx).create({ ...base, name: 'Delta' }, 1);
      expect((await customerNamed(tx, 'Delta')).map((r) => r.name)).toEqual(['Delta']);
      expect((await customerNamed(tx, 'Alpha')).map((r) => r.name)).toEqual(['Alpha']);
    });
  });

  it('fail/a builder whose parameters are not its arguments in order is refused at its first call', async () => {
    const constant = fixedQuery((k, name: string) =>
      k.selectFrom('customers').select('id').where('country', '=', 'DE').where('name', '=', name),
    );
    await expect(constant(db, 'Alpha')).rejects.toThrow(/not its arguments/);
    const swapped = fixedQuery((k, a: string, b: string) =>
      k.selectFrom('customers').select('id').where('name', '=', b).where('email', '=', a),
    );
    await expect(swapped(db, 'ops@acme.test', 'Alpha')).rejects.toThrow(/not its arguments/);
  });
});
