import { createHash } from 'node:crypto';
import { CertdeskError } from '../../core/index.js';
import type { OrderInput } from './order-rules.js';

// How a repeated order request is told from a new one (DESIGN §5.5: the same PartnerOrderID and
// body return the original order; a redemption retried with the same body, its order) and what
// answers a reuse that is not a repeat.

/** What identifies a request body for PartnerOrderID idempotency: the same members, in any order, hash alike. */
export function requestHashOf(input: OrderInput): string {
  return createHash('sha256').update(canonicalJson(input)).digest('hex');
}

/** A redemption's body without its code (the voucher names that): a retry of the redemption hashes alike. */
export function redemptionHashOf(input: OrderInput & { VoucherCode?: unknown }): string {
  const { VoucherCode: _code, ...order } = input;
  return requestHashOf(order);
}

/** JSON with sorted keys: the same request gives the same hash whatever order its members came in. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** A concurrent redemption (or a void) took the voucher first: this one stored nothing. */
export class LostRedemption extends Error {
  constructor() {
    super('the voucher was redeemed or voided meanwhile');
    this.name = 'LostRedemption';
  }
}
export const lostRedemption = () => new LostRedemption();

export const partnerOrderIdOfVoucher = () =>
  new CertdeskError(
    'conflict',
    'PartnerOrderID belongs to a voucher of the account (its redemption becomes that order): use another PartnerOrderID.',
    { field: 'PartnerOrderID' },
  );

export const partnerOrderIdReused = () =>
  new CertdeskError(
    'conflict',
    'PartnerOrderID was used before with a different order: use a new PartnerOrderID for a new order.',
    { field: 'PartnerOrderID' },
  );
