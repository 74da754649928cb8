// Outgoing mail (DESIGN §3, §4): every mail is recorded in the outbox first, then sent over SMTP
// when CERTDESK_SMTP_URL is set. A failed send never undoes what the caller did: it is recorded
// with its error, and the mail can be sent again from the outbox.
import { createTransport } from 'nodemailer';
import type { Clock, ServiceUrls } from '../../core/index.js';
import type { MailRepo, NewMail } from '../../storage/mail-repo.js';

/** A mail to send: what the outbox records of it, but its status and time, which sending sets. */
export type OutgoingMail = Omit<NewMail, 'status' | 'createdAt'>;

/** Delivers one plain-text mail: nodemailer over SMTP, or a test fake. Rejects when delivery fails. */
export interface MailTransport {
  send(mail: { to: string; subject: string; text: string }): Promise<void>;
}

/** How long an SMTP server may take to accept the connection, greet, and answer each command. */
const CONNECTION_TIMEOUT_MS = 10_000;
const GREETING_TIMEOUT_MS = 10_000;
const SOCKET_TIMEOUT_MS = 30_000;
/** Longest error text kept in the outbox. */
const MAX_ERROR_LENGTH = 1_000;

/**
 * A transport sending through the SMTP server of `url` (`smtp://host:port`, or `smtps://`, with
 * optional `user:pass@`) from `from` (see `mailFrom`). One connection per mail: mail is rare, and
 * nothing is left open to close.
 */
export function smtpTransport(url: string, from: string): MailTransport {
  let protocol: string;
  try {
    protocol = new URL(url).protocol;
  } catch {
    throw new Error('bad SMTP URL: expected smtp://host:port');
  }
  if (protocol !== 'smtp:' && protocol !== 'smtps:')
    throw new Error(`bad SMTP URL scheme ${protocol} (expected smtp: or smtps:)`);
  const transporter = createTransport({
    url,
    connectionTimeout: CONNECTION_TIMEOUT_MS,
    greetingTimeout: GREETING_TIMEOUT_MS,
    socketTimeout: SOCKET_TIMEOUT_MS,
  });
  return {
    async send(mail) {
      await transporter.sendMail({ from, to: mail.to, subject: mail.subject, text: mail.text });
    },
  };
}

/** The sender of every mail: `certdesk <noreply@HOST>`, HOST being the host of the public URL (CERTDESK_PUBLIC_URL). */
export function mailFrom(urls: Pick<ServiceUrls, 'mailHost'>): string {
  return `certdesk <noreply@${urls.mailHost()}>`;
}

export interface MailerDeps {
  readonly repo: Pick<MailRepo, 'insert' | 'markSent' | 'markFailed'>;
  /** null when no SMTP server is configured: mail stays in the outbox. */
  readonly transport: MailTransport | null;
  readonly clock: Clock;
  readonly logger?: { warn(obj: object, msg?: string): void };
}

export class Mailer {
  constructor(private readonly deps: MailerDeps) {}

  /**
   * Records the mail in the outbox first, then sends it over SMTP when configured; a failed send
   * is recorded (status failed, error) and never thrown: the caller's state change stands, and
   * mail can be re-sent. Returns the outbox id. Only recording it can throw (a database error).
   *
   * Call it outside a database transaction (after the commit): the SMTP exchange can take seconds.
   */
  async send(mail: OutgoingMail): Promise<number> {
    const { repo, transport, clock } = this.deps;
    const id = await repo.insert({
      to: mail.to,
      subject: mail.subject,
      text: mail.text,
      kind: mail.kind,
      customerId: mail.customerId ?? null,
      orderId: mail.orderId ?? null,
      status: 'outbox',
      createdAt: clock.nowSeconds(),
    });
    if (transport === null) return id;

    try {
      await transport.send({ to: mail.to, subject: mail.subject, text: mail.text });
    } catch (err) {
      // Logged: the outbox id, the recipient's domain and the error code; never the body or address.
      this.deps.logger?.warn(
        { mailId: id, kind: mail.kind, toDomain: domainOf(mail.to), code: errorCode(err) },
        'mail not sent; kept in the outbox as failed',
      );
      await this.record(id, () => repo.markFailed(id, describe(err)));
      return id;
    }
    await this.record(id, () => repo.markSent(id, clock.nowSeconds()));
    return id;
  }

  /** Bookkeeping after the SMTP exchange: a database error here must not make a caller send twice. */
  private async record(id: number, write: () => Promise<void>): Promise<void> {
    try {
      await write();
    } catch (err) {
      this.deps.logger?.warn({ mailId: id, code: errorCode(err) }, 'mail status not recorded');
    }
  }
}

function domainOf(address: string): string {
  const at = address.lastIndexOf('@');
  return at < 0 ? '' : address.slice(at + 1).toLowerCase();
}

function errorCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

function describe(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text.length > MAX_ERROR_LENGTH ? `${text.slice(0, MAX_ERROR_LENGTH)}…` : text;
}
