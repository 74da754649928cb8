import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../database.js';

/**
 * One signing per issuance (issue 8). An order moves into signing through a guarded claim:
 * `issuance_claim` names the process and attempt that holds it, `issuance_claim_until` when the
 * claim lapses if that process dies without a trace. `certificates.delivered_at` marks the one
 * certificate each issuance round delivered to its order, so the reconciliation can tell a
 * superseded certificate (delivered, then reissued) from one nobody can reach (never delivered).
 */
export function issuanceClaim(_dialect: Dialect) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema.alterTable('orders').addColumn('issuance_claim', 'text').execute();
      await db.schema.alterTable('orders').addColumn('issuance_claim_until', 'bigint').execute();
      await db.schema.alterTable('certificates').addColumn('delivered_at', 'bigint').execute();
      // The reconciliation (and its metric on every scrape) looks only at certificates of orders
      // that are neither delivered nor revoked: a handful in flight, whatever the table's size.
      await db.schema
        .createIndex('certificates_undelivered')
        .on('certificates')
        .column('order_id')
        .where(sql.ref('delivered_at'), 'is', null)
        .where(sql.ref('revoked_at'), 'is', null)
        .where(sql.ref('order_id'), 'is not', null)
        .execute();
      // Certificates delivered before this migration: those an issuance or reissue event names.
      // A twin signed by the race this migration closes is named by none and stays undelivered.
      await sql`
        UPDATE certificates SET delivered_at = created_at
        WHERE order_id IS NOT NULL AND EXISTS (
          SELECT 1 FROM audit_events a
          WHERE a.subject = CAST(certificates.order_id AS TEXT)
            AND a.action IN ('order.issued', 'order.reissued')
            AND a.details LIKE '%"serial":"' || certificates.serial || '"%'
        )`.execute(db);
    },
  };
}
