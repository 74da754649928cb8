import type { Kysely } from 'kysely';
import type { Dialect } from '../database.js';

/**
 * The redirect URIs registered per API application (RFC 6749 §3.1.2.2), space-separated, for the
 * authorization_code flow; an application without any cannot use it.
 */
export function redirectUris(_dialect: Dialect) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .alterTable('api_applications')
        .addColumn('redirect_uris', 'text', (c) => c.notNull().defaultTo(''))
        .execute();
    },
  };
}
