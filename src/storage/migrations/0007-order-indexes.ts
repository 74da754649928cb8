import type { Kysely } from 'kysely';
import type { Dialect } from '../database.js';

/**
 * GET /Orders pages one customer's orders by ServiceOrderID (its default) or by OrderDate. No
 * index led by customer_id ends in id or order_date, so both sorted every order of the customer
 * for each page (SQLite: "USE TEMP B-TREE FOR ORDER BY", about 3 s and 4 s a page at 1,000,000
 * orders, measured by bench/ target orders1m). UpdateDate and CommonName already have theirs.
 */
export function orderIndexes(_dialect: Dialect) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema.createIndex('orders_customer_id').on('orders').columns(['customer_id', 'id']).execute();
      await db.schema
        .createIndex('orders_customer_ordered')
        .on('orders')
        .columns(['customer_id', 'order_date', 'id'])
        .execute();
    },
  };
}
