import { sql, type Selectable } from 'kysely';
import { writeLater, type Db } from './database.js';
import { JobsRepo, queuedRow, type NewJob } from './jobs-repo.js';
import type { MailOutboxTable, MailStatus } from './schema.js';

export type { MailStatus } from './schema.js';

/** The statuses of a mail that is still to be sent. */
const UNSENT: MailStatus[] = ['outbox', 'failed'];

/** One recorded mail. */
export interface MailRow {
  readonly id: number;
  readonly customerId: number | null;
  readonly orderId: number | null;
  readonly to: string;
  readonly subject: string;
  readonly text: string;
  readonly kind: string;
  readonly status: MailStatus;
  readonly error: string | null;
  readonly createdAt: number;
  readonly sentAt: number | null;
}

/** A mail to record; status 'outbox' unless given. */
export interface NewMail {
  readonly to: string;
  readonly subject: string;
  readonly text: string;
  readonly kind: string;
  readonly customerId?: number | null;
  readonly orderId?: number | null;
  readonly status?: MailStatus;
  readonly createdAt: number;
}

export interface MailListOptions {
  /** At most this many mails (a positive whole number). */
  readonly limit: number;
  readonly orderId?: number;
  readonly customerId?: number;
}

/** The mail outbox: every mail the service sends, recorded before it is sent. */
export class MailRepo {
  constructor(private readonly db: Db) {}

  // Until mail_outbox is part of DB (schema.ts), the repository sees its own table only.
  private get kysely() {
    return this.db.kysely;
  }

  /**
   * Records a mail and, with `deliverAt`, queues its delivery (`mailDeliveryJob`), both in the
   * caller's transaction; returns its outbox id. Outside a transaction the two would commit apart.
   */
  async insert(row: NewMail, deliverAt: number | null = null): Promise<number> {
    const inserted = await this.kysely
      .insertInto('mail_outbox')
      .values(outboxRow(row))
      .returning('id')
      .executeTakeFirstOrThrow();
    if (deliverAt !== null)
      await new JobsRepo(this.db).enqueueInTransaction(mailDeliveryJob(inserted.id, deliverAt), row.createdAt);
    return inserted.id;
  }

  /**
   * `insert` for a caller that needs no id back, in its transaction. On PostgreSQL it is one
   * statement, the job taking the mail's id from the mail's INSERT, held for the transaction's
   * next statement or its commit (`writeLater`): no round trip of its own. Elsewhere, `insert`.
   */
  async insertInTransaction(row: NewMail, deliverAt: number | null): Promise<void> {
    if (this.db.dialect !== 'postgres') {
      await this.insert(row, deliverAt);
      return;
    }
    const mail = this.kysely.insertInto('mail_outbox').values(outboxRow(row));
    if (deliverAt === null) {
      await writeLater(this.db, 'mail_outbox', mail.compile());
      return;
    }
    // The job of `mailDeliveryJob`, its payload and key made from the id the mail's INSERT returns.
    const id = sql<string>`(select "id" from "mail")`;
    const withDelivery = this.kysely
      .with('mail', () => mail.returning('id'))
      .insertInto('jobs')
      .values({
        ...queuedRow(mailDeliveryJob(0, deliverAt), row.createdAt),
        payload: sql<string>`concat(cast(${'{"mailId":'} as text), ${id}, cast(${'}'} as text))`,
        unique_key: sql<string>`concat(cast(${MAIL_KEY_PREFIX} as text), ${id})`,
      })
      .onConflict((oc) => oc.column('unique_key').doNothing());
    await writeLater(this.db, 'jobs', withDelivery.compile());
  }

  /**
   * Marks a mail sent at `at` (clearing any earlier error); `keptText`, when given, replaces the
   * stored text (the sent text without the secrets it carried).
   */
  async markSent(id: number, at: number, keptText?: string): Promise<void> {
    await this.kysely
      .updateTable('mail_outbox')
      .set({ status: 'sent', sent_at: at, error: null, ...(keptText === undefined ? {} : { body_text: keptText }) })
      .where('id', '=', id)
      .execute();
  }

  /** Marks a mail's send as failed, with why (a sent or withdrawn mail stays so). */
  async markFailed(id: number, error: string): Promise<void> {
    // Only a mail still to send: a delivery that lost its lease may fail after another one sent it,
    // and one in flight may fail after the mail was withdrawn (failed would make its retry send it).
    await this.kysely
      .updateTable('mail_outbox')
      .set({ status: 'failed', error })
      .where('id', '=', id)
      .where('status', 'in', UNSENT)
      .execute();
  }

  /** Withdraws the order's mails of `kind` not sent yet (outbox or failed); returns how many. */
  async withdraw(orderId: number, kind: string): Promise<number> {
    const result = await this.kysely
      .updateTable('mail_outbox')
      .set({ status: 'withdrawn' })
      .where('order_id', '=', orderId)
      .where('kind', '=', kind)
      .where('status', 'in', UNSENT)
      .executeTakeFirst();
    return Number(result.numUpdatedRows);
  }

  /** One mail, or undefined. */
  async byId(id: number): Promise<MailRow | undefined> {
    const row = await this.kysely.selectFrom('mail_outbox').selectAll().where('id', '=', id).executeTakeFirst();
    return row === undefined ? undefined : toMail(row);
  }

  /** The newest mails first, optionally of one order or one customer. */
  async list(options: MailListOptions): Promise<MailRow[]> {
    if (!Number.isSafeInteger(options.limit) || options.limit <= 0)
      throw new Error(`bad mail list limit ${options.limit}`);
    let query = this.kysely.selectFrom('mail_outbox').selectAll();
    if (options.orderId !== undefined) query = query.where('order_id', '=', options.orderId);
    if (options.customerId !== undefined) query = query.where('customer_id', '=', options.customerId);
    const rows = await query.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(options.limit).execute();
    return rows.map(toMail);
  }
}

function toMail(r: Selectable<MailOutboxTable>): MailRow {
  return {
    id: r.id,
    customerId: r.customer_id,
    orderId: r.order_id,
    to: r.to_address,
    subject: r.subject,
    text: r.body_text,
    kind: r.kind,
    status: r.status,
    error: r.error,
    createdAt: r.created_at,
    sentAt: r.sent_at,
  };
}

/** The unique key of a mail's delivery job: this, then the mail's id. */
const MAIL_KEY_PREFIX = 'mail:';

/** The job that delivers mail `id`, due at `runAt`: one per mail (its unique key). */
export function mailDeliveryJob(id: number, runAt: number): NewJob<'mail.deliver'> {
  return { name: 'mail.deliver', payload: { mailId: id }, uniqueKey: `${MAIL_KEY_PREFIX}${id}`, runAt };
}

/** The outbox row of a new mail. */
function outboxRow(row: NewMail) {
  return {
    customer_id: row.customerId ?? null,
    order_id: row.orderId ?? null,
    to_address: row.to,
    subject: row.subject,
    body_text: row.text,
    kind: row.kind,
    status: row.status ?? 'outbox',
    error: null,
    created_at: row.createdAt,
    sent_at: null,
  };
}
