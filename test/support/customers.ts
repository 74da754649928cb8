import type { CustomerId } from '../../src/core/index.js';
import { CustomersRepo, type Db } from '../../src/storage/index.js';

/** A customer named `name` (no credit), straight in the database, for storage tests. */
export async function newCustomer(db: Db, name: string): Promise<CustomerId> {
  const customer = await new CustomersRepo(db).create(
    {
      name,
      email: `${name}@example.com`,
      currency: 'EUR',
      creditLimitMinor: 0,
      country: 'DE',
      locale: 'de_DE',
      timezone: 'UTC',
    },
    1,
  );
  return customer.id;
}
