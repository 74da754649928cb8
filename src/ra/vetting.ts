import { CertdeskError, customerId as toCustomerId, type Clock } from '../core/index.js';
import type { AuditRepo, OrderNameRow, OrderRow, OrdersRepo } from '../storage/index.js';
import type { OrderFlow, VettedData } from './order-flow.js';

/** EV Guidelines §7.1.4.2.3 business categories. */
export const BUSINESS_CATEGORIES = ['Private Organization', 'Government Entity', 'Business Entity', 'Non-Commercial Entity'] as const;

/**
 * The operator's organization vetting of OV and EV orders (`certdesk vetting list|approve|reject`).
 * Approval records what was vetted (EV: business category, registration number, jurisdiction),
 * moves the order to issuance and issues; rejection FAILs it with REJECTED and refunds it.
 */
export class Vetting {
  constructor(private readonly deps: { orders: OrdersRepo; audit: Pick<AuditRepo, 'append'>; flow: Pick<OrderFlow, 'issue' | 'fail'>; clock: Clock }) {}

  async list(limit = 1000): Promise<{ order: OrderRow; names: OrderNameRow[] }[]> {
    const rows = await this.deps.orders.inState('PENDING', 'WF_ORG_VALIDATION', limit);
    const names = await this.deps.orders.names(rows.map((r) => r.id));
    return rows.map((order) => ({ order, names: names.filter((n) => n.order_id === order.id) }));
  }

  async approve(orderId: number, vetted: VettedData): Promise<OrderRow> {
    const order = await this.waiting(orderId);
    if (order.validation_level === 'EV') {
      const missing = (['BusinessCategory', 'RegistrationNumber', 'JurisdictionCountry'] as const).filter((k) => (vetted[k] ?? '').trim() === '');
      if (missing.length > 0) throw new CertdeskError('invalidInput', `EV vetting needs ${missing.join(', ')}.`);
      if (!(BUSINESS_CATEGORIES as readonly string[]).includes(vetted.BusinessCategory!)) throw new CertdeskError('invalidInput', `BusinessCategory must be one of: ${BUSINESS_CATEGORIES.join(', ')}.`);
      if (!/^[A-Za-z]{2}$/.test(vetted.JurisdictionCountry!)) throw new CertdeskError('invalidInput', 'JurisdictionCountry is a two-letter ISO 3166 code.');
    }
    const now = this.deps.clock.nowSeconds();
    const info = order.organization_json === null ? {} : (JSON.parse(order.organization_json) as Record<string, unknown>);
    await this.deps.orders.setOrganization(order.id, JSON.stringify({ ...info, Vetted: vetted }), now);
    if (!(await this.deps.orders.transition(order.id, { major: 'PENDING', minor: 'WF_ORG_VALIDATION' }, { major: 'PENDING', minor: 'WF_ISSUANCE' }, now))) {
      throw new CertdeskError('invalidOrderState', `Order ${orderId} is no longer waiting for vetting.`);
    }
    await this.deps.audit.append({ at: now, customerId: toCustomerId(order.customer_id), actor: 'operator', clientAddress: null, action: 'vetting.approved', subject: String(order.id), details: { ...vetted } });
    await this.deps.flow.issue((await this.deps.orders.byId(order.id))!);
    return (await this.deps.orders.byId(order.id))!;
  }

  async reject(orderId: number, reason: string): Promise<OrderRow> {
    const order = await this.waiting(orderId);
    if (reason.trim() === '') throw new CertdeskError('invalidInput', 'A rejection needs a reason.');
    await this.deps.audit.append({ at: this.deps.clock.nowSeconds(), customerId: toCustomerId(order.customer_id), actor: 'operator', clientAddress: null, action: 'vetting.rejected', subject: String(order.id), details: { reason } });
    await this.deps.flow.fail(order, 'WF_ORG_VALIDATION', 'REJECTED', reason);
    return (await this.deps.orders.byId(order.id))!;
  }

  private async waiting(orderId: number): Promise<OrderRow> {
    const order = await this.deps.orders.byId(orderId);
    if (order === undefined) throw new CertdeskError('orderNotFound', `No order ${orderId}.`);
    if (order.major_status !== 'PENDING' || order.minor_status !== 'WF_ORG_VALIDATION') {
      throw new CertdeskError('invalidOrderState', `Order ${orderId} is not waiting for vetting (it is ${order.major_status}/${order.minor_status}).`);
    }
    return order;
  }
}
