import { X509Certificate } from 'node:crypto';
import { CertdeskError, customerId as toCustomerId, type Clock, type MajorStatus, type MinorStatus } from '../core/index.js';
import type { Issuer } from '../ca/index.js';
import type { AuditRepo, OrderRow, OrdersRepo } from '../storage/index.js';
import type { CatalogService } from './catalog.js';
import type { Actor } from './orders.js';

const DAY = 86_400;
/** Spec §8: cancelling is free before issuance and up to 30 days after it; later it is charged. */
export const CANCEL_REFUND_DAYS = 30;

export interface LifecycleRepos {
  readonly orders: OrdersRepo;
  readonly audit: Pick<AuditRepo, 'append'>;
}

/**
 * RFC 5280 reason from the free text clients send (spec §4.17: "English if possible"). Known
 * reason names in any spelling and common phrases map to their code; anything else is
 * `unspecified`.
 */
export function revocationReason(text: string): 'unspecified' | 'keyCompromise' | 'affiliationChanged' | 'superseded' | 'cessationOfOperation' | 'privilegeWithdrawn' {
  const t = text.toLowerCase().replace(/[^a-z]/g, '');
  if (/keycompromise|compromis|stolen|leak/.test(t)) return 'keyCompromise';
  if (/affiliationchanged|affiliation|namechange/.test(t)) return 'affiliationChanged';
  if (/superseded|replaced|reissue|newcertificate|renewed/.test(t)) return 'superseded';
  if (/cessationofoperation|cessation|nolongerneeded|notneeded|decommission|shutdown|closed|cancel/.test(t)) return 'cessationOfOperation';
  if (/privilegewithdrawn|withdrawn/.test(t)) return 'privilegeWithdrawn';
  return 'unspecified';
}

/** The serial (upper-case hex, as the CA records it) of the certificate in a PEM text. */
export function serialOfPem(pem: string): string | undefined {
  try {
    return new X509Certificate(pem).serialNumber.toUpperCase().replace(/^(00)+(?=.)/, '');
  } catch {
    return undefined;
  }
}

/**
 * Cancel and revoke (spec §3.1, §4.15, §4.17; DESIGN §5.4–§5.5). Every change is a guarded
 * transition from the state that was read, so a cancel racing an issuance ends in one state;
 * refunds go through the ledger's one-refund-per-order constraint, so there is never a second one.
 */
export class Lifecycle {
  constructor(private readonly deps: LifecycleRepos & {
    catalog: CatalogService;
    clock: Clock;
    ca: Pick<Issuer, 'revoke'>;
    transact: <T>(fn: (repos: LifecycleRepos) => Promise<T>) => Promise<T>;
  }) {}

  /**
   * DELETE /Order/{id}: pending or reissue-pending → CANCELLED and refunded; issued up to 30 days
   * ago → CANCELLED, refunded and the certificate revoked; issued earlier → CANCELLED and charged,
   * the certificate revoked. Cancelling a cancelled, failed or revoked order is refused.
   */
  async cancel(actor: Actor, orderId: number): Promise<{ refunded: boolean }> {
    const order = await this.owned(actor, orderId);
    const major = order.major_status as MajorStatus;
    if (major === 'CANCELLED' || major === 'FAILED' || major === 'REVOKED') {
      throw new CertdeskError('invalidOrderState', `Order ${orderId} is ${major} and cannot be cancelled.`, { field: 'ServiceOrderID' });
    }
    const now = this.deps.clock.nowSeconds();
    const refund = order.issued_at === null || now - order.issued_at <= CANCEL_REFUND_DAYS * DAY;
    const done = await this.deps.transact(async (tx) => {
      if (!(await tx.orders.transition(order.id, { major, minor: order.minor_status as MinorStatus }, { major: 'CANCELLED', minor: 'CANCELLED' }, now, refund ? { billing_status: 'refunded' } : { billing_status: 'cleared' }))) return false;
      if (refund) await this.refund(tx, order, now);
      await tx.audit.append({ at: now, customerId: actor.principal.customerId, actor: actorName(actor), clientAddress: actor.clientAddress, action: 'order.cancelled', subject: String(order.id), details: { refunded: refund, from: major } });
      return true;
    });
    if (!done) throw new CertdeskError('conflict', `Order ${orderId} changed while it was being cancelled: read it again.`, { field: 'ServiceOrderID' });
    // A cancelled order's certificates must not outlive it.
    await this.revokeAll(order.id, 'cessationOfOperation', actorName(actor));
    return { refunded: refund };
  }

