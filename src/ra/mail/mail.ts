// Outgoing mail (DESIGN §3, §4): every mail is recorded in the outbox, and when CERTDESK_SMTP_URL
// is set its delivery is queued with it (job `mail.deliver`): the worker sends it over SMTP and
// retries with backoff, so no request waits on an SMTP server. A failed send never undoes what
// the caller did: it is recorded with its error.
import { CertdeskError, formatTimestamp, type Clock, type ServiceUrls } from '../../core/index.js';
import type { JobsRepo } from '../../storage/index.js';
import { mailDeliveryJob, type MailRepo, type NewMail } from '../../storage/mail-repo.js';

/** A mail to send: what the outbox records of it, but its status and time, which sending sets. */
export type OutgoingMail = Omit<NewMail, 'status' | 'createdAt'>;

/** Delivers one plain-text mail: nodemailer over SMTP, or a test fake. Rejects when delivery fails. */
/** certdesk's own secrets (ra/accounts/secrets.ts `newSecret`: a `cd?_` prefix), as mails carry them in links. */
const OWN_SECRETS = /\bcd[a-z]_[A-Za-z0-9_-]{16,}/g;

export interface MailTransport {
  send(mail: { to: string; subject: string; text: string }): Promise<void>;
}

/** How long an SMTP server may take to accept the connection, greet, and answer each command. */
const CONNECTION_TIMEOUT_MS = 10_000;
const GREETING_TIMEOUT_MS = 10_000;
const SOCKET_TIMEOUT_MS = 30_000;
/**
 * After a send that got no answer from the SMTP server (refused, timed out), this process's
 * deliveries fail at once for this long, to be retried with the jobs' backoff: a dead SMTP server
 * holds one worker slot at a time, not every slot the issuance jobs need.
 */
const SMTP_PAUSE_SECONDS = 30;
/** Longest error text kept in the outbox. */
const MAX_ERROR_LENGTH = 1_000;

/**
 * A transport sending through the SMTP server of `url` (`smtp://host:port`, or `smtps://`, with
 * optional `user:pass@`) from `from` (see `mailFrom`). One connection per mail: mail is rare, and
 * nothing is left open to close. nodemailer loads here, so a process without SMTP never loads it,
 * and a URL it refuses still stops the start.
 */
