// POST /Order when a step after the order's commit fails (the CA not ready, the database gone
// while signing): the order is stored and its job queued, so the client is answered with the
// order as it is, not a 5xx it would retry into a second order; the job then issues it, once.
import { createServer, type Server, type Socket } from 'node:net';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { CertdeskError } from '../src/core/index.js';
import { createWorker } from '../src/main.js';
import { HELD_RECHECK_SECONDS } from '../src/ra/issuance/order-flow.js';
import { OrdersRepo } from '../src/storage/index.js';
import { accountingOf } from './support/accounting.js';
import { createTestContext, type TestContext, type TestCustomer } from './support/app.js';
import { testCsr } from './support/csr.js';
import { testDialects } from './support/databases.js';
import { startDnsServer, type TestDnsServer } from './support/dns-server.js';

const contact = { FirstName: 'Ada', LastName: 'Lovelace', Phone: '+49 30 1234567', Email: 'ada@certdesk-test.com' };

describe.each(testDialects())('a failure after POST /Order committed, on $dialect', (dialect) => {
  let t: TestContext;
  let c: TestCustomer;
  let dns: TestDnsServer;
  const warnings: object[] = [];

  beforeAll(async () => {
    dns = await startDnsServer();
    // What the order path reports of a failure it answered past, as the service logs it.
    const logger = pino({ level: 'warn' }, { write: (line: string) => warnings.push(JSON.parse(line) as object) });
    t = await createTestContext(
      dialect,
      { CERTDESK_DNS_SERVERS: dns.address, CERTDESK_RATE_LIMIT: '1000000' },
      { logger },
    );
    c = await t.customer({ creditLimit: 100_000 });
    const data = await t.call(c.token, {
      method: 'POST',
      url: '/rest/v1/DNSData',
      payload: { ProductCode: 'TrustPoint.DV', CSR: testCsr().pem },
    });
    expect(data.statusCode, data.body).toBe(200);
    dns.set('certdesk-test.com', [
      { type: 'A', address: '127.0.0.1' },
      { type: 'TXT', data: data.json().DNSAuthDetails.DNSValue },
    ]);
  }, 120_000);
  afterEach(() => {
    vi.restoreAllMocks();
    warnings.length = 0;
  });
  afterAll(async () => {
    await t.close();
    await dns.close();
  });

  const place = () =>
    t.call(c.token, {
      method: 'POST',
      url: '/rest/v1/Order',
      payload: {
        OrderParameters: { ProductCode: 'TrustPoint.DV', ValidityPeriod: 12, CSR: testCsr().pem, DVAuthMethod: 'DNS' },
        AdminContact: contact,
        TechContact: contact,
      },
    });

  it.each([
    ['the CA is not ready', () => new CertdeskError('notReady', 'The CA keys are not loaded.')],
    [
      'the connection is lost while signing',
      () => Object.assign(new Error('Connection terminated'), { code: 'ECONNRESET' }),
    ],
  ])(
    'fail/%s: 200 with the stored order, charged once; its job issues it after the request’s time',
    async (_, error) => {
      const before = await accountingOf(t.db, c.customerId);
      vi.spyOn(t.services.ca, 'issue').mockRejectedValueOnce(error());

      const res = await place();
      expect(res.statusCode, res.body).toBe(200);
      const body = res.json();
      expect(body.success).toBe(true);
      const id = body.ServiceOrderID as number;
      expect(id).toBeGreaterThan(0);
      expect(body.Fulfillment?.Certificate).toBeUndefined();
      expect(warnings).toEqual([expect.objectContaining({ orderId: id })]);

      const stored = await t.db.kysely
        .selectFrom('orders')
        .select(['major_status', 'minor_status', 'issuance_claim'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
      // Waiting for issuance, and nobody holding the round: the claim was given back.
      expect(stored).toEqual({ major_status: 'PENDING', minor_status: 'WF_ISSUANCE', issuance_claim: null });

      // The job looks once the request has had its time, and issues: one certificate, one charge.
      const worker = createWorker(t.services, pino({ level: 'silent' }));
      expect(await worker.runOnce()).toBe(0);
      t.clock.advance(HELD_RECHECK_SECONDS + 1);
      while ((await worker.runOnce()) > 0);
      const info = (
        await t.call(c.token, { method: 'GET', url: `/rest/v1/Order/${id}?includeFulfillment=true` })
      ).json().OrderInfo;
      expect(info.OrderStatus).toMatchObject({ MajorStatus: 'COMPLETE', MinorStatus: 'COMPLETED' });
      expect(info.Fulfillment.Certificate).toMatch(/^-----BEGIN CERTIFICATE-----/);

      const after = await accountingOf(t.db, c.customerId);
      expect(after.liveCertificatesPerOrder.filter((n) => n !== 1)).toEqual([]);
      expect(after.liveCertificatesPerOrder).toHaveLength(before.liveCertificatesPerOrder.length + 1);
      expect(after.orphans).toEqual([]);
      expect(after.used - before.used).toBe(after.liveCharges - before.liveCharges);
      expect(after.liveCharges - before.liveCharges).toBeGreaterThan(0);
    },
  );

  it('fail/POST /Reissue when signing fails after its commit: 200, the reissue started; its job issues the new certificate', async () => {
    const placed = await place();
    expect(placed.statusCode, placed.body).toBe(200);
    const id = placed.json().ServiceOrderID as number;
    const first = placed.json().Fulfillment?.Certificate as string;
    expect(first).toMatch(/^-----BEGIN CERTIFICATE-----/);
    vi.spyOn(t.services.ca, 'issue').mockRejectedValueOnce(
      new CertdeskError('notReady', 'The CA keys are not loaded.'),
    );

    const res = await t.call(c.token, { method: 'POST', url: '/rest/v1/Reissue', payload: { ServiceOrderID: id } });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().success).toBe(true);
    expect(warnings).toEqual([expect.objectContaining({ orderId: id })]);
    const read = async () =>
      (await t.call(c.token, { method: 'GET', url: `/rest/v1/Order/${id}?includeFulfillment=true` })).json().OrderInfo;
    expect((await read()).OrderStatus).toMatchObject({ MajorStatus: 'REISSUE', MinorStatus: 'WF_ISSUANCE' });

    const worker = createWorker(t.services, pino({ level: 'silent' }));
    while ((await worker.runOnce()) > 0);
    const info = await read();
    expect(info.OrderStatus).toMatchObject({ MajorStatus: 'COMPLETE', MinorStatus: 'COMPLETED' });
    expect(info.Fulfillment.Certificate).toMatch(/^-----BEGIN CERTIFICATE-----/);
    expect(info.Fulfillment.Certificate).not.toBe(first);
    const after = await accountingOf(t.db, c.customerId);
    expect(after.orphans).toEqual([]);
  });

  it('ok/the same order without a failure is answered issued, and nothing is reported', async () => {
    const res = await place();
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().Fulfillment?.Certificate).toMatch(/^-----BEGIN CERTIFICATE-----/);
    expect(warnings).toEqual([]);
  });

  it('fail/the database gone for the answer too: 200 with the order as it was stored', async () => {
    vi.spyOn(t.services.ca, 'issue').mockRejectedValueOnce(
      new CertdeskError('notReady', 'The CA keys are not loaded.'),
    );
    vi.spyOn(OrdersRepo.prototype, 'get').mockRejectedValueOnce(new Error('Connection terminated'));
    const res = await place();
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().ServiceOrderID).toBeGreaterThan(0);
    expect(res.json().Fulfillment?.Certificate).toBeUndefined();
    expect(OrdersRepo.prototype.get).toHaveBeenCalled();
    expect(warnings).toEqual([expect.objectContaining({ orderId: res.json().ServiceOrderID })]);
  });

  it('fail/a failure inside the order’s transaction (the credit) still refuses the order, stores nothing, and reports nothing', async () => {
    const poor = await t.customer({ name: 'Poor', creditLimit: 0 });
    const count = async () =>
      Number(
        (
          await t.db.kysely
            .selectFrom('orders')
            .select((eb) => eb.fn.countAll().as('n'))
            .where('customer_id', '=', poor.customerId)
            .executeTakeFirstOrThrow()
        ).n,
      );
    const res = await t.call(poor.token, {
      method: 'POST',
      url: '/rest/v1/Order',
      payload: {
        OrderParameters: { ProductCode: 'TrustPoint.DV', ValidityPeriod: 12, CSR: testCsr().pem, DVAuthMethod: 'DNS' },
        AdminContact: contact,
        TechContact: contact,
      },
    });
    expect(res.statusCode, res.body).toBeGreaterThanOrEqual(400);
    expect(res.statusCode).toBeLessThan(500);
    expect(res.json()).toMatchObject({ success: false, ServiceOrderID: 0 });
    expect(await count()).toBe(0);
    expect(warnings).toEqual([]);
  });
});

