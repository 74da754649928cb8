import {
  CertdeskError,
  orderId as toOrderId,
  type Clock,
  type Order,
  type OrderId,
  type OrderName,
  type Principal,
  type ServiceUrls,
} from '../../core/index.js';
import type { AuditEvent, AuditRepo, OrderNamesRepo, OrdersRepo } from '../../storage/index.js';
import { DnsLookupError, constructedApprovers, discoverApprovers, type DcvResolver } from '../../validation/index.js';
import type { MailWrites, Mailer } from '../mail/mail.js';
import type { OrderFlow } from '../issuance/order-flow.js';
import { actorName, type Actor } from '../accounts/actor.js';
import { hashSecret, newSecret } from '../accounts/secrets.js';

/** What new approval links read and write, in one transaction. */
export interface LinkWrites extends MailWrites {
  readonly orderNames: Pick<OrderNamesRepo, 'names' | 'setApproval'>;
}

/** What the confirmation page shows (GET never changes anything: mail scanners follow links). */
export interface ApprovalView {
  readonly orderId: OrderId;
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
  constructor(
    private readonly deps: {
      orders: OrdersRepo;
      orderNames: Pick<OrderNamesRepo, 'names' | 'setApproval' | 'namesByApprovalToken' | 'approve'>;
      audit: Pick<AuditRepo, 'append'>;
      mailer: Pick<Mailer, 'sendIn'>;
      /** New links, the withdrawal of the old ones' mails and the new mails commit together. */
      transact: <T>(
        fn: (tx: LinkWrites & { audit: Pick<AuditRepo, 'append'>; orders: Pick<OrdersRepo, 'holdIn'> }) => Promise<T>,
      ) => Promise<T>;
      flow: Pick<OrderFlow, 'advanceForPerson'>;
      resolver: DcvResolver;
      clock: Clock;
      /** Builds the approval links put into mails (under CERTDESK_PUBLIC_URL). */
      urls: Pick<ServiceUrls, 'approval'>;
    },
  ) {}

  /**
   * The approval mails of an EMAIL order just placed or reissued, one per approver, in the
   * transaction that stored it: the order never commits without its links mailed.
   */
  async mailPendingIn(tx: LinkWrites, order: Order): Promise<void> {
    const pending = (await tx.orderNames.names([order.id])).filter(
      (n) => n.status === 'PENDING' && n.method === 'EMAIL',
    );
    await this.linksIn(tx, order, byApprover(pending));
  }

  /**
   * New approval links for the order's pending names, one mail per approver, in one transaction:
   * the order's approval mails that have not left yet carry links this replaces, so they are
   * withdrawn, never sent; the caller's audit `event` is recorded with them. A failure changes
   * nothing (the old links and their mails stay, no event). The order is held pending for the
   * transaction (first, as a cancel takes it first): a cancel that committed since the caller read
   * the order refuses the links (invalidOrderState); one that comes later withdraws their mails.
   */
  private async mailLinks(
    order: Order,
    byApprover: ReadonlyMap<string, readonly string[]>,
    event: AuditEvent,
  ): Promise<void> {
    await this.deps.transact(async (tx) => {
      if (!(await tx.orders.holdIn(order.id, order.majorStatus))) throw notPendingEmail(order.id);
      await this.linksIn(tx, order, byApprover);
      await tx.audit.append(event);
    });
  }

  private async linksIn(
    tx: LinkWrites,
    order: Order,
    byApprover: ReadonlyMap<string, readonly string[]>,
  ): Promise<void> {
    await tx.mail.withdraw(order.id, 'dcv.approval');
    for (const [approver, names] of byApprover) await this.mailLink(tx, order, approver, names);
  }

  private async mailLink(tx: LinkWrites, order: Order, approver: string, names: readonly string[]): Promise<void> {
    const token = newSecret('cda_');
    await tx.orderNames.setApproval(order.id, names, approver, hashSecret(token));
    const link = this.deps.urls.approval(token);
    await this.deps.mailer.sendIn(tx, {
      to: approver,
      kind: 'dcv.approval',
      customerId: order.customerId,
      orderId: order.id,
      subject: `Approve the certificate for ${names[0]!}${names.length > 1 ? ` and ${names.length - 1} more` : ''}`,
      text: [
        `A certificate was ordered for:`,
        ...names.map((n) => `  ${n}`),
        '',
        `You are receiving this mail because ${approver} may approve certificates for these names.`,
        `To approve, open this page and confirm there (opening the link alone approves nothing):`,
        '',
        link,
        '',
        `If you did not expect this request, ignore this mail: without approval no certificate is issued.`,
        `Order ${order.id}, product ${order.productCode}.`,
      ].join('\n'),
    });
  }

