import { createServer } from 'node:net';
import type { Kysely } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { startSmtpServer, type TestSmtpServer } from '../../../test/support/smtp-server.js';
import { Command } from 'commander';
import { addMailCommands, formatMails } from '../../cli/mail-commands.js';
import { FixedClock, ServiceUrls } from '../../core/index.js';
import { migrateToLatest, openDatabase, type Db } from '../../storage/index.js';
import { MailRepo, type MailRow } from '../../storage/mail-repo.js';
import { mail as mailMigration } from '../../storage/migrations/0005-mail.js';
import { Mailer, mailFrom, smtpTransport, type MailTransport } from './mail.js';

/** A migrated SQLite database with mail_outbox (made here while 0005-mail is not yet registered). */
async function openOutbox(): Promise<Db> {
  const db = await openDatabase({ url: ':memory:' });
  await migrateToLatest(db);
  const tables = await db.kysely.introspection.getTables();
  if (!tables.some((t) => t.name === 'mail_outbox'))
    await mailMigration(db.dialect).up(db.kysely as unknown as Kysely<unknown>);
  return db;
}

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('Mailer', () => {
  let db: Db;
  let repo: MailRepo;
  let smtp: TestSmtpServer;
  const clock = new FixedClock(1_700_000_000);
  const from = mailFrom(new ServiceUrls('http://127.0.0.1:8080'));

  beforeAll(async () => {
    db = await openOutbox();
    repo = new MailRepo(db);
    smtp = await startSmtpServer();
  });
  afterAll(async () => {
    await smtp.close();
    await db.close();
  });

  const approval = {
    to: 'admin@example.test',
    subject: 'Approve the certificate for www.example.test',
    text: 'Hello,\n\nplease approve: http://127.0.0.1:8080/dcv/approve?token=abc\n\nÜmlauts survive.',
    kind: 'dcv.approval',
    customerId: 3,
    orderId: 30,
  };

  it('ok/sends over SMTP and records the mail as sent', async () => {
    const logger = { warn: vi.fn() };
    const mailer = new Mailer({ repo, transport: smtpTransport(smtp.url, from), clock, logger });
    const id = await mailer.send(approval);

    const got = await smtp.waitFor((m) => m.subject === approval.subject);
    expect(got.text?.trim()).toBe(approval.text);
    expect(got.envelope).toEqual({ from: 'noreply@127.0.0.1', to: ['admin@example.test'] });
    expect(got.from?.value).toEqual([{ address: 'noreply@127.0.0.1', name: 'certdesk' }]);
    const to = Array.isArray(got.to) ? got.to.flatMap((a) => a.value) : got.to?.value;
    expect(to?.map((a) => a.address)).toEqual(['admin@example.test']);

    const [row] = await repo.list({ limit: 1, orderId: 30 });
    expect(row).toMatchObject({
      id,
      status: 'sent',
      error: null,
      sentAt: clock.nowSeconds(),
      createdAt: clock.nowSeconds(),
      customerId: 3,
      kind: 'dcv.approval',
    });
    expect(logger.warn).not.toHaveBeenCalled();
  });

  it('ok/without SMTP the mail stays in the outbox', async () => {
    const mailer = new Mailer({ repo, transport: null, clock });
    const before = smtp.received.length;
    const id = await mailer.send({ ...approval, orderId: 31 });
    expect(await repo.list({ limit: 5, orderId: 31 })).toEqual([
      expect.objectContaining({ id, status: 'outbox', sentAt: null, text: approval.text }),
    ]);
    expect(smtp.received.length).toBe(before);
  });

  it('fail/an unreachable SMTP server: send resolves, the mail is recorded as failed, the log names no address or body', async () => {
    const logger = { warn: vi.fn() };
    const mailer = new Mailer({
      repo,
      transport: smtpTransport(`smtp://127.0.0.1:${await closedPort()}`, from),
      clock,
      logger,
    });
    const id = await mailer.send({ ...approval, orderId: 32 });
    const [row] = await repo.list({ limit: 1, orderId: 32 });
    expect(row).toMatchObject({ id, status: 'failed', sentAt: null });
    expect(row?.error).toMatch(/ECONNREFUSED|connect/i);
    expect(logger.warn).toHaveBeenCalledTimes(1);
    const logged = JSON.stringify(logger.warn.mock.calls);
    expect(logged).toContain('example.test');
    expect(logged).toContain(String(id));
    expect(logged).not.toContain('admin@');
    expect(logged).not.toContain('token=abc');
  });

  it('fail/a transport that throws is recorded, never thrown', async () => {
    const transport: MailTransport = { send: () => Promise.reject(new Error('550 mailbox unavailable')) };
    const id = await new Mailer({ repo, transport, clock }).send({ ...approval, orderId: 33 });
    expect((await repo.list({ limit: 1, orderId: 33 }))[0]).toMatchObject({
      id,
      status: 'failed',
      error: '550 mailbox unavailable',
    });
  });

  it('fail/bookkeeping after a send does not throw (no second send by a retrying caller)', async () => {
    const sent: string[] = [];
    const transport: MailTransport = { send: async (m) => void sent.push(m.to) };
    const logger = { warn: vi.fn() };
    const broken = {
      insert: () => Promise.resolve(99),
      markSent: () => Promise.reject(new Error('db down')),
      markFailed: () => Promise.resolve(),
    };
    expect(await new Mailer({ repo: broken, transport, clock, logger }).send(approval)).toBe(99);
    expect(sent).toEqual(['admin@example.test']);
    expect(logger.warn).toHaveBeenCalledWith(expect.objectContaining({ mailId: 99 }), expect.any(String));
  });

  it('fail/a database error while recording is thrown, and nothing is sent', async () => {
    const sent: string[] = [];
    const transport: MailTransport = { send: async (m) => void sent.push(m.to) };
    const broken = {
      insert: () => Promise.reject(new Error('db down')),
      markSent: () => Promise.resolve(),
      markFailed: () => Promise.resolve(),
    };
    await expect(new Mailer({ repo: broken, transport, clock }).send(approval)).rejects.toThrow('db down');
    expect(sent).toEqual([]);
  });

  it('fail/refuses a URL that is not smtp:// or smtps://', () => {
    expect(() => smtpTransport('http://127.0.0.1:25', from)).toThrow(/scheme/);
    expect(() => smtpTransport('not a url', from)).toThrow(/SMTP URL/);
  });

  it('ok/the sender is noreply at the public URL host', () => {
    expect(mailFrom(new ServiceUrls('https://certs.example.org:8443/base'))).toBe(
      'certdesk <noreply@certs.example.org>',
    );
  });
});

