// POST /Order when the answer to its transaction's COMMIT is lost (the connection to PostgreSQL
// drops after the server committed): the order was kept, so the client is answered with it, and
// it is neither stored nor charged a second time. Orders placed together share a transaction
// (TransactionBatch); before, such a loss ran each of them again alone: every order twice, and
// charged twice. A real TCP relay on loopback stands between the service and PostgreSQL and
// loses the answer to the COMMIT of a transaction that carried the orders picked.
import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { accountingOf } from './support/accounting.js';
import { createTestContext, type TestContext, type TestCustomer } from './support/app.js';
import { testCsr } from './support/csr.js';
import { openPostgres } from './support/databases.js';
import { startDnsServer, type TestDnsServer } from './support/dns-server.js';
import { startCommitLossRelay, type CommitLoss, type CommitLossRelay } from './support/commit-loss.js';

const url = process.env.CERTDESK_TEST_DATABASE_URL;
if (url === undefined || url === '')
  console.warn('lost COMMIT order tests not run: they are PostgreSQL only and CERTDESK_TEST_DATABASE_URL is not set');

const contact = (email: string) => ({ FirstName: 'Ada', LastName: 'Lovelace', Phone: '+49 30 1234567', Email: email });

/**
 * The service over PostgreSQL through a relay that loses COMMITs (`open`: the service's pool
 * options), a customer, and what the tests ask of them.
 */
function lostCommitService(open: Parameters<typeof openPostgres>[2] = {}) {
  const s = {} as {
    relay: CommitLossRelay;
    t: TestContext;
    c: TestCustomer;
    dns: TestDnsServer;
  };
  beforeAll(async () => {
    s.relay = await startCommitLossRelay(new URL(url!));
    s.dns = await startDnsServer();
    s.t = await createTestContext(
      { dialect: 'postgres', open: () => openPostgres(url!, s.relay.host, open) },
      { CERTDESK_DNS_SERVERS: s.dns.address },
    );
    s.c = await s.t.customer({ creditLimit: 1_000_000 });
  }, 120_000);
  afterEach(() => {
    // A loss that did not happen (or a test that failed before its end) leaves nothing armed behind.
    s.relay.lose(undefined);
    s.relay.refuseNew = false;
  });
  afterAll(async () => {
    await s.t?.close();
    await s.relay?.close();
    await s.dns?.close();
  });

  const place = (email: string) =>
    s.t.call(s.c.token, {
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
      await s.t.db.kysely
        .selectFrom('orders')
        .select(['id', 'contacts_json'])
        .where('customer_id', '=', s.c.customerId)
        .execute()
    )
      .filter((o) => o.contacts_json.includes(email))
      .map((o) => o.id);
  /** What one order of the test's product costs, in minor units (an order placed and looked at). */
  let price: number | undefined;
  const priceOfOne = async (): Promise<number> => {
    if (price !== undefined) return price;
    const before = await accountingOf(s.t.db, s.c.customerId);
    const res = await place('price@certdesk-test.com');
    expect(res.statusCode, res.body).toBe(200);
    price = (await accountingOf(s.t.db, s.c.customerId)).used - before.used;
    expect(price).toBeGreaterThan(0);
    return price;
  };
  /**
   * The next COMMIT of a transaction that sent at least `orders` of the addresses matching
   * `marker` (the orders' contact addresses, sent as statement parameters) is lost as `how` says.
   */
  const loseCommitOf = (
    marker: RegExp,
    orders: number,
    how: CommitLoss['how'] = 'answerLost',
    thenUnreachable = false,
  ) =>
    s.relay.lose({
      how,
      when: (sent) => new Set([...sent.matchAll(marker)].map((m) => m[0])).size >= orders,
      thenUnreachable,
    });
  return { s, place, ordersOf, priceOfOne, loseCommitOf };
}

describe.skipIf(url === undefined || url === '')('POST /Order whose COMMIT answer is lost (PostgreSQL)', () => {
  const { s, place, ordersOf, priceOfOne, loseCommitOf } = lostCommitService();

  it('ok/one order: the client is answered with the order, stored and charged once', async () => {
    const price = await priceOfOne();
    const before = await accountingOf(s.t.db, s.c.customerId);
    loseCommitOf(/lost-alone@certdesk-test\.com/g, 1);
    const res = await place('lost-alone@certdesk-test.com');
    expect(s.relay.lost).toBe(1);
    expect(res.statusCode, res.body).toBe(200);
    const orders = await ordersOf('lost-alone@certdesk-test.com');
    expect(orders).toEqual([res.json().ServiceOrderID]);
    const after = await accountingOf(s.t.db, s.c.customerId);
    expect(after.used - before.used).toBe(price);
    expect(after.liveCharges - before.liveCharges).toBe(price);
  });

  it('ok/orders placed together: each client gets its own order, each stored and charged once', async () => {
    const price = await priceOfOne();
    const before = await accountingOf(s.t.db, s.c.customerId);
    // Two transactions start at once and the rest wait for the next: the loss hits a shared one.
    loseCommitOf(/lost-batch-\d+@certdesk-test\.com/g, 2);
    const emails = Array.from({ length: 8 }, (_, i) => `lost-batch-${i}@certdesk-test.com`);
    const answers = await Promise.all(emails.map(place));
    expect(s.relay.lost).toBe(1);
    for (const [i, res] of answers.entries()) {
      expect(res.statusCode, res.body).toBe(200);
      expect(await ordersOf(emails[i]!)).toEqual([res.json().ServiceOrderID]);
    }
    const after = await accountingOf(s.t.db, s.c.customerId);
    expect(after.used - before.used).toBe(8 * price);
    expect(after.liveCharges - before.liveCharges).toBe(8 * price);
  });

  it('fail/the database cannot be asked afterwards: 503 that says to look before sending again; the order is kept once', async () => {
    const price = await priceOfOne();
    const before = await accountingOf(s.t.db, s.c.customerId);
    loseCommitOf(/lost-unknown@certdesk-test\.com/g, 1, 'answerLost', true);
    const res = await place('lost-unknown@certdesk-test.com');
    s.relay.refuseNew = false; // the service may read again
    expect(s.relay.lost).toBe(1);
    expect(res.statusCode, res.body).toBe(503);
    expect(res.json()).toMatchObject({
      success: false,
      Message: expect.stringMatching(/look before sending it again/),
    });
    // Looked at: it was kept, once, and charged once.
    expect(await ordersOf('lost-unknown@certdesk-test.com')).toHaveLength(1);
    const after = await accountingOf(s.t.db, s.c.customerId);
    expect(after.used - before.used).toBe(price);
  });

  it('ok/the record of the certificate signed inline: kept, so the order is answered issued, with one live certificate', async () => {
    // The proof in place: the order is issued while the request waits.
    const data = await s.t.call(s.c.token, {
      method: 'POST',
      url: '/rest/v1/DNSData',
      payload: { ProductCode: 'TrustPoint.DV', CSR: testCsr().pem },
    });
    expect(data.statusCode, data.body).toBe(200);
    s.dns.set('certdesk-test.com', [{ type: 'TXT', data: data.json().DNSAuthDetails.DNSValue }]);
    try {
      s.relay.lose({ how: 'answerLost', when: (sent) => sent.includes('ca.sign.done') });
      const res = await place('lost-leaf@certdesk-test.com');
      expect(s.relay.lost).toBe(1);
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json().Fulfillment?.Certificate).toMatch(/^-----BEGIN CERTIFICATE-----/);
      const [orderId] = await ordersOf('lost-leaf@certdesk-test.com');
      const leaves = await s.t.db.kysely
        .selectFrom('certificates')
        .select(['serial', 'revoked_at'])
        .where('order_id', '=', orderId!)
        .execute();
      expect(leaves).toEqual([expect.objectContaining({ revoked_at: null })]);
    } finally {
      s.dns.clear('certdesk-test.com');
    }
  });
});

