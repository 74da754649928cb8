import { sql } from 'kysely';
import {
  certificateId,
  customerId as toCustomerId,
  orderId as toOrderId,
  type CertificateId,
  type CustomerId,
  type OrderId,
} from '../core/index.js';
import { fixedQuery, writeLater, type Db } from './database.js';

/**
 * The certificates of orders, as the order side sees them: an order's certificates and its
 * current one, which orders chain to a CA, the issuance round's delivery mark, the certificate a
 * round may adopt after a crash, and the certificates no order reaches (the reconciliation).
 * Rows are written by the CA (`CaRepo`); the delivery mark here.
 */
const CERTIFICATE_COLUMNS = ['id', 'serial', 'not_before', 'not_after', 'chain_ids'] as const;

/** The newest certificate signed for an order, delivered or not; the limit is a literal, as a bound one makes SQLite prepare the statement again. */
const newestCertificate = fixedQuery((k, orderId: OrderId) =>
  k
    .selectFrom('certificates')
    .select(CERTIFICATE_COLUMNS)
    .where('order_id', '=', orderId)
    .orderBy('id', 'desc')
    .limit(sql.lit(1)),
);

/** The newest certificate an issuance round delivered to an order: the one GET /Order shows. */
const deliveredCertificate = fixedQuery((k, orderId: OrderId) =>
  k
    .selectFrom('certificates')
    .select(CERTIFICATE_COLUMNS)
    .where('order_id', '=', orderId)
    .where('delivered_at', 'is not', null)
    .orderBy('id', 'desc')
    .limit(sql.lit(1)),
);

export interface OrderCertificateRow {
  readonly id: CertificateId;
  readonly serial: string;
  readonly notBefore: number;
  readonly notAfter: number;
  readonly chainIds: string[];
}

function toCertificateRow(
  r: { id: number; serial: string; not_before: number; not_after: number; chain_ids: string | null } | undefined,
): OrderCertificateRow | undefined {
  return r === undefined
    ? undefined
    : {
        id: certificateId(r.id),
        serial: r.serial,
        notBefore: r.not_before,
        notAfter: r.not_after,
        chainIds: r.chain_ids === null ? [] : r.chain_ids.split(','),
      };
}

export class OrderCertificatesRepo {
  constructor(private readonly db: Db) {}

  /** Every certificate of an order, newest first; the current one is the first delivered. */
  async certificates(
    orderId: OrderId,
  ): Promise<{ serial: string; revokedAt: number | null; notAfter: number; delivered: boolean }[]> {
    const rows = await this.db.kysely
      .selectFrom('certificates')
      .select(['serial', 'revoked_at', 'not_after', 'delivered_at'])
      .where('order_id', '=', orderId)
      .orderBy('id', 'desc')
      .execute();
    return rows.map((r) => ({
      serial: r.serial,
      revokedAt: r.revoked_at,
      notAfter: r.not_after,
      delivered: r.delivered_at !== null,
    }));
  }

  /**
   * The newest certificate signed for an order, delivered or not (a restart after signing reuses
   * it); with `after`, only one newer than that (an issuance round's own).
   */
  async latestCertificate(
    orderId: OrderId,
    after: CertificateId | null = null,
  ): Promise<OrderCertificateRow | undefined> {
    return toCertificateRow(
      after === null
        ? (await newestCertificate(this.db, orderId))[0]
        : await this.db.kysely
            .selectFrom('certificates')
            .select(CERTIFICATE_COLUMNS)
            .where('order_id', '=', orderId)
            .where('id', '>', after)
            .orderBy('id', 'desc')
            .executeTakeFirst(),
    );
  }

  /**
   * The certificate an order has now: the newest its issuance rounds delivered. A newer one may be
   * signed and not yet delivered (a round between signing and completing, or one that died there
   * and is taken over), or never be (a round that lost its claim): readers never see it before its
   * round completes the order with it.
   */
  async currentCertificate(orderId: OrderId): Promise<OrderCertificateRow | undefined> {
    return toCertificateRow((await deliveredCertificate(this.db, orderId))[0]);
  }

