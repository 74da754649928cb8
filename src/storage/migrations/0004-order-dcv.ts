import type { Kysely } from 'kysely';
import type { Dialect } from '../database.js';

/**
 * The DCV value an order was placed with: DCV values expire after 30 days (DESIGN §5.6), an
 * order's checks must keep comparing against the one its customer was shown.
 */
export function orderDcv(_dialect: Dialect) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema.alterTable('orders').addColumn('dcv_value', 'text').execute();
      // The worker finds orders waiting for DCV without scanning every order.
      await db.schema.createIndex('orders_status_date').on('orders').columns(['major_status', 'order_date']).execute();
    },
  };
}