  async view(token: string): Promise<ApprovalView | undefined> {
    const names = await this.deps.orderNames.namesByApprovalToken(hashSecret(token));
    const first = names[0];
    if (first === undefined) return undefined;
    const order = await this.deps.orders.byId(first.orderId);
    if (order === undefined) return undefined;
    // A new order's names or a reissue round's (a replaced round's links are gone with its names).
    const state =
      order.majorStatus !== 'PENDING' && order.majorStatus !== 'REISSUE'
        ? 'closed'
        : names.every((n) => n.status === 'VALIDATED')
          ? 'approved'
          : 'pending';
    return {
      orderId: order.id,
      productCode: order.productCode,
      names: names.map((n) => n.name),
      approver: first.approverEmail ?? '',
      state,
    };
  }

  /** The approver confirms (POST): the names become validated and the order moves on. */
  async approve(token: string, clientAddress: string | null): Promise<ApprovalView | undefined> {
    const view = await this.view(token);
    if (view === undefined) return undefined;
    if (view.state !== 'pending') return view;
    const now = this.deps.clock.nowSeconds();
    const changed = await this.deps.orderNames.approve(hashSecret(token), now);
    const order = (await this.deps.orders.byId(view.orderId))!;
    if (changed > 0) {
      await this.deps.audit.append({
        at: now,
        customerId: order.customerId,
        actor: `approver:${view.approver}`,
        clientAddress,
        action: 'dcv.approved',
        subject: String(order.id),
        details: { names: view.names },
      });
      await this.deps.flow.advanceForPerson(order);
    }
    return { ...view, state: 'approved' };
  }

  /** PUT /ApproverEmail/{id}: a new approver for the pending EMAIL names of a DV order not yet completed, or of a reissue. */
  async changeApprover(actor: Actor, orderId: number, approver: string): Promise<void> {
    const order = await this.pendingEmailOrder(actor.principal, orderId);
    const email = approver.trim().toLowerCase();
    const names = (await this.deps.orderNames.names([order.id]))
      .filter((n) => n.status === 'PENDING' && n.method === 'EMAIL')
      .map((n) => n.name);
    for (const name of names) {
      if (!(await this.approversOf(name)).includes(email)) {
        throw new CertdeskError('invalidInput', `${email} is not an approver of ${name} (see GET /ApproverList).`, {
          field: 'ApproverEmail',
        });
      }
    }
    await this.mailLinks(
      order,
      new Map([[email, names]]),
      this.event(actor, order, 'dcv.approver-changed', { approver: email }),
    );
  }

  /** POST /ApproverEmail/{id}: the approval mail again, with a fresh link (the old one stops working). */
  async resend(actor: Actor, orderId: number): Promise<void> {
    const order = await this.pendingEmailOrder(actor.principal, orderId);
    const pending = (await this.deps.orderNames.names([order.id])).filter(
      (n) => n.status === 'PENDING' && n.method === 'EMAIL' && n.approverEmail !== null,
    );
    if (pending.length === 0)
      throw new CertdeskError('invalidOrderState', `Order ${orderId} has no name waiting for an approver.`, {
        field: 'ServiceOrderID',
      });
    await this.mailLinks(order, byApprover(pending), this.event(actor, order, 'dcv.mail-resent', {}));
  }

  private async pendingEmailOrder(principal: Principal, orderId: number): Promise<Order> {
    const order = await this.deps.orders.get(principal.customerId, toOrderId(orderId));
    if (order === undefined)
      throw new CertdeskError('orderNotFound', `Invalid order id ${orderId}: no such order.`, {
        field: 'ServiceOrderID',
      });
    // A reissue keeps the organization vetted, so its names are the order's only proof: any level.
    const open = (order.majorStatus === 'PENDING' && order.validationLevel === 'DV') || order.majorStatus === 'REISSUE';
    if (!open || order.dvAuthMethod !== 'EMAIL') throw notPendingEmail(orderId);
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

  private event(actor: Actor, order: Order, action: string, details: Record<string, unknown>): AuditEvent {
    return {
      at: this.deps.clock.nowSeconds(),
      customerId: actor.principal.customerId,
      actor: actorName(actor.principal),
      clientAddress: actor.clientAddress,
      action,
      subject: String(order.id),
      details,
    };
  }
}

function notPendingEmail(orderId: number): CertdeskError {
  return new CertdeskError(
    'invalidOrderState',
    `Order ${orderId} is not a pending DV order or reissue validated by e-mail.`,
    {
      field: 'ServiceOrderID',
    },
  );
}

/** Names by the approver who is to approve them (names without one are left out). */
function byApprover(names: readonly OrderName[]): Map<string, string[]> {
  const by = new Map<string, string[]>();
  for (const n of names)
    if (n.approverEmail !== null) by.set(n.approverEmail, [...(by.get(n.approverEmail) ?? []), n.name]);
  return by;
}
