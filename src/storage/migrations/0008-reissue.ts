import type { Kysely } from 'kysely';
import type { Dialect } from '../database.js';

/**
 * Reissue (spec §4.16): when the current round started, and the newest certificate before it, so
 * the flow tells a certificate signed for this round (to reuse after a crash) from the old one
 * that stays in Fulfillment until the new one is issued.
 */
export function reissue(_dialect: Dialect) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema.alterTable('orders').addColumn('reissued_at', 'bigint').execute();
      await db.schema.alterTable('orders').addColumn('reissue_base_cert', 'bigint').execute();
      // EndDate of the current certificate: COMPLETE orders past it show EXPIRED without a join.
      await db.schema.alterTable('orders').addColumn('cert_not_after', 'bigint').execute();
    },
  };
}
