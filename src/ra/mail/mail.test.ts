import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { testDialects } from '../../../test/support/databases.js';
import { refusedTcpPort, type RefusedPort } from '../../../test/support/refused-ports.js';
import { startSmtpServer, type TestSmtpServer } from '../../../test/support/smtp-server.js';
import { Command } from 'commander';
import { addMailCommands, formatMails } from '../../cli/mail-commands.js';
import { FixedClock, ServiceUrls } from '../../core/index.js';
import { JobsRepo, inTransaction, type Db } from '../../storage/index.js';
import { MailRepo, type MailRow } from '../../storage/mail-repo.js';
import { Mailer, mailFrom, smtpTransport, type MailTransport } from './mail.js';

/** An error carrying the SMTP server's answer, as nodemailer gives it. */
const smtpAnswer = (message: string, responseCode: number) => Object.assign(new Error(message), { responseCode });

// The status races (a delivery against a withdrawal, a late failure against a send) run on both databases.
describe.each(testDialects())('Mailer on $dialect', ({ open }) => {
  let db: Db;
  let repo: MailRepo;
  let smtp: TestSmtpServer;
  let refused: RefusedPort;
  const clock = new FixedClock(1_700_000_000);
  const from = mailFrom(new ServiceUrls('http://127.0.0.1:8080'));

  beforeAll(async () => {
    db = await open();
    repo = new MailRepo(db);
    smtp = await startSmtpServer();
    refused = await refusedTcpPort();
  });
  afterAll(async () => {
    await refused.close();
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

  /** A Mailer over the test outbox, its mail and delivery job written in one transaction. */
  const mailerWith = (transport: MailTransport | null, logger?: { warn: (...a: unknown[]) => void }) =>
    new Mailer({
      repo,
      transact: (fn) => inTransaction(db, (tx) => fn({ mail: new MailRepo(tx) })),
      jobs: new JobsRepo(db),
      transport,
      clock,
      ...(logger === undefined ? {} : { logger }),
    });
  /** The delivery jobs queued for mail `id`. */
  const deliveries = (id: number) =>
    db.kysely.selectFrom('jobs').select(['name', 'payload', 'status']).where('unique_key', '=', `mail:${id}`).execute();

  it('ok/send records the mail and queues its delivery, talking no SMTP; delivery sends it and records it sent', async () => {
    const logger = { warn: vi.fn() };
    const mailer = mailerWith(await smtpTransport(smtp.url, from), logger);
    const before = smtp.received.length;
    const id = await mailer.send(approval);
    expect(smtp.received.length).toBe(before);
    expect(await repo.byId(id)).toMatchObject({ id, status: 'outbox', sentAt: null });
    expect(await deliveries(id)).toEqual([
      { name: 'mail.deliver', payload: JSON.stringify({ mailId: id }), status: 'queued' },
    ]);

    await mailer.deliver({ mailId: id });
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

    // The job run again (a retry after a lost answer) sends nothing twice.
    const count = smtp.received.length;
    await mailer.deliver({ mailId: id });
    expect(smtp.received.length).toBe(count);
  });

  it('ok/without SMTP the mail stays in the outbox, and no delivery is queued', async () => {
    const mailer = mailerWith(null);
    const before = smtp.received.length;
    const id = await mailer.send({ ...approval, orderId: 31 });
    expect(await repo.list({ limit: 5, orderId: 31 })).toEqual([
      expect.objectContaining({ id, status: 'outbox', sentAt: null, text: approval.text }),
    ]);
    expect(await deliveries(id)).toEqual([]);
    expect(smtp.received.length).toBe(before);
  });

  it('fail/an unreachable SMTP server: send resolves at once; delivery records the failure and throws for a retry, the log names no address or body', async () => {
    const logger = { warn: vi.fn() };
    const mailer = mailerWith(await smtpTransport(`smtp://127.0.0.1:${refused.port}`, from), logger);
    const id = await mailer.send({ ...approval, orderId: 32 });
    expect(logger.warn).not.toHaveBeenCalled();

    const thrown = await mailer.deliver({ mailId: id }).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(thrown?.message).toMatch(new RegExp(`^mail ${id} not sent`));
    expect(thrown?.message).not.toContain('admin@');
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

  it('ok/a failed mail is sent by a later delivery, its error cleared', async () => {
    let down = true;
    const sent: string[] = [];
    const transport: MailTransport = {
      send: (m) =>
        down ? Promise.reject(smtpAnswer('421 try again later', 421)) : Promise.resolve(void sent.push(m.to)),
    };
    const mailer = mailerWith(transport);
    const id = await mailer.send({ ...approval, orderId: 33 });
    await expect(mailer.deliver({ mailId: id })).rejects.toThrow(`mail ${id} not sent`);
    expect(await repo.byId(id)).toMatchObject({ status: 'failed', error: '421 try again later' });
    down = false;
    await mailer.deliver({ mailId: id });
    expect(await repo.byId(id)).toMatchObject({ status: 'sent', error: null });
    expect(sent).toEqual(['admin@example.test']);
  });

  it('fail/bookkeeping after a send does not throw (no second send by a retried job)', async () => {
    const sent: string[] = [];
    const transport: MailTransport = { send: async (m) => void sent.push(m.to) };
    const logger = { warn: vi.fn() };
    const stored = { ...approval, id: 99, status: 'outbox' as const, error: null, createdAt: 0, sentAt: null };
    const broken = {
      insert: () => Promise.resolve(99),
      byId: () => Promise.resolve(stored),
      markSent: () => Promise.reject(new Error('db down')),
      markFailed: () => Promise.resolve(),
      withdraw: () => Promise.resolve(0),
    };
    const mailer = new Mailer({
      repo: broken,
      transact: (fn) => fn({ mail: broken }),
      jobs: new JobsRepo(db),
      transport,
      clock,
      logger,
    });
    await mailer.deliver({ mailId: 99 });
    expect(sent).toEqual(['admin@example.test']);
    expect(logger.warn).toHaveBeenCalledWith(expect.objectContaining({ mailId: 99 }), expect.any(String));
  });

  it('fail/a database error while recording is thrown, and nothing is queued or sent', async () => {
    const sent: string[] = [];
    const transport: MailTransport = { send: async (m) => void sent.push(m.to) };
    const jobsBefore = (await db.kysely.selectFrom('jobs').select('id').execute()).length;
    const mailer = new Mailer({
      repo,
      transact: (fn) => inTransaction(db, () => fn({ mail: { insert: () => Promise.reject(new Error('db down')) } })),
      jobs: new JobsRepo(db),
      transport,
      clock,
    });
    await expect(mailer.send(approval)).rejects.toThrow('db down');
    expect(sent).toEqual([]);
    expect((await db.kysely.selectFrom('jobs').select('id').execute()).length).toBe(jobsBefore);
  });

  /** The mails of order `orderId` with their delivery jobs, recorded with `sendIn` in transactions of `db`. */
  const sentIn = async (mailer: Mailer, orderId: number, fn?: (tx: Db) => Promise<void>) =>
    inTransaction(db, async (tx) => {
      await mailer.sendIn({ mail: new MailRepo(tx) }, { ...approval, orderId });
      await fn?.(tx);
    });

  it('ok/sendIn records the mail and queues its delivery in the transaction of its caller, as send does; delivery sends it', async () => {
    const mailer = mailerWith(await smtpTransport(smtp.url, from));
    await sentIn(mailer, 50);
    const [mail] = await repo.list({ limit: 5, orderId: 50 });
    expect(mail).toMatchObject({ status: 'outbox', to: approval.to, subject: approval.subject, text: approval.text });
    const id = mail!.id;
    // The job exactly as send queues it: the same payload text and key (what resend and the worker rely on).
    const sentJob = await mailer.send({ ...approval, orderId: 51 });
    const both = await db.kysely
      .selectFrom('jobs')
      .select(['name', 'payload', 'unique_key', 'status', 'run_at', 'attempts', 'lease_owner', 'created_at'])
      .where('unique_key', 'in', [`mail:${id}`, `mail:${sentJob}`])
      .orderBy('id')
      .execute();
    expect(both).toEqual(
      [id, sentJob].map((mailId) => ({
        name: 'mail.deliver',
        payload: JSON.stringify({ mailId }),
        unique_key: `mail:${mailId}`,
        status: 'queued',
        run_at: clock.nowSeconds(),
        attempts: 0,
        lease_owner: null,
        created_at: clock.nowSeconds(),
      })),
    );
    await mailer.deliver(JSON.parse(both[0]!.payload) as { mailId: number });
    await smtp.waitFor((m) => m.subject === approval.subject && m.envelope.to.includes(approval.to));
    expect(await repo.byId(id)).toMatchObject({ status: 'sent' });
    await expect(mailer.resend(id)).rejects.toMatchObject({ kind: 'conflict' });
  });

  it('ok/sendIn without SMTP: the mail stays in the outbox, and no delivery is queued', async () => {
    await sentIn(mailerWith(null), 52);
    const [mail] = await repo.list({ limit: 5, orderId: 52 });
    expect(mail).toMatchObject({ status: 'outbox' });
    expect(await deliveries(mail!.id)).toEqual([]);
  });

  it('fail/a transaction that fails after sendIn keeps neither the mail nor its delivery', async () => {
    const jobsBefore = (await db.kysely.selectFrom('jobs').select('id').execute()).length;
    const mailer = mailerWith({ send: async () => undefined });
    await expect(
      sentIn(mailer, 53, async () => {
        throw new Error('the state change failed');
      }),
    ).rejects.toThrow('the state change failed');
    // A statement of its transaction that fails after it (a key taken), as the database reports it.
    await expect(
      sentIn(mailer, 54, async (tx) => {
        for (let i = 0; i < 2; i++)
          await sql`INSERT INTO jobs (name, payload, unique_key, status, run_at, created_at, updated_at)
            VALUES ('test.taken', '{}', 'taken-54', 'queued', 0, 0, 0)`.execute(tx.kysely);
      }),
    ).rejects.toThrow();
    expect(await repo.list({ limit: 5, orderId: 53 })).toEqual([]);
    expect(await repo.list({ limit: 5, orderId: 54 })).toEqual([]);
    expect((await db.kysely.selectFrom('jobs').select('id').execute()).length).toBe(jobsBefore);
  });

  it('fail/a mail the database refuses (no address) fails the transaction it is part of: nothing of it is kept', async () => {
    const jobsBefore = (await db.kysely.selectFrom('jobs').select('id').execute()).length;
    const mailer = mailerWith({ send: async () => undefined });
    await expect(
      inTransaction(db, async (tx) => {
        await mailer.sendIn({ mail: new MailRepo(tx) }, { ...approval, orderId: 55 });
        await mailer.sendIn({ mail: new MailRepo(tx) }, { ...approval, to: null as unknown as string, orderId: 55 });
      }),
    ).rejects.toThrow(/null|NOT NULL/i);
    expect(await repo.list({ limit: 5, orderId: 55 })).toEqual([]);
    expect((await db.kysely.selectFrom('jobs').select('id').execute()).length).toBe(jobsBefore);
  });

  it('race/40 transactions at once, each recording two mails with sendIn: each job delivers its own mail', async () => {
    const mailer = mailerWith({ send: async () => undefined });
    await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        inTransaction(db, async (tx) => {
          await mailer.sendIn({ mail: new MailRepo(tx) }, { ...approval, orderId: 1_000 + i, subject: `first ${i}` });
          await mailer.sendIn({ mail: new MailRepo(tx) }, { ...approval, orderId: 1_000 + i, subject: `second ${i}` });
        }),
      ),
    );
    for (let i = 0; i < 40; i++) {
      const mails = await repo.list({ limit: 5, orderId: 1_000 + i });
      expect(mails.map((m) => m.subject).sort()).toEqual([`first ${i}`, `second ${i}`]);
      for (const m of mails)
        expect(await deliveries(m.id)).toEqual([
          { name: 'mail.deliver', payload: JSON.stringify({ mailId: m.id }), status: 'queued' },
        ]);
    }
  });

  it('fail/a delivery of a mail that does not exist does nothing', async () => {
    const sent: string[] = [];
    await mailerWith({ send: async (m) => void sent.push(m.to) }).deliver({ mailId: 987654 });
    expect(sent).toEqual([]);
  });

  it('ok/resend queues a mail whose delivery gave up, and one recorded while SMTP was off; a queued one is left as it is', async () => {
    let down = true;
    const sent: string[] = [];
    const transport: MailTransport = {
      send: (m) =>
        down ? Promise.reject(smtpAnswer('421 try again later', 421)) : Promise.resolve(void sent.push(m.to)),
    };
    const mailer = mailerWith(transport);
    const failed = await mailer.send({ ...approval, orderId: 34 });
    await expect(mailer.deliver({ mailId: failed })).rejects.toThrow();
    // Its job gave up: dead, the key released.
    await db.kysely
      .updateTable('jobs')
      .set({ status: 'dead', unique_key: null })
      .where('unique_key', '=', `mail:${failed}`)
      .execute();
    const offline = await mailerWith(null).send({ ...approval, orderId: 35 });

    expect(await mailer.resend(failed)).toBe('queued');
    expect(await mailer.resend(failed)).toBe('queued already');
    expect(await mailer.resend(offline)).toBe('queued');
    expect((await deliveries(failed)).map((j) => j.status)).toEqual(['queued']);
    expect((await deliveries(offline)).map((j) => j.status)).toEqual(['queued']);
    down = false;
    await mailer.deliver({ mailId: failed });
    await mailer.deliver({ mailId: offline });
    expect(sent).toEqual(['admin@example.test', 'admin@example.test']);
    expect((await repo.byId(failed))?.status).toBe('sent');
  });

  it('fail/resend refuses a mail sent already, an unknown mail, and any mail without SMTP; nothing is queued', async () => {
    const mailer = mailerWith({ send: async () => undefined });
    const id = await mailer.send({ ...approval, orderId: 36 });
    await mailer.deliver({ mailId: id });
    await db.kysely.deleteFrom('jobs').where('unique_key', '=', `mail:${id}`).execute();
    await expect(mailer.resend(id)).rejects.toMatchObject({
      kind: 'conflict',
      message: expect.stringMatching(/not sending it twice/),
    });
    await expect(mailer.resend(987654)).rejects.toMatchObject({ kind: 'notFound' });
    const pending = await mailerWith(null).send({ ...approval, orderId: 37 });
    await expect(mailerWith(null).resend(pending)).rejects.toMatchObject({ kind: 'notReady' });
    expect(await deliveries(id)).toEqual([]);
    expect(await deliveries(pending)).toEqual([]);
  });

  it('fail/an SMTP server that does not answer pauses this process’s deliveries (they fail at once, for a retry); a refused mail does not', async () => {
    const calls: string[] = [];
    let fault: Error | undefined = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNECTION' });
    const transport: MailTransport = {
      send: (m) => (calls.push(m.to), fault === undefined ? Promise.resolve() : Promise.reject(fault)),
    };
    const mailer = mailerWith(transport);
    const [a, b] = [await mailer.send({ ...approval, orderId: 38 }), await mailer.send({ ...approval, orderId: 39 })];
    await expect(mailer.deliver({ mailId: a })).rejects.toThrow(`mail ${a} not sent`);
    expect(calls).toHaveLength(1);
    // The second mail does not wait on the dead server: it fails at once, still unsent.
    await expect(mailer.deliver({ mailId: b })).rejects.toThrow(/did not answer a moment ago/);
    expect(calls).toHaveLength(1);
    expect((await repo.byId(b))?.status).toBe('outbox');

    clock.advance(31);
    fault = Object.assign(new Error('550 mailbox unavailable'), { code: 'EENVELOPE', responseCode: 550 });
    await expect(mailer.deliver({ mailId: b })).rejects.toThrow(`mail ${b} not sent`);
    expect(calls).toHaveLength(2);
    // A refusal of one mail is an answer: the next delivery talks to the server.
    fault = undefined;
    await mailer.deliver({ mailId: a });
    expect(calls).toHaveLength(3);
    expect((await repo.byId(a))?.status).toBe('sent');
  });

  it('fail/a worker without SMTP throws (the job is retried, not finished) and leaves the mail as it is', async () => {
    const id = await mailerWith({ send: async () => undefined }).send({ ...approval, orderId: 40 });
    await expect(mailerWith(null).deliver({ mailId: id })).rejects.toThrow(/no SMTP server/);
    expect(await repo.byId(id)).toMatchObject({ status: 'outbox', error: null });
  });

  it('ok/a failure recorded after another delivery sent the mail leaves it sent', async () => {
    const id = await mailerWith({ send: async () => undefined }).send({ ...approval, orderId: 41 });
    await repo.markSent(id, clock.nowSeconds());
    await repo.markFailed(id, 'late failure of a delivery that lost its lease');
    expect(await repo.byId(id)).toMatchObject({ status: 'sent', error: null });
  });

  it('ok/withdrawing an order’s unsent mails of a kind: their deliveries send nothing, resend refuses them, sent and other mails stay', async () => {
    const sent: string[] = [];
    const mailer = mailerWith({ send: async (m) => void sent.push(m.subject) });
    const old = await mailer.send({ ...approval, orderId: 43, subject: 'old link' });
    const delivered = await mailer.send({ ...approval, orderId: 43, subject: 'delivered link' });
    await mailer.deliver({ mailId: delivered });
    const notice = await mailer.send({ ...approval, orderId: 43, kind: 'order.issued', subject: 'notice' });
    const otherOrder = await mailer.send({ ...approval, orderId: 44, subject: 'other order' });

    expect(await repo.withdraw(43, 'dcv.approval')).toBe(1);
    expect((await repo.byId(old))?.status).toBe('withdrawn');
    expect((await repo.byId(delivered))?.status).toBe('sent');
    expect((await repo.byId(notice))?.status).toBe('outbox');
    expect((await repo.byId(otherOrder))?.status).toBe('outbox');
    await mailer.deliver({ mailId: old });
    expect(sent).toEqual(['delivered link']);
    await expect(mailer.resend(old)).rejects.toMatchObject({
      kind: 'conflict',
      message: expect.stringMatching(/withdrawn/),
    });
    expect(await repo.withdraw(43, 'dcv.approval')).toBe(0);
  });

  it('fail/a delivery in flight that fails after its mail was withdrawn leaves it withdrawn (its retry sends nothing)', async () => {
    let release!: () => void;
    const talking = new Promise<void>((resolve) => (release = resolve));
    const sent: string[] = [];
    let attempt = 0;
    const mailer = mailerWith({
      send: async (m) => {
        if (++attempt > 1) return void sent.push(m.to);
        await talking;
        throw smtpAnswer('451 try again', 451);
      },
    });
    const id = await mailer.send({ ...approval, orderId: 45 });
    const first = mailer.deliver({ mailId: id });
    expect(await repo.withdraw(45, 'dcv.approval')).toBe(1);
    release();
    await expect(first).rejects.toThrow(`mail ${id} not sent`);
    expect((await repo.byId(id))?.status).toBe('withdrawn');
    await mailer.deliver({ mailId: id });
    expect(sent).toEqual([]);
  });

  it('fail/refuses a URL that is not smtp:// or smtps://', async () => {
    await expect(smtpTransport('http://127.0.0.1:25', from)).rejects.toThrow(/scheme/);
    await expect(smtpTransport('not a url', from)).rejects.toThrow(/SMTP URL/);
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
      mailer: { resend: async () => Promise.reject(new Error('not here')) },
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

describe('mail resend', () => {
  afterEach(() => vi.restoreAllMocks());

  const run = async (args: string[], resend: (id: number) => Promise<'queued' | 'queued already'>) => {
    const out: string[] = [];
    vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      out.push(String(chunk));
      return true;
    });
    const asked: number[] = [];
    let opened = 0;
    let closed = 0;
    const program = new Command('certdesk').exitOverride();
    addMailCommands(program, async () => {
      opened++;
      return {
        mail: { list: async () => [] },
        mailer: { resend: (id) => (asked.push(id), resend(id)) },
        close: async () => void closed++,
      };
    });
    try {
      await program.parseAsync(['node', 'certdesk', 'mail', 'resend', ...args]);
    } finally {
      vi.restoreAllMocks();
    }
    return { asked, opened, closed, printed: out.join('') };
  };

  it('ok/queues the mail and says so (text and --json)', async () => {
    const text = await run(['7'], async () => 'queued');
    expect(text).toMatchObject({ asked: [7], opened: 1, closed: 1, printed: 'mail 7: queued; the worker sends it\n' });
    const json = await run(['7', '--json'], async () => 'queued already');
    expect(JSON.parse(json.printed)).toEqual({ ID: 7, Result: 'queued already' });
  });

  it('fail/a refusal is thrown, and what was opened is closed', async () => {
    let closed = 0;
    const program = new Command('certdesk').exitOverride();
    addMailCommands(program, async () => ({
      mail: { list: async () => [] },
      mailer: {
        resend: () => Promise.reject(new Error('Mail 8 was sent at 2026-01-01T00:00:00Z: not sending it twice.')),
      },
      close: async () => void closed++,
    }));
    await expect(program.parseAsync(['node', 'certdesk', 'mail', 'resend', '8'])).rejects.toThrow(
      /not sending it twice/,
    );
    expect(closed).toBe(1);
  });

  it('fail/refuses a bad id before opening anything', async () => {
    for (const bad of ['x', '0', '-3', '1.5']) {
      let opened = 0;
      const program = new Command('certdesk').exitOverride();
      program.configureOutput({ writeErr: () => undefined });
      addMailCommands(program, async () => {
        opened++;
        return {
          mail: { list: async () => [] },
          mailer: { resend: async () => 'queued' as const },
          close: async () => {},
        };
      });
      await expect(program.parseAsync(['node', 'certdesk', 'mail', 'resend', bad])).rejects.toThrow();
      expect(opened).toBe(0);
    }
  });
});
