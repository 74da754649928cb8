import { CertdeskError, customerId as toCustomerId, type Clock, type Principal } from '../core/index.js';
import type { AuditRepo, OrderRow, OrdersRepo } from '../storage/index.js';
import { DnsLookupError, constructedApprovers, discoverApprovers, type DcvResolver } from '../validation/index.js';
import type { Mailer } from './mail.js';
import type { OrderFlow } from './order-flow.js';
import { actorName, type Actor } from './actor.js';
import { hashSecret, newSecret } from './secrets.js';

/** What the confirmation page shows (GET never changes anything: mail scanners follow links). */
export interface ApprovalView {
  readonly orderId: number;
  readonly productCode: string;
  readonly names: readonly string[];
  readonly approver: string;
  readonly state: 'pending' | 'approved' | 'closed';
}

/**
 * EMAIL validation (DESIGN §5.6): one mail per approver of an order with a link to a confirmation
 * page; GET shows, POST approves. The link's token is 256 random bits, stored as its SHA-256 on
 * the names it approves. PUT /ApproverEmail changes the approver of a pending DV order (only to
 * one of the name's approvers), POST /ApproverEmail sends the mail again with a fresh link.
 */
export class EmailApprovals {
  constructor(private readonly deps: {
    orders: OrdersRepo;
    audit: Pick<AuditRepo, 'append'>;
    mailer: Pick<Mailer, 'send'>;
    flow: Pick<OrderFlow, 'advance'>;
    resolver: DcvResolver;
    clock: Clock;
    /** Base of the confirmation link (CERTDESK_PUBLIC_URL). */
    publicUrl: string;
  }) {}

  /** Sends the approval mails of a newly placed EMAIL order: one per approver. */
  async sendForNewOrder(orderId: number): Promise<void> {
    const order = await this.deps.orders.byId(orderId);
    if (order === undefined) return;
    const pending = (await this.deps.orders.names([orderId])).filter((n) => n.status === 'PENDING' && n.method === 'EMAIL');
    const byApprover = new Map<string, string[]>();
    for (const n of pending) if (n.approver_email !== null) byApprover.set(n.approver_email, [...(byApprover.get(n.approver_email) ?? []), n.name]);
    for (const [approver, names] of byApprover) await this.mailLink(order, approver, names);
  }

  private async mailLink(order: OrderRow, approver: string, names: readonly string[]): Promise<void> {
    const token = newSecret('cda_');
    await this.deps.orders.setApproval(order.id, names, approver, hashSecret(token));
    const link = `${this.deps.publicUrl}/dcv/approve/${token}`;
    await this.deps.mailer.send({
      to: approver, kind: 'dcv.approval', customerId: order.customer_id, orderId: order.id,
      subject: `Approve the certificate for ${names[0]!}${names.length > 1 ? ` and ${names.length - 1} more` : ''}`,
      text: [
        `A certificate was ordered for:`, ...names.map((n) => `  ${n}`), '',
        `You are receiving this mail because ${approver} may approve certificates for these names.`,
        `To approve, open this page and confirm there (opening the link alone approves nothing):`, '', link, '',
        `If you did not expect this request, ignore this mail: without approval no certificate is issued.`,
        `Order ${order.id}, product ${order.product_code}.`,
      ].join('\n'),
    });
  }

  async view(token: string): Promise<ApprovalView | undefined> {
    const names = await this.deps.orders.namesByApprovalToken(hashSecret(token));
    const first = names[0];
    if (first === undefined) return undefined;
    const order = await this.deps.orders.byId(first.order_id);
    if (order === undefined) return undefined;
    const state = order.major_status !== 'PENDING' ? 'closed' : names.every((n) => n.status === 'VALIDATED') ? 'approved' : 'pending';
    return { orderId: order.id, productCode: order.product_code, names: names.map((n) => n.name), approver: first.approver_email ?? '', state };
  }

  /** The approver confirms (POST): the names become validated and the order moves on. */
  async approve(token: string, clientAddress: string | null): Promise<ApprovalView | undefined> {
    const view = await this.view(token);
    if (view === undefined) return undefined;
    if (view.state !== 'pending') return view;
    const now = this.deps.clock.nowSeconds();
    const changed = await this.deps.orders.approve(hashSecret(token), now);
    const order = (await this.deps.orders.byId(view.orderId))!;
    if (changed > 0) {
      await this.deps.audit.append({
        at: now, customerId: toCustomerId(order.customer_id), actor: `approver:${view.approver}`, clientAddress, action: 'dcv.approved',
        subject: String(order.id), details: { names: view.names },
      });
      await this.deps.flow.advance(order);
    }
    return { ...view, state: 'approved' };
  }

  /** PUT /ApproverEmail/{id}: a new approver for the pending EMAIL names of a DV order not yet completed. */
  async changeApprover(actor: Actor, orderId: number, approver: string): Promise<void> {
    const order = await this.pendingEmailOrder(actor.principal, orderId);
    const email = approver.trim().toLowerCase();
    const names = (await this.deps.orders.names([orderId])).filter((n) => n.status === 'PENDING' && n.method === 'EMAIL').map((n) => n.name);
    for (const name of names) {
      if (!(await this.approversOf(name)).includes(email)) {
        throw new CertdeskError('invalidInput', `${email} is not an approver of ${name} (see GET /ApproverList).`, { field: 'ApproverEmail' });
      }
    }
    await this.audit(actor, order, 'dcv.approver-changed', { approver: email });
    await this.mailLink(order, email, names);
  }

  /** POST /ApproverEmail/{id}: the approval mail again, with a fresh link (the old one stops working). */
  async resend(actor: Actor, orderId: number): Promise<void> {
    const order = await this.pendingEmailOrder(actor.principal, orderId);
    const pending = (await this.deps.orders.names([orderId])).filter((n) => n.status === 'PENDING' && n.method === 'EMAIL' && n.approver_email !== null);
    if (pending.length === 0) throw new CertdeskError('invalidOrderState', `Order ${orderId} has no name waiting for an approver.`, { field: 'ServiceOrderID' });
    await this.audit(actor, order, 'dcv.mail-resent', {});
    const byApprover = new Map<string, string[]>();
    for (const n of pending) byApprover.set(n.approver_email!, [...(byApprover.get(n.approver_email!) ?? []), n.name]);
    for (const [approver, names] of byApprover) await this.mailLink(order, approver, names);
  }

  private async pendingEmailOrder(principal: Principal, orderId: number): Promise<OrderRow> {
    const order = await this.deps.orders.get(principal.customerId, orderId);
    if (order === undefined) throw new CertdeskError('orderNotFound', `Invalid order id ${orderId}: no such order.`, { field: 'ServiceOrderID' });
    if (order.validation_level !== 'DV' || order.major_status !== 'PENDING' || order.dv_auth_method !== 'EMAIL') {
      throw new CertdeskError('invalidOrderState', `Order ${orderId} is not a pending DV order validated by e-mail.`, { field: 'ServiceOrderID' });
    }
    return order;
  }

  private async approversOf(name: string): Promise<string[]> {
    try {
      return (await discoverApprovers(this.deps.resolver, name)).approvers.map((a) => a.ApproverEmail);
    } catch (e) {
      if (e instanceof DnsLookupError) return constructedApprovers(name);
      throw e;
    }
  }

  private async audit(actor: Actor, order: OrderRow, action: string, details: Record<string, unknown>): Promise<void> {
    await this.deps.audit.append({
      at: this.deps.clock.nowSeconds(), customerId: actor.principal.customerId, actor: actorName(actor.principal),
      clientAddress: actor.clientAddress, action, subject: String(order.id), details,
    });
  }
}
