import type { Product } from './catalog.js';
import type { CustomerId, OrderId, VoucherId } from './ids.js';
import type { Money } from './money.js';

// A voucher (spec §2.13, §3.2): a prepaid order whose code a third party redeems without an
// account. Its price is reserved against the owner's credit when it is made and charged when it is
// redeemed; its product is the one sold, kept with it.

export type VoucherStatus = 'active' | 'redeemed' | 'voided';

/** What a voucher pays for: the order its redemption may create, at most. */
export interface VoucherTerms {
  /** The product as sold (the catalog may have changed or dropped it since). */
  readonly product: Product;
  readonly serverCount: number;
  /** Non-wildcard SAN hosts. */
  readonly subjectAltNameCount: number;
  /** Months (12, 24), or days on the free automated DV product. */
  readonly validityPeriod: number;
  /** The reserved price, charged on redemption. */
  readonly price: Money;
}

export interface Voucher extends VoucherTerms {
  readonly id: VoucherId;
  readonly customerId: CustomerId;
  readonly partnerOrderId: string;
  readonly status: VoucherStatus;
  readonly createdAt: number;
  readonly createdBy: string;
  readonly voidedAt: number | null;
  readonly redeemedAt: number | null;
  /** The order its redemption created. */
  readonly orderId: OrderId | null;
}