/** The service's bound on an answer in these tests: long enough for any statement on a loaded machine. */
const QUERY_TIMEOUT_MS = 3_000;

describe.skipIf(url === undefined || url === '')(
  'POST /Order whose COMMIT meets a path gone silent (PostgreSQL, a bound on answers)',
  () => {
    const { s, place, ordersOf, priceOfOne, loseCommitOf } = lostCommitService({ queryTimeoutMs: QUERY_TIMEOUT_MS });

    it('ok/silent after the server answered the COMMIT: the bound gives up on the connection, the server is asked, and the client gets its order, stored and charged once', async () => {
      const price = await priceOfOne();
      const before = await accountingOf(s.t.db, s.c.customerId);
      loseCommitOf(/held-answer@certdesk-test\.com/g, 1, 'answerHeld');
      const started = Date.now();
      const res = await place('held-answer@certdesk-test.com');
      expect(s.relay.lost).toBe(1);
      expect(res.statusCode, res.body).toBe(200);
      // Answered only once the bound had passed: nothing else told the client the path was gone.
      expect(Date.now() - started).toBeGreaterThanOrEqual(QUERY_TIMEOUT_MS - 50);
      expect(await ordersOf('held-answer@certdesk-test.com')).toEqual([res.json().ServiceOrderID]);
      const after = await accountingOf(s.t.db, s.c.customerId);
      expect(after.used - before.used).toBe(price);
      expect(after.liveCharges - before.liveCharges).toBe(price);
    });

    it('fail/silent before the COMMIT reached the server, which still holds the transaction open: it is ended there, and the client told to send again (503, Retry-After); nothing stored or charged; sent again, placed once', async () => {
      const before = await accountingOf(s.t.db, s.c.customerId);
      loseCommitOf(/held-commit@certdesk-test\.com/g, 1, 'held');
      const res = await place('held-commit@certdesk-test.com');
      expect(s.relay.lost).toBe(1);
      expect(res.statusCode, res.body).toBe(503);
      expect(res.json()).toMatchObject({ success: false, ErrorId: -1503 });
      // Certain: the server said the transaction was not kept.
      expect(res.headers['retry-after']).toBe('5');
      expect(await ordersOf('held-commit@certdesk-test.com')).toEqual([]);
      expect(await accountingOf(s.t.db, s.c.customerId)).toEqual(before);
      // Its backend was ended, not left idle in the transaction holding its locks.
      const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND state LIKE 'idle in transaction%'`.execute(s.t.db.kysely);
      expect(rows).toEqual([{ n: 0 }]);

      const again = await place('held-commit@certdesk-test.com');
      expect(again.statusCode, again.body).toBe(200);
      expect(await ordersOf('held-commit@certdesk-test.com')).toEqual([again.json().ServiceOrderID]);
      const after = await accountingOf(s.t.db, s.c.customerId);
      expect(after.used - before.used).toBe(await priceOfOne());
    });
  },
);
