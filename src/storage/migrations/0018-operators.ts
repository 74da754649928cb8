import type { Kysely } from 'kysely';
import type { Dialect } from '../database.js';
import { idColumn } from './columns.js';

/**
 * Operators (the issue's operator screens): the service's own staff, apart from customers'
 * users. `operators` holds each one's argon2id password hash and sealed TOTP seed (a second
 * factor is mandatory), `operator_sessions` their signed-in browsers (known by the SHA-256 of the
 * cookie, with the CSRF token of their forms and the last request, for the idle limit), and
 * `customers.suspended_at` the operator's suspension of a customer.
 */
export function operators(dialect: Dialect) {
  const id = idColumn(dialect);
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await id(db.schema.createTable('operators'))
        .addColumn('username', 'text', (c) => c.notNull().unique())
        .addColumn('password_hash', 'text', (c) => c.notNull())
        .addColumn('totp_secret', 'text', (c) => c.notNull())
        .addColumn('totp_last_step', 'bigint')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('disabled_at', 'bigint')
        .execute();
      await id(db.schema.createTable('operator_sessions'))
        .addColumn('token_hash', 'text', (c) => c.notNull().unique())
        .addColumn('operator_id', 'bigint', (c) => c.notNull())
        .addColumn('csrf', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('last_seen_at', 'bigint', (c) => c.notNull())
        .addColumn('expires_at', 'bigint', (c) => c.notNull())
        .addColumn('revoked_at', 'bigint')
        .addColumn('second_factor_pending', 'integer', (c) => c.notNull().defaultTo(1))
        .execute();
      await db.schema.createIndex('operator_sessions_operator').on('operator_sessions').column('operator_id').execute();
      await db.schema.alterTable('customers').addColumn('suspended_at', 'bigint').execute();
    },
  };
}
