// One issuance, one signature: orders placed 16 at a time with the DNS proof already in place
// issue inline in POST /Order, while two workers run the same orders' queued `order.validate`
// jobs. Every order must end with exactly one live certificate, the reconciliation must find no
// certificate its order cannot reach, and the credit used must equal the live charges.
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Worker, type Handlers } from '../src/jobs/index.js';
import { createTestContext, type TestContext, type TestCustomer } from './support/app.js';
import { testDialects } from './support/databases.js';
import { testCsr } from './support/csr.js';
import { startDnsServer, type TestDnsServer } from './support/dns-server.js';
import { accountingOf } from './support/accounting.js';

const contact = { FirstName: 'Ada', LastName: 'Lovelace', Phone: '+49 30 1234567', Email: 'ada@certdesk-test.com' };
const ORDERS = 200;
const AT_ONCE = 16;

describe.each(testDialects())('issuance under concurrent load on $dialect', (dialect) => {
  let t: TestContext;
  let c: TestCustomer;
  let dns: TestDnsServer;
  const workers: Worker[] = [];

  beforeAll(async () => {
    dns = await startDnsServer();
    t = await createTestContext(dialect, { CERTDESK_DNS_SERVERS: dns.address, CERTDESK_RATE_LIMIT: '1000000' });
    await t.services.ca.init({ rsaRootBits: 2048, rsaIntermediateBits: 2048 });
    c = await t.customer({ name: 'Load', creditLimit: 10_000_000 });
    // The proof is in place before the orders come: each one validates and issues inline.
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
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop(5000)));
    await t.close();
    await dns.close();
  });

  it(`${ORDERS} orders, ${AT_ONCE} at a time, two workers running: one live certificate each, nothing unaccounted for`, async () => {
    // Two workers (two lease holders, as two processes would be) poll the queue while orders come in.
    for (let i = 0; i < 2; i++) {
      // They poll every few milliseconds, so a job meets its order's inline issuance as often as it can.
      const s = t.services;
      const handlers = {
        'order.validate': (payload, ctx) => s.orderFlow.validate(payload, ctx),
        'housekeeping.purge': async () => undefined,
        'ca.refresh-crls': async () => undefined,
        'order.renew-subscriptions': async () => undefined,
        'notify.reminders': async () => undefined,
        'order.revoke-certificates': async () => undefined,
        'scan.vulnerability': async () => undefined,
        'scan.configuration': async () => undefined,
        'mail.deliver': async () => undefined,
      } satisfies Handlers;
      const w = new Worker({
        repo: s.jobs,
        handlers,
        clock: s.clock,
        logger: pino({ level: 'silent' }),
        pollIntervalMs: 2,
        concurrency: 8,
      });
      workers.push(w);
      w.start();
    }
    const ids: number[] = [];
    let next = 0;
    const place = async () => {
      while (next < ORDERS) {
        next++;
        const res = await t.call(c.token, {
          method: 'POST',
          url: '/rest/v1/Order',
          payload: {
            OrderParameters: {
              ProductCode: 'TrustPoint.DV',
              ValidityPeriod: 12,
              CSR: testCsr().pem,
              DVAuthMethod: 'DNS',
            },
            AdminContact: contact,
            TechContact: contact,
          },
        });
        expect(res.statusCode, res.body).toBe(200);
        ids.push(res.json().ServiceOrderID as number);
      }
    };
    await Promise.all(Array.from({ length: AT_ONCE }, place));
    expect(ids).toHaveLength(ORDERS);

    // Whatever the requests left (an order whose issuance another actor held) the workers finish.
    await vi.waitFor(
      async () => {
        const open = await t.db.kysely
          .selectFrom('orders')
          .select('id')
          .where('id', 'in', ids)
          .where('major_status', '!=', 'COMPLETE')
          .execute();
        expect(open).toEqual([]);
      },
      { timeout: 60_000, interval: 200 },
    );

    const books = await accountingOf(t.db, c.customerId);
    expect(books.liveCertificatesPerOrder.filter((n) => n !== 1)).toEqual([]);
    expect(books.liveCertificatesPerOrder).toHaveLength(ORDERS);
    expect(books.orphans).toEqual([]);
    expect(books.used).toBe(books.liveCharges);
  }, 300_000);
});
