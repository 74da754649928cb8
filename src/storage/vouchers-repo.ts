import type { Selectable } from 'kysely';
import {
  customerId as toCustomerId,
  money,
  orderId as toOrderId,
  voucherId as toVoucherId,
  type CustomerId,
  type OrderId,
  type Product,
  type Voucher,
  type VoucherId,
} from '../core/index.js';
import type { Db } from './database.js';
import type { VouchersTable } from './schema.js';

/** A voucher as it is made: its code already hashed and sealed by the RA. */
export interface NewVoucher {
  readonly customerId: CustomerId;
  readonly codeHash: string;
  readonly codeSealed: string;
  readonly partnerOrderId: string;
  readonly product: Product;
  readonly serverCount: number;
  readonly subjectAltNameCount: number;
  readonly validityPeriod: number;
  readonly priceMinor: number;
  readonly currency: string;
  readonly createdAt: number;
  readonly createdBy: string;
}

/** A voucher with its sealed code (opened by the RA for its owner). */
export interface StoredVoucher {
  readonly voucher: Voucher;
  readonly codeHash: string;
  readonly codeSealed: string;
}

type Row = Selectable<VouchersTable>;

function toVoucher(row: Row): Voucher {
  return {
    id: toVoucherId(Number(row.id)),
    customerId: toCustomerId(Number(row.customer_id)),
    partnerOrderId: row.partner_order_id,
    product: JSON.parse(row.product) as Product,
    serverCount: row.server_count,
    subjectAltNameCount: row.san_count,
    validityPeriod: row.validity_period,
    price: money(Number(row.price_minor), row.currency),
    status: row.status,
    createdAt: Number(row.created_at),
    createdBy: row.created_by,
    voidedAt: row.voided_at === null ? null : Number(row.voided_at),
    redeemedAt: row.redeemed_at === null ? null : Number(row.redeemed_at),
    orderId: row.order_id === null ? null : toOrderId(Number(row.order_id)),
  };
}

const stored = (row: Row): StoredVoucher => ({
  voucher: toVoucher(row),
  codeHash: row.code_hash,
  codeSealed: row.code_sealed,
});

/**
 * Vouchers. A voucher leaves `active` once, to `redeemed` or `voided`, by a guarded UPDATE: of
 * concurrent redemptions (or a redemption and a void) exactly one changes the row; the RA runs it in
 * the transaction that stores the order or releases the credit.
 */
export class VouchersRepo {
  constructor(private readonly db: Db) {}

  async insert(v: NewVoucher): Promise<VoucherId> {
    const r = await this.db.kysely
      .insertInto('vouchers')
      .values({
        customer_id: v.customerId,
        code_hash: v.codeHash,
        code_sealed: v.codeSealed,
        partner_order_id: v.partnerOrderId,
        product_code: v.product.code,
        product: JSON.stringify(v.product),
        server_count: v.serverCount,
        san_count: v.subjectAltNameCount,
        validity_period: v.validityPeriod,
        price_minor: v.priceMinor,
        currency: v.currency,
        status: 'active',
        created_at: v.createdAt,
        created_by: v.createdBy,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    return toVoucherId(Number(r.id));
  }

  /** The voucher with this code (its hash), whoever owns it: for the anonymous endpoints. */
  async byCodeHash(codeHash: string): Promise<StoredVoucher | undefined> {
    const row = await this.db.kysely
      .selectFrom('vouchers')
      .selectAll()
      .where('code_hash', '=', codeHash)
      .executeTakeFirst();
    return row === undefined ? undefined : stored(row);
  }

  /** The customer's vouchers, newest first; voided ones only when asked for. */
  async list(customerId: CustomerId, withVoided = false): Promise<StoredVoucher[]> {
    let query = this.db.kysely.selectFrom('vouchers').selectAll().where('customer_id', '=', customerId);
    if (!withVoided) query = query.where('status', '!=', 'voided');
    return (await query.orderBy('id', 'desc').execute()).map(stored);
  }

  /** The customer's voucher with this PartnerOrderID. */
  async byPartnerOrderId(customerId: CustomerId, partnerOrderId: string): Promise<StoredVoucher | undefined> {
    const row = await this.db.kysely
      .selectFrom('vouchers')
      .selectAll()
      .where('customer_id', '=', customerId)
      .where('partner_order_id', '=', partnerOrderId)
      .executeTakeFirst();
    return row === undefined ? undefined : stored(row);
  }

  async partnerOrderIdTaken(customerId: CustomerId, partnerOrderId: string): Promise<boolean> {
    const row = await this.db.kysely
      .selectFrom('vouchers')
      .select('id')
      .where('customer_id', '=', customerId)
      .where('partner_order_id', '=', partnerOrderId)
      .executeTakeFirst();
    return row !== undefined;
  }

  /** active → redeemed by `orderId`; false (nothing changed) when the voucher is no longer active. */
  async markRedeemed(id: VoucherId, orderId: OrderId, at: number): Promise<boolean> {
    const r = await this.db.kysely
      .updateTable('vouchers')
      .set({ status: 'redeemed', redeemed_at: at, order_id: orderId })
      .where('id', '=', id)
      .where('status', '=', 'active')
      .executeTakeFirst();
    return r.numUpdatedRows > 0n;
  }

  /** active → voided, for its owner only; false (nothing changed) when not active or not theirs. */
  async markVoided(customerId: CustomerId, id: VoucherId, at: number): Promise<boolean> {
    const r = await this.db.kysely
      .updateTable('vouchers')
      .set({ status: 'voided', voided_at: at })
      .where('id', '=', id)
      .where('customer_id', '=', customerId)
      .where('status', '=', 'active')
      .executeTakeFirst();
    return r.numUpdatedRows > 0n;
  }
}
