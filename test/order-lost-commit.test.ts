// POST /Order when the answer to its transaction's COMMIT is lost (the connection to PostgreSQL
// drops after the server committed): the order was kept, so the client is answered with it, and
// it is neither stored nor charged a second time. Orders placed together share a transaction
// (TransactionBatch); before, such a loss ran each of them again alone: every order twice, and
// charged twice. A real TCP relay on loopback stands between the service and PostgreSQL and
// loses the answer to the COMMIT of a transaction that carried the orders picked.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { accountingOf } from './support/accounting.js';
import { createTestContext, type TestContext, type TestCustomer } from './support/app.js';
import { testCsr } from './support/csr.js';
import { openPostgres } from './support/databases.js';
import { startDnsServer, type TestDnsServer } from './support/dns-server.js';
import { startCommitLossRelay, type CommitLossRelay } from './support/commit-loss.js';

const url = process.env.CERTDESK_TEST_DATABASE_URL;
if (url === undefined || url === '')
  console.warn('lost COMMIT order tests not run: they are PostgreSQL only and CERTDESK_TEST_DATABASE_URL is not set');

const contact = (email: string) => ({ FirstName: 'Ada', LastName: 'Lovelace', Phone: '+49 30 1234567', Email: email });

describe.skipIf(url === undefined || url === '')('POST /Order whose COMMIT answer is lost (PostgreSQL)', () => {
  let relay: CommitLossRelay;
  let t: TestContext;
  let c: TestCustomer;
  let dns: TestDnsServer;
  /**
   * The next COMMIT of a transaction that sent at least `orders` of the addresses matching
   * `marker` (the orders' contact addresses, sent as statement parameters) is lost after the
   * server answered it.
   */
  const loseCommitOf = (marker: RegExp, orders: number, thenUnreachable = false) =>
    relay.lose({
      how: 'answerLost',
      when: (sent) => new Set([...sent.matchAll(marker)].map((m) => m[0])).size >= orders,
      thenUnreachable,
    });

  beforeAll(async () => {
    relay = await startCommitLossRelay(new URL(url!));
    dns = await startDnsServer();
    t = await createTestContext(
      { dialect: 'postgres', open: () => openPostgres(url!, relay.host) },
      { CERTDESK_DNS_SERVERS: dns.address },
    );
    c = await t.customer({ creditLimit: 1_000_000 });
  }, 120_000);
  afterEach(() => {
    // A loss that did not happen (or a test that failed before its end) leaves nothing armed behind.
    relay.lose(undefined);
    relay.refuseNew = false;
  });
  afterAll(async () => {
    await t?.close();
    await relay?.close();
    await dns?.close();
  });

  const place = (email: string) =>
    t.call(c.token, {
      method: 'POST',
      url: '/rest/v1/Order',
      payload: {
        OrderParameters: { ProductCode: 'TrustPoint.DV', ValidityPeriod: 12, CSR: testCsr().pem, DVAuthMethod: 'DNS' },
        AdminContact: contact(email),
        TechContact: contact(email),
      },
    });
  const ordersOf = async (email: string) =>
    (
      await t.db.kysely
        .selectFrom('orders')
        .select(['id', 'contacts_json'])
        .where('customer_id', '=', c.customerId)
        .execute()
    )
      .filter((o) => o.contacts_json.includes(email))
      .map((o) => o.id);

  it('ok/one order: the client is answered with the order, stored and charged once', async () => {
    const price = await priceOfOne();
    const before = await accountingOf(t.db, c.customerId);
    loseCommitOf(/lost-alone@certdesk-test\.com/g, 1);
    const res = await place('lost-alone@certdesk-test.com');
    expect(relay.lost).toBe(1);
    expect(res.statusCode, res.body).toBe(200);
    const orders = await ordersOf('lost-alone@certdesk-test.com');
    expect(orders).toEqual([res.json().ServiceOrderID]);
    const after = await accountingOf(t.db, c.customerId);
    expect(after.used - before.used).toBe(price);
    expect(after.liveCharges - before.liveCharges).toBe(price);
  });

  it('ok/orders placed together: each client gets its own order, each stored and charged once', async () => {
    const price = await priceOfOne();
    const before = await accountingOf(t.db, c.customerId);
    // Two transactions start at once and the rest wait for the next: the loss hits a shared one.
    loseCommitOf(/lost-batch-\d+@certdesk-test\.com/g, 2);
    const emails = Array.from({ length: 8 }, (_, i) => `lost-batch-${i}@certdesk-test.com`);
    const answers = await Promise.all(emails.map(place));
    expect(relay.lost).toBe(1);
    for (const [i, res] of answers.entries()) {
      expect(res.statusCode, res.body).toBe(200);
      expect(await ordersOf(emails[i]!)).toEqual([res.json().ServiceOrderID]);
    }
    const after = await accountingOf(t.db, c.customerId);
    expect(after.used - before.used).toBe(8 * price);
    expect(after.liveCharges - before.liveCharges).toBe(8 * price);
  });

  it('fail/the database cannot be asked afterwards: 503 that says to look before sending again; the order is kept once', async () => {
    const price = await priceOfOne();
    const before = await accountingOf(t.db, c.customerId);
    loseCommitOf(/lost-unknown@certdesk-test\.com/g, 1, true);
    const res = await place('lost-unknown@certdesk-test.com');
    relay.refuseNew = false; // the service may read again
    expect(relay.lost).toBe(1);
    expect(res.statusCode, res.body).toBe(503);
    expect(res.json()).toMatchObject({
      success: false,
      Message: expect.stringMatching(/look before sending it again/),
    });
    // Looked at: it was kept, once, and charged once.
    expect(await ordersOf('lost-unknown@certdesk-test.com')).toHaveLength(1);
    const after = await accountingOf(t.db, c.customerId);
    expect(after.used - before.used).toBe(price);
  });

  it('ok/the record of the certificate signed inline: kept, so the order is answered issued, with one live certificate', async () => {
    // The proof in place: the order is issued while the request waits.
    const data = await t.call(c.token, {
      method: 'POST',
      url: '/rest/v1/DNSData',
      payload: { ProductCode: 'TrustPoint.DV', CSR: testCsr().pem },
    });
    expect(data.statusCode, data.body).toBe(200);
    dns.set('certdesk-test.com', [{ type: 'TXT', data: data.json().DNSAuthDetails.DNSValue }]);
    try {
      relay.lose({ how: 'answerLost', when: (sent) => sent.includes('ca.sign.done') });
      const res = await place('lost-leaf@certdesk-test.com');
      expect(relay.lost).toBe(1);
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json().Fulfillment?.Certificate).toMatch(/^-----BEGIN CERTIFICATE-----/);
      const [orderId] = await ordersOf('lost-leaf@certdesk-test.com');
      const leaves = await t.db.kysely
        .selectFrom('certificates')
        .select(['serial', 'revoked_at'])
        .where('order_id', '=', orderId!)
        .execute();
      expect(leaves).toEqual([expect.objectContaining({ revoked_at: null })]);
    } finally {
      dns.clear('certdesk-test.com');
    }
  });

  /** What one order of the test's product costs, in minor units (an order placed and looked at). */
  let price: number | undefined;
  async function priceOfOne(): Promise<number> {
    if (price !== undefined) return price;
    const before = await accountingOf(t.db, c.customerId);
    const res = await place('price@certdesk-test.com');
    expect(res.statusCode, res.body).toBe(200);
    price = (await accountingOf(t.db, c.customerId)).used - before.used;
    expect(price).toBeGreaterThan(0);
    return price;
  }
});