  /** A customer's orders whose current certificate chains to one of `caIds` (filterScheduledToReplace). */
  async chainingTo(customerId: CustomerId, caIds: readonly string[]): Promise<OrderId[]> {
    if (caIds.length === 0) return [];
    const rows = await this.db.kysely
      .selectFrom('orders as o')
      .innerJoin('certificates as c', 'c.order_id', 'o.id')
      .select('o.id')
      .where('o.customer_id', '=', customerId)
      .where('c.id', '=', (eb) =>
        eb
          .selectFrom('certificates as c2')
          .select((e) => e.fn.max('c2.id').as('m'))
          .whereRef('c2.order_id', '=', 'o.id')
          .where('c2.delivered_at', 'is not', null),
      )
      .where((eb) => eb.or(caIds.map((id) => eb(sql<string>`',' || c.chain_ids || ','`, 'like', `%,${id},%`))))
      .execute();
    return rows.map((r) => toOrderId(r.id));
  }

  /** Records that an issuance round delivered this certificate to its order (the reconciliation's mark). */
  async markDelivered(serial: string, at: number): Promise<void> {
    const update = this.db.kysely
      .updateTable('certificates')
      .set({ delivered_at: at })
      .where('serial', '=', serial)
      .where('delivered_at', 'is', null);
    await writeLater(this.db, 'certificates', update.compile());
  }

  /** Whether an issuance round delivered this certificate to its order. */
  async isDelivered(serial: string): Promise<boolean> {
    const r = await this.db.kysely
      .selectFrom('certificates')
      .select('delivered_at')
      .where('serial', '=', serial)
      .executeTakeFirst();
    return r?.delivered_at !== null && r?.delivered_at !== undefined;
  }

  /**
   * The certificate a crashed or displaced holder signed for the current round, to deliver instead
   * of signing again: the newest one after `after` that is neither delivered nor revoked.
   */
  async adoptableCertificate(
    orderId: OrderId,
    after: CertificateId | null,
  ): Promise<{ serial: string; notBefore: number; notAfter: number } | undefined> {
    let q = this.db.kysely
      .selectFrom('certificates')
      .select(['serial', 'not_before', 'not_after'])
      .where('order_id', '=', orderId)
      .where('revoked_at', 'is', null)
      .where('delivered_at', 'is', null);
    if (after !== null) q = q.where('id', '>', after);
    const r = await q.orderBy('id', 'desc').executeTakeFirst();
    return r === undefined ? undefined : { serial: r.serial, notBefore: r.not_before, notAfter: r.not_after };
  }

  /**
   * Certificates no order can reach (issue 8): signed for an order, never delivered by an issuance
   * round, not revoked, and not the one an issuance in progress is about to deliver (the newest of
   * an order waiting in WF_ISSUANCE, past the round's base). Oldest first.
   */
  async orphanCertificates(
    limit: number,
  ): Promise<{ serial: string; orderId: OrderId; customerId: CustomerId; createdAt: number; notAfter: number }[]> {
    const rows = await this.db.kysely
      .selectFrom('certificates as c')
      .innerJoin('orders as o', 'o.id', 'c.order_id')
      .select(['c.serial', 'c.order_id', 'o.customer_id', 'c.created_at', 'c.not_after'])
      // These three terms match the partial index certificates_undelivered (0009).
      .where('c.order_id', 'is not', null)
      .where('c.revoked_at', 'is', null)
      .where('c.delivered_at', 'is', null)
      .where((eb) =>
        eb.not(
          eb.and([
            eb('o.minor_status', '=', 'WF_ISSUANCE'),
            eb('o.major_status', 'in', ['PENDING', 'REISSUE']),
            eb('c.id', '>', eb.fn.coalesce('o.reissue_base_cert', sql<number>`0`)),
            eb(
              'c.id',
              '=',
              eb
                .selectFrom('certificates as c2')
                .select((e) => e.fn.max('c2.id').as('m'))
                .whereRef('c2.order_id', '=', 'o.id'),
            ),
          ]),
        ),
      )
      .orderBy('c.id')
      .limit(limit)
      .execute();
    return rows.map((r) => ({
      serial: r.serial,
      orderId: toOrderId(r.order_id!),
      customerId: toCustomerId(r.customer_id),
      createdAt: r.created_at,
      notAfter: r.not_after,
    }));
  }
}
