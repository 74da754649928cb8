import type { Kysely } from 'kysely';
import type { Dialect } from '../database.js';

/**
 * GET /Orders?ExpiresWithinDays=… and OrderBy=EndDate (the web interface's "expiring soon"): one
 * customer's orders by their current certificate's end, without sorting all of them.
 */
export function orderExpiryIndex(_dialect: Dialect) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createIndex('orders_customer_cert_end')
        .on('orders')
        .columns(['customer_id', 'cert_not_after', 'id'])
        .execute();
    },
  };
}
