// Operator commands for the mail outbox (DESIGN §4: `mail list`; `mail resend`).
import type { Command } from 'commander';
import { parseCustomer, parsePositive } from './args.js';
import { print } from './print.js';
import { formatTimestamp } from '../core/index.js';
import type { Mailer } from '../ra/mail/mail.js';
import type { MailRepo, MailRow } from '../storage/mail-repo.js';

/** What the mail commands need: the outbox, the mailer, and a way to release what was opened for them. */
export type OpenMailOutbox = () => Promise<{
  mail: Pick<MailRepo, 'list'>;
  mailer: Pick<Mailer, 'resend'>;
  close(): Promise<void>;
}>;

const DEFAULT_LIMIT = 20;
const MAX_LIMIT = 10_000;

/**
 * Adds `mail list [--order ID] [--customer ID] [--limit N] [--json]` (the newest mails of the
 * outbox first) and `mail resend ID [--json]` to `program`. `open` is called once per run and its
 * result closed afterwards.
 */
export function addMailCommands(program: Command, open: OpenMailOutbox): void {
  const mail = program.command('mail').description('the mail outbox: every mail the service sent or would send');

  mail
    .command('list')
    .description('list the newest mails (sent, outbox only, or failed) first')
    .option('--order <id>', 'only the mails of this order')
    .option('--customer <id>', 'only the mails of this customer')
    .option('--limit <n>', `at most this many mails (default ${DEFAULT_LIMIT}, at most ${MAX_LIMIT})`)
    .option('--json', 'print one JSON object, mail bodies included')
    .action(async (o: { order?: string; customer?: string; limit?: string; json?: boolean }) => {
      const limit = o.limit === undefined ? DEFAULT_LIMIT : parsePositive(o.limit, 'limit');
      if (limit > MAX_LIMIT) throw new Error(`limit too large: ${limit} (at most ${MAX_LIMIT})`);
      const options = {
        limit,
        ...(o.order === undefined ? {} : { orderId: parsePositive(o.order, 'order id') }),
        ...(o.customer === undefined ? {} : { customerId: parseCustomer(o.customer) }),
      };
      const opened = await open();
      let rows: MailRow[];
      try {
        rows = await opened.mail.list(options);
      } finally {
        await opened.close();
      }
      const out = formatMails(rows);
      print(o.json === true, out.json, out.text);
    });

  mail
    .command('resend')
    .description('queue the delivery of a mail again: one that failed for good, or was recorded while SMTP was off')
    .argument('<id>', 'the mail (mail list shows the ids)')
    .option('--json', 'print one JSON object')
    .action(async (idText: string, o: { json?: boolean }) => {
      const id = parsePositive(idText, 'mail id');
      const opened = await open();
      let result: Awaited<ReturnType<Mailer['resend']>>;
      try {
        result = await opened.mailer.resend(id);
      } finally {
        await opened.close();
      }
      print(o.json === true, { ID: id, Result: result }, `mail ${id}: ${result}; the worker sends it`);
    });
}

/** One mail as `mail list --json` prints it. */
export interface MailJson {
  readonly ID: number;
  readonly CreatedAt: string | null;
  readonly Status: string;
  readonly Kind: string;
  readonly CustomerID: number | null;
  readonly OrderID: number | null;
  readonly To: string;
  readonly Subject: string;
  readonly SentAt: string | null;
  readonly Error: string | null;
  readonly Text: string;
}

/** The two forms of `mail list`: `{ Mails: [...] }` (bodies included), and one tab-separated line per mail. */
export function formatMails(rows: readonly MailRow[]): { json: { Mails: MailJson[] }; text: string } {
  const mails = rows.map((r) => ({
    ID: r.id,
    CreatedAt: formatTimestamp(r.createdAt),
    Status: r.status,
    Kind: r.kind,
    CustomerID: r.customerId,
    OrderID: r.orderId,
    To: r.to,
    Subject: r.subject,
    SentAt: formatTimestamp(r.sentAt),
    Error: r.error,
    Text: r.text,
  }));
  const text =
    mails.length === 0
      ? 'no mails'
      : mails
          .map(
            (m) =>
              [m.ID, m.CreatedAt, m.Status, m.To, m.Subject].join('\t') + (m.Error === null ? '' : `\t(${m.Error})`),
          )
          .join('\n');
  return { json: { Mails: mails }, text };
}
