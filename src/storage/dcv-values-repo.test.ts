// DCV values: one per (customer, CA brand, CSR), the same to every caller and every process while
// it lives. A process keeps the values it read committed until they expire (`known`): the tests
// count the statements a second read sends, and check that what is kept is what every other
// process reads, through expiry, races and a rolled-back transaction.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newCustomer } from '../../test/support/customers.js';
import { testDialects } from '../../test/support/databases.js';
import type { CustomerId } from '../core/index.js';
import { inTransaction, type Db } from './database.js';
import { DcvValuesRepo } from './dcv-values-repo.js';

const TTL = 30 * 86_400;

describe.each(testDialects())('DCV values on $dialect', ({ open }) => {
  let db: Db;
  let customerId: CustomerId;
  beforeAll(async () => {
    db = await open();
    customerId = await newCustomer(db, 'c');
  });
  afterAll(async () => db?.close());

  /** `db` with every statement run through it counted (subqueries pass transformQuery too, not transformResult). */
  const counting = () => {
    const sent = { n: 0 };
    const kysely = db.kysely.withPlugin({
      transformQuery: (args) => args.node,
      transformResult: (args) => {
        sent.n++;
        return Promise.resolve(args.result);
      },
    });
    return { db: { ...db, kysely }, sent };
  };
  const key = (csr: string) => ({ customerId, caBrand: 'TrustPoint', csrSha256: csr });

  it('ok/a second read of a live value in the same process sends nothing, and gives the value stored', async () => {
    const { db: counted, sent } = counting();
    const repo = new DcvValuesRepo(counted);
    const first = await repo.getOrCreate(key('a'.repeat(64)), 'value-a', 1_000, TTL);
    expect(first).toBe('value-a');
    const before = sent.n;
    expect(await repo.getOrCreate(key('a'.repeat(64)), 'another', 2_000, TTL)).toBe('value-a');
    expect(sent.n).toBe(before);
    // Another process reads the same from the database.
    expect(await new DcvValuesRepo(db).getOrCreate(key('a'.repeat(64)), 'third', 2_000, TTL)).toBe('value-a');
  });

  it('ok/a kept value is read again in its last five minutes (the clock of another process may run ahead)', async () => {
    const { db: counted, sent } = counting();
    const repo = new DcvValuesRepo(counted);
    const csr = 'f'.repeat(64);
    expect(await repo.getOrCreate(key(csr), 'value-f', 1_000, TTL)).toBe('value-f');
    let before = sent.n;
    expect(await repo.getOrCreate(key(csr), 'x', 1_000 + TTL - 301, TTL)).toBe('value-f');
    expect(sent.n).toBe(before);
    before = sent.n;
    expect(await repo.getOrCreate(key(csr), 'x', 1_000 + TTL - 299, TTL)).toBe('value-f');
    expect(sent.n).toBeGreaterThan(before);
  });

  it('ok/a value kept past its expiry is not used: the value that replaced it in the database is', async () => {
    const csr = 'b'.repeat(64);
    const here = new DcvValuesRepo(db);
    const elsewhere = new DcvValuesRepo(db);
    expect(await here.getOrCreate(key(csr), 'old', 1_000, 100)).toBe('old');
    // Expired at 1,100: another process replaces it first.
    expect(await elsewhere.getOrCreate(key(csr), 'renewed', 1_200, TTL)).toBe('renewed');
    expect(await here.getOrCreate(key(csr), 'mine', 1_300, TTL)).toBe('renewed');
  });

  it('race/ten processes asking at once for a new key: all get the one value stored, and keep that one', async () => {
    const csr = 'c'.repeat(64);
    const processes = Array.from({ length: 10 }, () => new DcvValuesRepo(db));
    const got = await Promise.all(processes.map((p, i) => p.getOrCreate(key(csr), `candidate-${i}`, 1_000, TTL)));
    expect(new Set(got).size).toBe(1);
    const stored = await new DcvValuesRepo(db).live(key(csr), 1_000);
    expect(got[0]).toBe(stored);
    const again = await Promise.all(processes.map((p) => p.getOrCreate(key(csr), 'late', 2_000, TTL)));
    expect(again).toEqual(Array.from({ length: 10 }, () => stored));
  });

  it('fail/a value made in a transaction that rolls back is kept by nobody: the next read stores its own', async () => {
    const csr = 'd'.repeat(64);
    const root = new DcvValuesRepo(db);
    await expect(
      inTransaction(db, async (tx) => {
        expect(await new DcvValuesRepo(tx).getOrCreate(key(csr), 'rolled-back', 1_000, TTL)).toBe('rolled-back');
        throw new Error('changed its mind');
      }),
    ).rejects.toThrow('changed its mind');
    expect(await root.getOrCreate(key(csr), 'stored', 1_000, TTL)).toBe('stored');
    expect(await new DcvValuesRepo(db).live(key(csr), 1_000)).toBe('stored');
  });

  it('ok/another customer with the same CSR gets a value of its own, not the one kept for the first', async () => {
    const csr = 'e'.repeat(64);
    const repo = new DcvValuesRepo(db);
    expect(await repo.getOrCreate(key(csr), 'first-customer', 1_000, TTL)).toBe('first-customer');
    const other = await newCustomer(db, 'd');
    expect(await repo.getOrCreate({ ...key(csr), customerId: other }, 'second-customer', 1_000, TTL)).toBe(
      'second-customer',
    );
    expect(await repo.getOrCreate(key(csr), 'y', 1_000, TTL)).toBe('first-customer');
  });
});
