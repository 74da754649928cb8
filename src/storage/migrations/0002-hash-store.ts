import type { Kysely } from 'kysely';
import type { Dialect } from '../database.js';
import { idColumn } from './columns.js';

/**
 * The auxiliary hash store of spec 4.35 (DESIGN §5.8): per-customer API keys, stored as their
 * SHA-256 only, and the hashes filed for host names, one per (customer, name).
 */
export function hashStore(dialect: Dialect) {
  const id = idColumn(dialect);

  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await id(db.schema.createTable('kv_keys'))
        .addColumn('customer_id', 'bigint', (c) => c.notNull().references('customers.id'))
        // Every request looks its key up by this hash: the unique index is the lookup path.
        .addColumn('key_hash', 'text', (c) => c.notNull().unique())
        .addColumn('label', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('revoked_at', 'bigint')
        .execute();
      await db.schema.createIndex('kv_keys_customer').on('kv_keys').columns(['customer_id', 'id']).execute();

      // Scoped by customer in the key itself: a lookup cannot reach another customer's row.
      await db.schema
        .createTable('kv_entries')
        .addColumn('customer_id', 'bigint', (c) => c.notNull().references('customers.id'))
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('hash', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('kv_entries_pk', ['customer_id', 'name'])
        .execute();
    },
  };
}