export async function smtpTransport(url: string, from: string): Promise<MailTransport> {
  let protocol: string;
  try {
    protocol = new URL(url).protocol;
  } catch {
    throw new Error('bad SMTP URL: expected smtp://host:port');
  }
  if (protocol !== 'smtp:' && protocol !== 'smtps:')
    throw new Error(`bad SMTP URL scheme ${protocol} (expected smtp: or smtps:)`);
  const { createTransport } = await import('nodemailer');
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

/**
 * What recording mail writes, in a transaction: the outbox row and its delivery job. A state
 * change passes its own transaction's repositories (`sendIn`), so its notice commits with it.
 */
export interface MailWrites {
  readonly mail: Pick<MailRepo, 'insertInTransaction' | 'withdraw'>;
}

export interface MailerDeps {
  readonly repo: Pick<MailRepo, 'byId' | 'markSent' | 'markFailed'>;
  /** A transaction of its own, for mail that is not part of a state change (`send`). */
  readonly transact: <T>(fn: (repos: { readonly mail: Pick<MailRepo, 'insert'> }) => Promise<T>) => Promise<T>;
  /** The job queue outside a transaction (`resend`). */
  readonly jobs: Pick<JobsRepo, 'enqueue'>;
  /** null when no SMTP server is configured: mail stays in the outbox. */
  readonly transport: MailTransport | null;
  readonly clock: Clock;
  readonly logger?: { warn(obj: object, msg?: string): void };
}

export class Mailer {
  /** Until when deliveries wait (SMTP_PAUSE_SECONDS): the SMTP server did not answer. */
  private smtpDownUntil = 0;

  constructor(private readonly deps: MailerDeps) {}

  /**
   * Records the mail in the outbox and, when SMTP is configured, queues its delivery with it, in
   * a transaction of its own. Returns the outbox id. Nothing here talks SMTP; only the database can
   * make it throw.
   */
  async send(mail: OutgoingMail): Promise<number> {
    return this.deps.transact((tx) => tx.mail.insert(...this.recorded(mail)));
  }

  /**
   * `send` in the caller's transaction: the mail and its delivery job commit (or roll back) with
   * what the caller changed, so a notice is never lost to a crash after the change, nor sent for a
   * change that did not commit (a true outbox). Nothing is read back (on PostgreSQL the mail
   * costs the transaction no round trip of its own: `MailRepo.insertInTransaction`).
   */
  async sendIn(tx: MailWrites, mail: OutgoingMail): Promise<void> {
    await tx.mail.insertInTransaction(...this.recorded(mail));
  }

  /** The outbox row of `mail`, and when its delivery is due: now, or never when no SMTP server is configured. */
  private recorded(mail: OutgoingMail): [NewMail, number | null] {
    const now = this.deps.clock.nowSeconds();
    return [
      {
        to: mail.to,
        subject: mail.subject,
        text: mail.text,
        kind: mail.kind,
        customerId: mail.customerId ?? null,
        orderId: mail.orderId ?? null,
        status: 'outbox',
        createdAt: now,
      },
      this.deps.transport === null ? null : now,
    ];
  }

  /**
   * The job `mail.deliver`: sends one mail of the outbox over SMTP. A failed send is recorded
   * (status failed, with the error) and thrown, so the worker tries again with backoff. A mail sent
   * already is not sent again; one whose sending was recorded badly is not retried (at most one
   * extra copy, from a worker that died between the SMTP answer and the record).
   */
  async deliver(payload: { mailId: number }): Promise<void> {
    const { repo, transport, clock } = this.deps;
    const mail = await repo.byId(payload.mailId);
    if (mail === undefined || mail.status === 'sent' || mail.status === 'withdrawn') return;
    // Thrown, not finished: a worker started without SMTP must not use up the mail's job.
    if (transport === null)
      throw new Error(`mail ${mail.id} not sent: this process has no SMTP server (CERTDESK_SMTP_URL)`);
    if (clock.nowSeconds() < this.smtpDownUntil)
      throw new Error(`mail ${mail.id} not sent: the SMTP server did not answer a moment ago`);
    try {
      await transport.send({ to: mail.to, subject: mail.subject, text: mail.text });
    } catch (err) {
      // No SMTP answer at all (a refused connection, a timeout): pause; a refusal of this mail does not.
      if (typeof (err as { responseCode?: unknown } | null)?.responseCode !== 'number')
        this.smtpDownUntil = clock.nowSeconds() + SMTP_PAUSE_SECONDS;
      // Logged: the outbox id, the recipient's domain and the error code; never the body or address.
      const code = errorCode(err);
      this.deps.logger?.warn(
        { mailId: mail.id, kind: mail.kind, toDomain: domainOf(mail.to), code },
        'mail not sent; the worker tries again',
      );
      await this.record(mail.id, () => repo.markFailed(mail.id, describe(err)));
      throw new Error(`mail ${mail.id} not sent (${code ?? 'SMTP error'})`);
    }
    this.smtpDownUntil = 0;
    // Sent, a mail keeps no secret it carried (an approval link's token is stored hashed elsewhere):
    // whoever reads the outbox or a backup cannot use it.
    const kept = mail.text.replace(OWN_SECRETS, '[removed once sent]');
    await this.record(mail.id, () => repo.markSent(mail.id, clock.nowSeconds(), kept === mail.text ? undefined : kept));
  }

  /**
   * Queues the delivery of an outbox mail again (`certdesk mail resend`): one whose job gave up
   * (status failed, the job dead), or one recorded while no SMTP server was configured. A mail
   * sent already is refused: it is never sent twice on purpose.
   */
  async resend(id: number): Promise<'queued' | 'queued already'> {
    if (this.deps.transport === null)
      throw new CertdeskError(
        'notReady',
        'No SMTP server is configured (CERTDESK_SMTP_URL): mail stays in the outbox.',
      );
    const mail = await this.deps.repo.byId(id);
    if (mail === undefined) throw new CertdeskError('notFound', `No mail ${id} in the outbox.`);
    if (mail.status === 'withdrawn')
      throw new CertdeskError(
        'conflict',
        `Mail ${id} was withdrawn: what it carried was replaced (a newer mail has it).`,
      );
    if (mail.status === 'sent')
      throw new CertdeskError(
        'conflict',
        `Mail ${id} was sent at ${formatTimestamp(mail.sentAt) ?? '?'}: not sending it twice.`,
      );
    const now = this.deps.clock.nowSeconds();
    const queued = await this.deps.jobs.enqueue(mailDeliveryJob(id, now), now);
    return queued.created ? 'queued' : 'queued already';
  }

  /** Bookkeeping after the SMTP exchange: a database error here must not make the job send twice. */
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
