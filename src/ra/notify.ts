import type { Clock, JobId } from '../core/index.js';
import { ensureRecurring, type JobsRepo, type MailRepo, type OrderRow, type OrdersRepo } from '../storage/index.js';
import type { Mailer } from './mail.js';

const DAY = 86_400;
/** Expiry reminders: days before the last EndDate of an order that is not renewed automatically. */
export const EXPIRY_REMINDER_DAYS = [30, 7, 1] as const;
/** DCV reminders: days after the order (or the reissue) while names still wait for their proof. */
export const DCV_REMINDER_DAYS = [3, 10, 20] as const;

export type OrderEvent = 'issued' | 'reissued' | 'revoked' | 'cancelled';

const SUBJECTS: Record<OrderEvent, (o: OrderRow) => string> = {
  issued: (o) => `Your certificate for ${o.common_name} is issued (order ${o.id})`,
  reissued: (o) => `Your certificate for ${o.common_name} was reissued (order ${o.id})`,
  revoked: (o) => `A certificate of order ${o.id} (${o.common_name}) was revoked`,
  cancelled: (o) => `Order ${o.id} (${o.common_name}) was cancelled`,
};

/** The addresses of an order's contacts, de-duplicated. */
export function contactAddresses(order: Pick<OrderRow, 'contacts_json'>): string[] {
  const c = JSON.parse(order.contacts_json) as { AdminContact?: { Email?: unknown }; TechContact?: { Email?: unknown } };
  return [c.AdminContact?.Email, c.TechContact?.Email].filter((e, i, all): e is string => typeof e === 'string' && e.includes('@') && all.indexOf(e) === i);
}

/**
 * Mail to an order's contacts (SMTP or the outbox): each lifecycle event, and reminders — DCV
 * still waiting, and the last certificate of an order about to expire (30, 7 and 1 days before).
 * A reminder is sent once: the outbox records what went out.
 */
export class Notifier {
  constructor(private readonly deps: {
    mailer: Pick<Mailer, 'send'>;
    mail: Pick<MailRepo, 'list'>;
    orders: Pick<OrdersRepo, 'byId' | 'names' | 'remindable'>;
    jobs: Pick<JobsRepo, 'enqueue'>;
    clock: Clock;
    publicUrl: string;
  }) {}

  async orderEvent(order: OrderRow, event: OrderEvent, detail = ''): Promise<void> {
    for (const to of contactAddresses(order)) {
      await this.deps.mailer.send({
        to, kind: `order.${event}`, customerId: order.customer_id, orderId: order.id, subject: SUBJECTS[event](order),
        text: `${SUBJECTS[event](order)}.\n${detail === '' ? '' : `\n${detail}\n`}\nThe order's details: GET ${this.deps.publicUrl}/rest/v1/Order/${order.id}\n`,
      });
    }
  }

  async schedule(): Promise<void> {
    await ensureRecurring(this.deps.jobs, 'notify.reminders', {}, DAY, this.deps.clock.nowSeconds());
  }

  /** Job `notify.reminders` (daily). */
  async reminders(_payload: Record<string, never>, ctx: { readonly id: JobId }): Promise<void> {
    await this.sendReminders();
    await ensureRecurring(this.deps.jobs, 'notify.reminders', {}, DAY, this.deps.clock.nowSeconds(), { after: ctx.id });
  }

  /** Sends each reminder that is due and was not sent yet; returns how many went out. */
  async sendReminders(): Promise<number> {
    const now = this.deps.clock.nowSeconds();
    let sent = 0;
    const { expiring, waiting } = await this.deps.orders.remindable(now, EXPIRY_REMINDER_DAYS[0] * DAY, DCV_REMINDER_DAYS[0] * DAY);
    for (const order of expiring) {
      const days = Math.ceil((order.cert_not_after! - now) / DAY);
      const threshold = [...EXPIRY_REMINDER_DAYS].reverse().find((d) => days <= d);
      if (threshold !== undefined && (await this.once(order, `reminder.expiry.${threshold}d`, `The certificate of order ${order.id} (${order.common_name}) expires in ${days} day(s)`, 'Order a renewal (IsRenewal) to keep the name covered.'))) sent++;
    }
    for (const order of waiting) {
      const age = Math.floor((now - (order.reissued_at ?? order.order_date)) / DAY);
      const threshold = [...DCV_REMINDER_DAYS].reverse().find((d) => age >= d);
      if (threshold === undefined) continue;
      const pending = (await this.deps.orders.names([order.id])).filter((n) => n.status === 'PENDING').map((n) => n.name);
      if (pending.length === 0) continue;
      const round = order.reissued_at ?? order.order_date;
      if (await this.once(order, `reminder.dcv.${round}.${threshold}d`, `Order ${order.id} still waits for domain control validation`, `Still to be shown (${order.dv_auth_method ?? ''}): ${pending.join(', ')}. The order fails 30 days after it was placed.`)) sent++;
    }
    return sent;
  }

  private async once(order: OrderRow, kind: string, subject: string, text: string): Promise<boolean> {
    const before = await this.deps.mail.list({ limit: 200, orderId: order.id });
    if (before.some((m) => m.kind === kind)) return false;
    const to = contactAddresses(order);
    for (const address of to) await this.deps.mailer.send({ to: address, kind, customerId: order.customer_id, orderId: order.id, subject, text: `${subject}.\n\n${text}\n` });
    return to.length > 0;
  }
}
