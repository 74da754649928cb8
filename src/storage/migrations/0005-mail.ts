import type { Kysely } from 'kysely';
import type { Dialect } from '../database.js';
import { idColumn } from './columns.js';

/**
 * The mail outbox (DESIGN §3, §4): every mail the service sends is recorded here first, then
 * sent over SMTP when CERTDESK_SMTP_URL is set. `status` is 'sent', 'outbox' (no SMTP
 * configured) or 'failed' (with `error`). Customer and order ids are kept without foreign keys:
 * the outbox is a log, and a mail stays listed whatever happens to what it was about.
 */
export function mail(dialect: Dialect) {
  const id = idColumn(dialect);

  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await id(db.schema.createTable('mail_outbox'))
        .addColumn('customer_id', 'bigint')
        .addColumn('order_id', 'bigint')
        .addColumn('to_address', 'text', (c) => c.notNull())
        .addColumn('subject', 'text', (c) => c.notNull())
        .addColumn('body_text', 'text', (c) => c.notNull())
        .addColumn('kind', 'text', (c) => c.notNull())
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('error', 'text')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('sent_at', 'bigint')
        .execute();
      // `mail list --order` and the order's own mails; `mail list` (newest first) and pruning.
      await db.schema.createIndex('mail_outbox_order').on('mail_outbox').column('order_id').execute();
      await db.schema.createIndex('mail_outbox_created').on('mail_outbox').column('created_at').execute();
    },
  };
}