describe.each(testDialects())('POST /Order with an SMTP server that never answers, on $dialect', (dialect) => {
  let t: TestContext;
  let c: TestCustomer;
  let dns: TestDnsServer;
  let smtp: Server;
  const connections: Socket[] = [];

  beforeAll(async () => {
    dns = await startDnsServer();
    // Accepts connections and never greets: an SMTP client waits on it until its timeout.
    smtp = createServer((socket) => void connections.push(socket));
    await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve));
    t = await createTestContext(dialect, {
      CERTDESK_DNS_SERVERS: dns.address,
      CERTDESK_RATE_LIMIT: '1000000',
      CERTDESK_SMTP_URL: `smtp://127.0.0.1:${(smtp.address() as { port: number }).port}`,
    });
    c = await t.customer({ creditLimit: 100_000 });
    const data = await t.call(c.token, {
      method: 'POST',
      url: '/rest/v1/DNSData',
      payload: { ProductCode: 'TrustPoint.DV', CSR: testCsr().pem },
    });
    dns.set('certdesk-test.com', [{ type: 'TXT', data: data.json().DNSAuthDetails.DNSValue }]);
  }, 120_000);
  afterAll(async () => {
    for (const s of connections) s.destroy();
    await new Promise<void>((resolve) => smtp.close(() => resolve()));
    await t.close();
    await dns.close();
  });

  it('ok/the order is issued and answered without touching SMTP; its notices wait in the outbox with their delivery queued', async () => {
    const res = await t.call(c.token, {
      method: 'POST',
      url: '/rest/v1/Order',
      payload: {
        OrderParameters: { ProductCode: 'TrustPoint.DV', ValidityPeriod: 12, CSR: testCsr().pem, DVAuthMethod: 'DNS' },
        AdminContact: contact,
        TechContact: { ...contact, Email: 'tech@certdesk-test.com' },
      },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().Fulfillment?.Certificate).toMatch(/^-----BEGIN CERTIFICATE-----/);
    expect(connections).toHaveLength(0);

    const id = res.json().ServiceOrderID as number;
    const mails = await t.services.mailRepo.list({ limit: 10, orderId: id });
    expect(mails.map((m) => [m.kind, m.status, m.to]).sort()).toEqual([
      ['order.issued', 'outbox', 'ada@certdesk-test.com'],
      ['order.issued', 'outbox', 'tech@certdesk-test.com'],
    ]);
    const jobs = await t.db.kysely
      .selectFrom('jobs')
      .select(['unique_key', 'status'])
      .where('name', '=', 'mail.deliver')
      .where(
        'unique_key',
        'in',
        mails.map((m) => `mail:${m.id}`),
      )
      .execute();
    expect(jobs).toHaveLength(2);
    expect(jobs.every((j) => j.status === 'queued')).toBe(true);
  });
});