describe('mail list', () => {
  const rows: MailRow[] = [
    {
      id: 2,
      customerId: 3,
      orderId: 30,
      to: 'a@example.test',
      subject: 'Approve',
      text: 'body two',
      kind: 'dcv.approval',
      status: 'failed',
      error: 'connect ECONNREFUSED',
      createdAt: 1_700_000_100,
      sentAt: null,
    },
    {
      id: 1,
      customerId: null,
      orderId: null,
      to: 'b@example.test',
      subject: 'Hello',
      text: 'body one',
      kind: 'test',
      status: 'sent',
      error: null,
      createdAt: 1_700_000_000,
      sentAt: 1_700_000_001,
    },
  ];
  let out: string[];
  afterEach(() => vi.restoreAllMocks());

  const run = async (args: string[]) => {
    out = [];
    vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      out.push(String(chunk));
      return true;
    });
    const calls: unknown[] = [];
    let closed = 0;
    const program = new Command('certdesk').exitOverride();
    addMailCommands(program, async () => ({
      mail: { list: async (o) => (calls.push(o), rows) },
      close: async () => void closed++,
    }));
    await program.parseAsync(['node', 'certdesk', 'mail', 'list', ...args]);
    vi.restoreAllMocks();
    return { calls, closed, printed: out.join('') };
  };

  it('ok/--json prints one object with every mail, bodies included', async () => {
    const { calls, closed, printed } = await run(['--order', '30', '--customer', '3', '--limit', '5', '--json']);
    expect(calls).toEqual([{ limit: 5, orderId: 30, customerId: 3 }]);
    expect(closed).toBe(1);
    expect(JSON.parse(printed)).toEqual({
      Mails: [
        {
          ID: 2,
          CreatedAt: '2023-11-14T22:15:00Z',
          Status: 'failed',
          Kind: 'dcv.approval',
          CustomerID: 3,
          OrderID: 30,
          To: 'a@example.test',
          Subject: 'Approve',
          SentAt: null,
          Error: 'connect ECONNREFUSED',
          Text: 'body two',
        },
        {
          ID: 1,
          CreatedAt: '2023-11-14T22:13:20Z',
          Status: 'sent',
          Kind: 'test',
          CustomerID: null,
          OrderID: null,
          To: 'b@example.test',
          Subject: 'Hello',
          SentAt: '2023-11-14T22:13:21Z',
          Error: null,
          Text: 'body one',
        },
      ],
    });
  });

  it('ok/text: one line per mail (id, time, status, to, subject), default limit', async () => {
    const { calls, printed } = await run([]);
    expect(calls).toEqual([{ limit: 20 }]);
    expect(printed).toBe(
      '2\t2023-11-14T22:15:00Z\tfailed\ta@example.test\tApprove\t(connect ECONNREFUSED)\n1\t2023-11-14T22:13:20Z\tsent\tb@example.test\tHello\n',
    );
    expect(formatMails([]).text).toBe('no mails');
  });

  it('fail/refuses a bad id or limit before opening anything', async () => {
    await expect(run(['--order', 'x'])).rejects.toThrow('not a order id: x');
    await expect(run(['--limit', '0'])).rejects.toThrow(/limit/);
    await expect(run(['--limit', '100000'])).rejects.toThrow(/too large/);
  });
});
