import type { Kysely } from 'kysely';
import type { Dialect } from '../database.js';
import { idColumn } from './columns.js';

/**
 * A second factor for people (RFC 6238 TOTP): a user's secret once enrolment is verified (and the
 * one being enrolled), the last time step accepted (a code is good once), single-use recovery
 * codes stored hashed, a customer setting that requires it, and sessions that are past the
 * password but not yet past the code.
 */
export function twoFactor(dialect: Dialect) {
  const id = idColumn(dialect);
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema.alterTable('users').addColumn('totp_secret', 'text').execute();
      await db.schema.alterTable('users').addColumn('totp_pending', 'text').execute();
      await db.schema.alterTable('users').addColumn('totp_last_step', 'bigint').execute();
      await db.schema
        .alterTable('customers')
        .addColumn('require_two_factor', 'integer', (c) => c.notNull().defaultTo(0))
        .execute();
      await db.schema
        .alterTable('web_sessions')
        .addColumn('second_factor_pending', 'integer', (c) => c.notNull().defaultTo(0))
        .execute();
      await id(db.schema.createTable('recovery_codes'))
        .addColumn('user_id', 'bigint', (c) => c.notNull())
        .addColumn('code_hash', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('used_at', 'bigint')
        .execute();
      await db.schema.createIndex('recovery_codes_user').on('recovery_codes').column('user_id').execute();
    },
  };
}
