import type { Kysely } from 'kysely';
import type { Dialect } from '../database.js';

/**
 * Safe retries of DELETE /Order (issue 5a): the Idempotency-Key of the request that cancelled an
 * order, and what that request answered (refunded or charged), so a retry with the same key after
 * a lost response gets the same answer instead of "cancelling twice is refused". Kept on the order
 * row: a key belongs to one customer's one order, and is written with the cancel's own update.
 */
export function cancelIdempotency(_dialect: Dialect) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema.alterTable('orders').addColumn('cancel_key', 'text').execute();
      await db.schema.alterTable('orders').addColumn('cancel_refunded', 'integer').execute();
    },
  };
}
