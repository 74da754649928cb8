import type { Kysely } from 'kysely';
import type { Dialect } from '../database.js';

/**
 * Indexes on the columns the hourly purge selects by (`ExpiredRows`, `deleteInBatches`): without
 * them each batch read the whole table. oauth_tokens had one already.
 */
export function expiryIndexes(_dialect: Dialect) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      for (const [name, table, column] of [
        ['dcv_values_expiry', 'dcv_values', 'expires_at'],
        ['oauth_codes_expiry', 'oauth_codes', 'expires_at'],
        ['web_sessions_expiry', 'web_sessions', 'expires_at'],
        ['operator_sessions_expiry', 'operator_sessions', 'expires_at'],
        ['sign_in_failures_updated', 'sign_in_failures', 'updated_at'],
      ] as const)
        await db.schema.createIndex(name).on(table).column(column).execute();
    },
  };
}
