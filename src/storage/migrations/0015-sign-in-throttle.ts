import type { Kysely } from 'kysely';
import type { Dialect } from '../database.js';

/**
 * Failed sign-ins per account (`u:<username>`) and per client address (`a:<address>`), with the
 * time until which the key may not try again. Shared by every process on the database.
 */
export function signInThrottle(_dialect: Dialect) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable('sign_in_failures')
        .addColumn('key', 'text', (c) => c.primaryKey())
        .addColumn('failures', 'integer', (c) => c.notNull())
        .addColumn('blocked_until', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .execute();
    },
  };
}
