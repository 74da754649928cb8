import { isPrintableString } from '../../ca/der-writer.js';
import {
  CertdeskError,
  orderId as toOrderId,
  type Clock,
  type Order,
  type OrderName,
  type VettedData,
} from '../../core/index.js';
import type { AuditRepo, OrderNamesRepo, OrderQueriesRepo, OrdersRepo } from '../../storage/index.js';
import type { OrderFlow } from '../issuance/order-flow.js';

/** EV Guidelines §7.1.4.2.3 business categories. */
export const BUSINESS_CATEGORIES = [
  'Private Organization',
  'Government Entity',
  'Business Entity',
  'Non-Commercial Entity',
] as const;

/**
 * The operator's organization vetting of OV and EV orders (`certdesk vetting list|approve|reject`).
 * Approval records what was vetted (EV: business category, registration number, jurisdiction),
 * moves the order to issuance and issues; rejection FAILs it with REJECTED and refunds it.
 */
export class Vetting {
  constructor(
    private readonly deps: {
      orders: OrdersRepo;
      orderNames: Pick<OrderNamesRepo, 'names'>;
      orderQueries: Pick<OrderQueriesRepo, 'inState'>;
      audit: Pick<AuditRepo, 'append'>;
      flow: Pick<OrderFlow, 'issue' | 'fail'>;
      clock: Clock;
    },
  ) {}

  /** Orders waiting for vetting, oldest first, with their names. */
  async list(limit = 1000): Promise<{ order: Order; names: OrderName[] }[]> {
    const orders = await this.deps.orderQueries.inState('PENDING', 'WF_ORG_VALIDATION', limit);
    const names = await this.deps.orderNames.names(orders.map((o) => o.id));
    return orders.map((order) => ({ order, names: names.filter((n) => n.orderId === order.id) }));
  }

  /**
   * Records what was vetted and moves the order to issuance (one guarded update), then issues.
   * Throws orderNotFound, invalidOrderState (not waiting for vetting, or moved meanwhile: nothing
   * recorded) or invalidInput (EV data missing or malformed). Returns the order as it now is.
   * `actor` names the operator in the audit event.
   */
  async approve(orderId: number, vetted: VettedData, actor = 'operator'): Promise<Order> {
    const order = await this.waiting(orderId);
    if (order.validationLevel === 'EV') {
      const missing = (['BusinessCategory', 'RegistrationNumber', 'JurisdictionCountry'] as const).filter(
        (k) => (vetted[k] ?? '').trim() === '',
      );
      if (missing.length > 0) throw new CertdeskError('invalidInput', `EV vetting needs ${missing.join(', ')}.`);
      if (!(BUSINESS_CATEGORIES as readonly string[]).includes(vetted.BusinessCategory!))
        throw new CertdeskError('invalidInput', `BusinessCategory must be one of: ${BUSINESS_CATEGORIES.join(', ')}.`);
      if (!/^[A-Za-z]{2}$/.test(vetted.JurisdictionCountry!))
        throw new CertdeskError('invalidInput', 'JurisdictionCountry is a two-letter ISO 3166 code.');
      // It becomes the subject's serialNumber, a PrintableString of at most 64 characters (RFC 5280,
      // X.520): refused here, where the operator can correct it, not later by the CA's lint.
      const number = vetted.RegistrationNumber!;
      if (!isPrintableString(number) || number.length > 64) {
        throw new CertdeskError(
          'invalidInput',
          `RegistrationNumber "${number}" must be at most 64 of the characters A-Z a-z 0-9, space and ' ( ) + , - . / : = ? (it is put into the certificate as a PrintableString).`,
        );
      }
    }
    const now = this.deps.clock.nowSeconds();
    if (!(await this.deps.orders.markVetted(order.id, order.organization, vetted, now))) {
      throw new CertdeskError('invalidOrderState', `Order ${orderId} is no longer waiting for vetting.`);
    }
    await this.deps.audit.append({
      at: now,
      customerId: order.customerId,
      actor,
      clientAddress: null,
      action: 'vetting.approved',
      subject: String(order.id),
      details: { ...vetted },
    });
    await this.deps.flow.issue((await this.deps.orders.byId(order.id))!);
    return (await this.deps.orders.byId(order.id))!;
  }

  /**
   * FAILs the order with REJECTED and refunds it; throws as `approve` does (invalidOrderState also
   * when an approval moved it on meanwhile: the guarded update of `flow.fail` changed nothing), or
   * invalidInput without a reason. `actor` names the operator in the audit event.
   */
  async reject(orderId: number, reason: string, actor = 'operator'): Promise<Order> {
    const order = await this.waiting(orderId);
    if (reason.trim() === '') throw new CertdeskError('invalidInput', 'A rejection needs a reason.');
    await this.deps.flow.fail(order, 'WF_ORG_VALIDATION', 'REJECTED', reason);
    const now = (await this.deps.orders.byId(order.id))!;
    if (now.majorStatus !== 'FAILED' || now.minorStatus !== 'REJECTED')
      throw new CertdeskError('invalidOrderState', `Order ${orderId} is no longer waiting for vetting.`);
    await this.deps.audit.append({
      at: this.deps.clock.nowSeconds(),
      customerId: order.customerId,
      actor,
      clientAddress: null,
      action: 'vetting.rejected',
      subject: String(order.id),
      details: { reason },
    });
    return now;
  }

  private async waiting(orderId: number): Promise<Order> {
    const order = await this.deps.orders.byId(toOrderId(orderId));
    if (order === undefined) throw new CertdeskError('orderNotFound', `No order ${orderId}.`);
    if (order.majorStatus !== 'PENDING' || order.minorStatus !== 'WF_ORG_VALIDATION') {
      throw new CertdeskError(
        'invalidOrderState',
        `Order ${orderId} is not waiting for vetting (it is ${order.majorStatus}/${order.minorStatus}).`,
      );
    }
    return order;
  }
}
