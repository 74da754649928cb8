import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../database.js';
import { idColumn } from './columns.js';

/**
 * Vouchers (spec §2.13, §3.2): prepaid orders a third party redeems with a code. The code is a
 * bearer secret: it is looked up by its SHA-256 and kept sealed (AES-256-GCM) for its owner's
 * listings. The product as sold is kept with the voucher, so that a product leaving the catalog or
 * changing its price still redeems as paid for. `status` moves active → redeemed | voided once,
 * by guarded updates. Orders keep the product they were sold under too (`orders.product_json`),
 * so that one whose product left the catalog still issues, reissues and refunds by its terms.
 */
export function vouchers(dialect: Dialect) {
  const id = idColumn(dialect);
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await id(db.schema.createTable('vouchers'))
        .addColumn('customer_id', 'bigint', (c) => c.notNull())
        .addColumn('code_hash', 'text', (c) => c.notNull().unique())
        .addColumn('code_sealed', 'text', (c) => c.notNull())
        .addColumn('partner_order_id', 'text', (c) => c.notNull())
        .addColumn('product_code', 'text', (c) => c.notNull())
        .addColumn('product', 'text', (c) => c.notNull())
        .addColumn('server_count', 'integer', (c) => c.notNull())
        .addColumn('san_count', 'integer', (c) => c.notNull())
        .addColumn('validity_period', 'integer', (c) => c.notNull())
        .addColumn('price_minor', 'bigint', (c) => c.notNull())
        .addColumn('currency', 'text', (c) => c.notNull())
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('created_by', 'text', (c) => c.notNull())
        .addColumn('voided_at', 'bigint')
        .addColumn('redeemed_at', 'bigint')
        .addColumn('order_id', 'bigint')
        .addUniqueConstraint('vouchers_partner_order_id', ['customer_id', 'partner_order_id'])
        .addCheckConstraint('vouchers_status', sql`status in ('active', 'redeemed', 'voided')`)
        .execute();
      await db.schema.alterTable('orders').addColumn('product_json', 'text').execute();
      await db.schema.createIndex('vouchers_by_customer').on('vouchers').columns(['customer_id', 'id']).execute();
    },
  };
}
