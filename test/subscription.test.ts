import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { customerId, orderId } from '../src/core/index.js';
import { createWorker } from '../src/main.js';
import { OrderQueriesRepo } from '../src/storage/index.js';
import type { Worker } from '../src/jobs/index.js';
import { createTestContext, type TestContext, type TestCustomer } from './support/app.js';
import { testDialects } from './support/databases.js';
import { testCsr } from './support/csr.js';
import { signForOrder } from './support/stray-certificates.js';
import { startDnsServer, type TestDnsServer } from './support/dns-server.js';
import { allowMail, refuseMail } from './support/refusals.js';

const contact = { FirstName: 'Ada', LastName: 'Lovelace', Phone: '+49 30 1234567', Email: 'ada@certdesk-test.com' };
const DAY = 86_400;

describe.each(testDialects())('a two-year subscription on $dialect', (dialect) => {
  let t: TestContext;
  let c: TestCustomer;
  let dns: TestDnsServer;
  let worker: Worker;

  beforeAll(async () => {
    dns = await startDnsServer();
    t = await createTestContext(dialect, {
      CERTDESK_DNS_SERVERS: dns.address,
      CERTDESK_RATE_LIMIT: '1000000',
      CERTDESK_RATE_LIMIT_ANONYMOUS: '1000000',
    });
    await t.services.ca.init({ rsaRootBits: 2048, rsaIntermediateBits: 2048 });
    c = await t.customer({ name: 'Subscriber', creditLimit: 100000 });
    worker = createWorker(t.services, pino({ level: 'silent' }));
  }, 120_000);
  afterAll(async () => {
    await t.close();
    await dns.close();
  });

  /** Publishes the TXT value the customer is shown now (values are renewed after 30 days). */
  const publish = async () => {
    const value = (
      await t.call(await t.token(c), {
        method: 'POST',
        url: '/rest/v1/DNSData',
        payload: { CSR: testCsr().pem, ProductCode: 'TrustPoint.DV' },
      })
    ).json().DNSAuthDetails.DNSValue as string;
    dns.set('certdesk-test.com', [{ type: 'TXT', data: value }]);
  };
  const row = async (id: number) =>
    t.db.kysely.selectFrom('orders').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
  /** A 24-month subscription, issued at once (the DNS proof is published). */
  const placeSubscription = async () => {
    const res = await t.call(await t.token(c), {
      method: 'POST',
      url: '/rest/v1/Order',
      payload: {
        OrderParameters: { ProductCode: 'TrustPoint.DV', ValidityPeriod: 24, CSR: testCsr().pem, DVAuthMethod: 'DNS' },
        AdminContact: contact,
        TechContact: contact,
      },
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json().ServiceOrderID as number;
  };
  const actionMailsOf = async (id: number) =>
    (await t.services.mailRepo.list({ limit: 50, orderId: id })).filter((m) => m.kind === 'subscription.action-needed')
      .length;

  it('ok/walked with a fake clock: free automatic reissues under the lifetime schedule until the term ends, then EXPIRED; one charge', async () => {
    await publish();
    const start = t.clock.nowSeconds();
    const res = await t.call(await t.token(c), {
      method: 'POST',
      url: '/rest/v1/Order',
      payload: {
        OrderParameters: { ProductCode: 'TrustPoint.DV', ValidityPeriod: 24, CSR: testCsr().pem, DVAuthMethod: 'DNS' },
        AdminContact: contact,
        TechContact: contact,
      },
    });
    const id = res.json().ServiceOrderID as number;
    let o = await row(id);
    expect(o.major_status).toBe('COMPLETE');
    expect(o.term_end).toBe(Date.parse('2028-11-21T00:00:00Z') / 1000);
    expect(o.cert_not_after! - start + 1).toBe(200 * DAY);

    const lifetimes: number[] = [];
    let actionMails = 0;
    for (let round = 0; round < 20 && o.term_end! > o.cert_not_after!; round++) {
      t.clock.set(o.cert_not_after! - 29 * DAY);
      expect(await t.services.reissues.renewDue()).toEqual([id]);
      o = await row(id);
      if (o.major_status === 'REISSUE') {
        // The names were validated longer ago than the reuse period allows: the customer is told, and shows them again.
        expect(o.minor_status).toBe('WF_DNS_AUTH');
        actionMails++;
        await publish();
        for (let i = 0; i < 5 && (await worker.runOnce()) > 0; i++);
        o = await row(id);
      }
      expect(o.major_status).toBe('COMPLETE');
      const cert = await t.db.kysely
        .selectFrom('certificates')
        .select(['not_before', 'not_after'])
        .where('order_id', '=', id)
        .orderBy('id', 'desc')
        .executeTakeFirstOrThrow();
      lifetimes.push(Math.round((cert.not_after - cert.not_before + 1) / DAY));
    }
    // 2027-05: 100-day certificates (the schedule from 2027-03-15); the last one ends with the term.
    expect(lifetimes[0]).toBe(100);
    expect(o.cert_not_after).toBe(o.term_end);
    expect(lifetimes.length).toBeGreaterThanOrEqual(6);
    // A validation counts for the reuse period from when it was shown, not from the last issuance:
    // with 100-day certificates renewed every ~71 days, every other renewal needs the proof again.
    expect(actionMails).toBeGreaterThanOrEqual(2);
    expect(actionMails).toBeLessThan(lifetimes.length);
    const mails = await t.services.mailRepo.list({ limit: 50, orderId: id });
    expect(mails.filter((m) => m.kind === 'subscription.action-needed')).toHaveLength(actionMails);
    expect(mails.every((m) => m.to === 'ada@certdesk-test.com')).toBe(true);

    // Nothing more to renew; after the last EndDate the order shows COMPLETE/EXPIRED.
    expect(await t.services.reissues.renewDue()).toEqual([]);
    t.clock.set(o.term_end! + DAY);
    const info = (await t.call(await t.token(c), { method: 'GET', url: `/rest/v1/Order/${id}` })).json().OrderInfo;
    expect(info.OrderStatus).toMatchObject({ MajorStatus: 'COMPLETE', MinorStatus: 'EXPIRED', Progress: 100 });
    const ledger = await t.db.kysely.selectFrom('ledger').select('kind').where('order_id', '=', id).execute();
    expect(ledger).toEqual([{ kind: 'charge' }]);
    t.clock.set(start);
  }, 120_000);

  it("fail/a renewal's action-needed mail refused: the renewal does not start; the next run starts it with its mail", async () => {
    await publish();
    const start = t.clock.nowSeconds();
    const id = await placeSubscription();
    let o = await row(id);
    let refused = false;
    try {
      // Renew until a renewal needs the proof again (the names' validation older than the reuse period).
      for (let round = 0; round < 20 && !refused && o.term_end! > o.cert_not_after!; round++) {
        t.clock.set(o.cert_not_after! - 29 * DAY);
        await refuseMail(t.db, 'subscription.action-needed');
        const renewed = await t.services.reissues.renewDue().catch((e: unknown) => e);
        await allowMail(t.db);
        o = await row(id);
        if (!(renewed instanceof Error)) {
          // Renewed from names still within the reuse period: issued at once, no mail needed.
          expect(renewed).toEqual([id]);
          expect(o.major_status).toBe('COMPLETE');
          continue;
        }
        expect(renewed.message).toMatch(/outbox refused/);
        expect(o).toMatchObject({ major_status: 'COMPLETE', minor_status: 'COMPLETED' });
        expect(await actionMailsOf(id)).toBe(0);
        expect(await t.services.reissues.renewDue()).toEqual([id]);
        expect(await row(id)).toMatchObject({ major_status: 'REISSUE', minor_status: 'WF_DNS_AUTH' });
        expect(await actionMailsOf(id)).toBe(1);
        refused = true;
      }
      expect(refused).toBe(true);
    } finally {
      await allowMail(t.db);
      t.clock.set(start);
    }
  }, 120_000);
  it("fail/one renewal's mail refused does not hold back the others: they renew in the same run, which then fails and is retried", async () => {
    await publish();
    const start = t.clock.nowSeconds();
    // `refused` first: the renewal job meets it before `other`.
    const refused = await placeSubscription();
    const other = await placeSubscription();
    let o = await row(refused);
    let failedOnce = false;
    try {
      for (let round = 0; round < 20 && !failedOnce && o.term_end! > o.cert_not_after!; round++) {
        t.clock.set(Math.max(o.cert_not_after!, (await row(other)).cert_not_after!) - 29 * DAY);
        await refuseMail(t.db, 'subscription.action-needed', refused);
        const renewed = await t.services.reissues.renewDue().catch((e: unknown) => e);
        await allowMail(t.db);
        o = await row(refused);
        if (!(renewed instanceof Error)) {
          expect(renewed).toEqual(expect.arrayContaining([refused, other]));
          continue;
        }
        // The refused one did not start; the other did, with its mail, in the same run.
        expect(renewed.message).toMatch(/outbox refused/);
        expect(o).toMatchObject({ major_status: 'COMPLETE', minor_status: 'COMPLETED' });
        expect(await actionMailsOf(refused)).toBe(0);
        expect(await row(other)).toMatchObject({ major_status: 'REISSUE', minor_status: 'WF_DNS_AUTH' });
        expect(await actionMailsOf(other)).toBe(1);
        // The retry renews the refused one.
        expect(await t.services.reissues.renewDue()).toContain(refused);
        expect(await row(refused)).toMatchObject({ major_status: 'REISSUE', minor_status: 'WF_DNS_AUTH' });
        expect(await actionMailsOf(refused)).toBe(1);
        failedOnce = true;
      }
      expect(failedOnce).toBe(true);
    } finally {
      await allowMail(t.db);
      t.clock.set(start);
    }
  }, 120_000);

  it('ok/a newer certificate signed for the order and never delivered does not put its renewal off: due by the delivered one', async () => {
    await publish();
    const start = t.clock.nowSeconds();
    const id = await placeSubscription();
    const o = await row(id);
    const due = async () =>
      (await new OrderQueriesRepo(t.db).subscriptionsDue(t.clock.nowSeconds(), 30 * DAY)).map((x) => Number(x.id));
    // Signed a month later (a round that lost its claim, say): it would end a month after the delivered one.
    t.clock.set(start + 30 * DAY);
    const undelivered = await signForOrder(t.services, { id: orderId(id), customerId: customerId(c.customerId) });
    try {
      expect(undelivered.notAfter).toBeGreaterThan(o.cert_not_after! + 20 * DAY);
      t.clock.set(o.cert_not_after! - 29 * DAY);
      expect(await due()).toContain(id);
    } finally {
      await t.services.ca.revoke(undelivered.serial, 'superseded', { actor: 'test' });
      t.clock.set(start);
    }
  });
});