  /**
   * DELETE /Revoke/{id}: the supplied certificate must be one of the order's (old or new). Its
   * revocation is recorded at once in the CRL and OCSP; the order becomes REVOKED when its current
   * certificate is revoked, and is refunded when that happens within the product's RefundPeriod.
   */
  async revoke(actor: Actor, orderId: number, certificatePem: string, reasonText: string): Promise<{ serial: string; reason: string; refunded: boolean }> {
    const order = await this.owned(actor, orderId);
    const serial = serialOfPem(certificatePem);
    if (serial === undefined) throw new CertdeskError('invalidInput', 'Certificate is not a PEM certificate.', { field: 'Certificate' });
    const certs = await this.deps.orders.certificates(order.id);
    const cert = certs.find((c) => c.serial === serial);
    if (cert === undefined) throw new CertdeskError('invalidInput', 'The certificate does not belong to this order.', { field: 'Certificate' });
    const reason = revocationReason(reasonText);
    const result = await this.deps.ca.revoke(serial, reason, { actor: actorName(actor) });
    const now = this.deps.clock.nowSeconds();
    const current = certs[0]!.serial === serial;
    let refunded = false;
    if (current && (order.major_status === 'COMPLETE' || order.major_status === 'REISSUE')) {
      const product = this.deps.catalog.product(order.product_code);
      refunded = order.issued_at !== null && now - order.issued_at <= product.refundPeriodDays * DAY;
      await this.deps.transact(async (tx) => {
        if (!(await tx.orders.transition(order.id, { major: order.major_status as MajorStatus }, { major: 'REVOKED', minor: 'REVOKED' }, now, refunded ? { billing_status: 'refunded' } : {}))) {
          refunded = false;
          return;
        }
        if (refunded) await this.refund(tx, order, now);
      });
    }
    await this.deps.audit.append({
      at: now, customerId: actor.principal.customerId, actor: actorName(actor), clientAddress: actor.clientAddress, action: 'order.revoked', subject: String(order.id),
      details: { serial, reason, alreadyRevoked: result.alreadyRevoked, refunded },
    });
    return { serial, reason, refunded };
  }

  /** Revokes every unrevoked certificate of an order (cancellation, a race lost to a cancel). */
  async revokeAll(orderId: number, reason: 'cessationOfOperation' | 'superseded', actor: string): Promise<void> {
    for (const c of await this.deps.orders.certificates(orderId)) {
      if (c.revokedAt === null) await this.deps.ca.revoke(c.serial, reason, { actor });
    }
  }

  private async refund(tx: LifecycleRepos, order: OrderRow, now: number): Promise<void> {
    if (order.price_minor === 0) return;
    await tx.orders.insertLedger(toCustomerId(order.customer_id), order.id, 'refund', order.price_minor, now);
    await tx.orders.releaseCredit(toCustomerId(order.customer_id), order.price_minor);
  }

  private async owned(actor: Actor, orderId: number): Promise<OrderRow> {
    const order = await this.deps.orders.get(actor.principal.customerId, orderId);
    if (order === undefined) throw new CertdeskError('orderNotFound', `Invalid order id ${orderId}: no such order.`, { field: 'ServiceOrderID' });
    return order;
  }
}

function actorName(actor: Actor): string {
  const p = actor.principal;
  return p.userId !== null ? `user:${p.userId}` : `app:${p.applicationId ?? '?'}`;
}
