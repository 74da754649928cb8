import type { Kysely } from 'kysely';
import type { Dialect } from '../database.js';

/**
 * EMAIL validation (DESIGN §5.6): the approval link's token, stored as its SHA-256 on each name it
 * approves (the names of one order that share an approver share one link).
 */
export function emailApproval(_dialect: Dialect) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema.alterTable('order_names').addColumn('approval_token_hash', 'text').execute();
      await db.schema.createIndex('order_names_approval').on('order_names').column('approval_token_hash').execute();
    },
  };
}
