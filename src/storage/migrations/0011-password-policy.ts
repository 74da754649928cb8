import type { Kysely } from 'kysely';
import type { Dialect } from '../database.js';

/**
 * A password policy per customer (issue: sub-users): the least length of its users' passwords.
 * The other rules (not containing the username or the e-mail's local part, not a common
 * password) hold for every customer.
 */
export function passwordPolicy(_dialect: Dialect) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .alterTable('customers')
        .addColumn('password_min_length', 'integer', (c) => c.notNull().defaultTo(12))
        .execute();
    },
  };
}
