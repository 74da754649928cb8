import type { Clock, JobId, Order, ServiceUrls } from '../../core/index.js';
import {
  ensureRecurring,
  type JobsRepo,
  type MailRepo,
  type OrderNamesRepo,
  type OrderQueriesRepo,
} from '../../storage/index.js';
import type { Mailer, MailWrites } from './mail.js';

const DAY = 86_400;
/** Expiry reminders: days before the last EndDate of an order that is not renewed automatically. */
export const EXPIRY_REMINDER_DAYS = [30, 7, 1] as const;
/** DCV reminders: days after the order (or the reissue) while names still wait for their proof. */
export const DCV_REMINDER_DAYS = [3, 10, 20] as const;

export type OrderEvent = 'issued' | 'reissued' | 'revoked' | 'cancelled';

const SUBJECTS: Record<OrderEvent, (o: Order) => string> = {
  issued: (o) => `Your certificate for ${o.commonName} is issued (order ${o.id})`,
  reissued: (o) => `Your certificate for ${o.commonName} was reissued (order ${o.id})`,
  revoked: (o) => `A certificate of order ${o.id} (${o.commonName}) was revoked`,
  cancelled: (o) => `Order ${o.id} (${o.commonName}) was cancelled`,
};

/** The addresses of an order's contacts, de-duplicated. */
export function contactAddresses(order: Pick<Order, 'contacts'>): string[] {
  const c = order.contacts;
  // Orders stored before the contacts were typed may hold anything there: only addresses count.
  return [c.AdminContact?.Email as unknown, c.TechContact?.Email as unknown].filter(
    (e, i, all): e is string => typeof e === 'string' && e.includes('@') && all.indexOf(e) === i,
  );
}

/**
 * Mail to an order's contacts (SMTP or the outbox): each lifecycle event, and reminders — DCV
 * still waiting, and the last certificate of an order about to expire (30, 7 and 1 days before).
 * A reminder is sent once: the outbox records what went out.
 */
export class Notifier {
  constructor(
    private readonly deps: {
      mailer: Pick<Mailer, 'send' | 'sendIn'>;
      mail: Pick<MailRepo, 'list'>;
      orderQueries: Pick<OrderQueriesRepo, 'remindable'>;
      orderNames: Pick<OrderNamesRepo, 'names'>;
      jobs: Pick<JobsRepo, 'enqueue'>;
      clock: Clock;
      /** Builds the order links put into mails. */
      urls: Pick<ServiceUrls, 'order'>;
    },
  ) {}

  /**
   * Mails `event` to the order's contacts, in `tx`: the transaction of the state change it reports,
   * so the notices commit with it or not at all (a true outbox: docs/operations.md, Mail).
   */
  async orderEvent(order: Order, event: OrderEvent, detail: string, tx: MailWrites): Promise<void> {
    // A cancelled order's approval requests that have not left are not sent (their links lead nowhere).
    if (event === 'cancelled') await tx.mail.withdraw(order.id, 'dcv.approval');
    for (const to of contactAddresses(order)) {
      await this.deps.mailer.sendIn(tx, {
        to,
        kind: `order.${event}`,
        customerId: order.customerId,
        orderId: order.id,
        subject: SUBJECTS[event](order),
        text: `${SUBJECTS[event](order)}.\n${detail === '' ? '' : `\n${detail}\n`}\nThe order's details: GET ${this.deps.urls.order(order.id)}\n`,
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
    const { expiring, waiting } = await this.deps.orderQueries.remindable(
      now,
      EXPIRY_REMINDER_DAYS[0] * DAY,
      DCV_REMINDER_DAYS[0] * DAY,
    );
    for (const order of expiring) {
      const days = Math.ceil((order.certNotAfter! - now) / DAY);
      const threshold = [...EXPIRY_REMINDER_DAYS].reverse().find((d) => days <= d);
      if (
        threshold !== undefined &&
        (await this.once(
          order,
          `reminder.expiry.${threshold}d`,
          `The certificate of order ${order.id} (${order.commonName}) expires in ${days} day(s)`,
          'Order a renewal (IsRenewal) to keep the name covered.',
        ))
      )
        sent++;
    }
    for (const order of waiting) {
      const age = Math.floor((now - (order.reissuedAt ?? order.orderDate)) / DAY);
      const threshold = [...DCV_REMINDER_DAYS].reverse().find((d) => age >= d);
      if (threshold === undefined) continue;
      const pending = (await this.deps.orderNames.names([order.id]))
        .filter((n) => n.status === 'PENDING')
        .map((n) => n.name);
      if (pending.length === 0) continue;
      const round = order.reissuedAt ?? order.orderDate;
      if (
        await this.once(
          order,
          `reminder.dcv.${round}.${threshold}d`,
          `Order ${order.id} still waits for domain control validation`,
          `Still to be shown (${order.dvAuthMethod ?? ''}): ${pending.join(', ')}. The order fails 30 days after it was placed.`,
        )
      )
        sent++;
    }
    return sent;
  }

  private async once(order: Order, kind: string, subject: string, text: string): Promise<boolean> {
    const before = await this.deps.mail.list({ limit: 200, orderId: order.id });
    if (before.some((m) => m.kind === kind)) return false;
    const to = contactAddresses(order);
    for (const address of to)
      await this.deps.mailer.send({
        to: address,
        kind,
        customerId: order.customerId,
        orderId: order.id,
        subject,
        text: `${subject}.\n\n${text}\n`,
      });
    return to.length > 0;
  }
}
