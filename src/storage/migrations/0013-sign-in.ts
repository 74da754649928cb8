import type { Kysely } from 'kysely';
import type { Dialect } from '../database.js';
import { idColumn } from './columns.js';

/**
 * People sign in (issue: sub-users): `web_sessions` are the signed-in browsers, each known by the
 * SHA-256 of its cookie and carrying the CSRF token of its forms; `oauth_codes` are the
 * authorization codes of RFC 6749 §4.1, stored hashed, single-use and short-lived, with the PKCE
 * challenge (RFC 7636) they were issued under.
 */
export function signIn(dialect: Dialect) {
  const id = idColumn(dialect);
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await id(db.schema.createTable('web_sessions'))
        .addColumn('token_hash', 'text', (c) => c.notNull().unique())
        .addColumn('user_id', 'bigint', (c) => c.notNull())
        .addColumn('customer_id', 'bigint', (c) => c.notNull())
        .addColumn('csrf', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('expires_at', 'bigint', (c) => c.notNull())
        .addColumn('revoked_at', 'bigint')
        .execute();
      await id(db.schema.createTable('oauth_codes'))
        .addColumn('code_hash', 'text', (c) => c.notNull().unique())
        .addColumn('application_id', 'bigint', (c) => c.notNull())
        .addColumn('user_id', 'bigint', (c) => c.notNull())
        .addColumn('customer_id', 'bigint', (c) => c.notNull())
        .addColumn('redirect_uri', 'text', (c) => c.notNull())
        .addColumn('scopes', 'text', (c) => c.notNull())
        .addColumn('code_challenge', 'text')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('expires_at', 'bigint', (c) => c.notNull())
        .addColumn('used_at', 'bigint')
        .execute();
    },
  };
}
