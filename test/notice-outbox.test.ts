// The notices of a state change are written in its transaction (a true outbox): when the notice
// cannot be recorded the change does not commit either, and is made again, with its notice, by
// the retry. Before, the change committed first and a failure (a crash, the database gone) in
// between lost the notice for good. The failure is a real one: a trigger refusing the outbox row.
import { sql } from 'kysely';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createWorker } from '../src/main.js';
import { HELD_RECHECK_SECONDS } from '../src/ra/issuance/order-flow.js';
import type { Db } from '../src/storage/index.js';
import { accountingOf } from './support/accounting.js';
import { createTestContext, type TestContext, type TestCustomer } from './support/app.js';
import { testCsr } from './support/csr.js';
import { testDialects } from './support/databases.js';
import { startDnsServer, type TestDnsServer } from './support/dns-server.js';

const admin = { FirstName: 'Ada', LastName: 'Lovelace', Phone: '+49 30 1234567', Email: 'ada@certdesk-test.com' };
const tech = { ...admin, Email: 'tech@certdesk-test.com' };

/** Makes the database refuse every outbox row of `kind` until `allowMail`. */
async function refuseMail(db: Db, kind: string): Promise<void> {
  if (db.dialect === 'sqlite') {
    await sql
      .raw(
        `CREATE TRIGGER refuse_mail BEFORE INSERT ON mail_outbox WHEN NEW.kind = '${kind}' BEGIN SELECT RAISE(ABORT, 'outbox refused'); END`,
      )
      .execute(db.kysely);
    return;
  }
  await sql
    .raw(
      `CREATE OR REPLACE FUNCTION refuse_mail() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'outbox refused'; END $$ LANGUAGE plpgsql`,
    )
    .execute(db.kysely);
  await sql
    .raw(
      `CREATE TRIGGER refuse_mail BEFORE INSERT ON mail_outbox FOR EACH ROW WHEN (NEW.kind = '${kind}') EXECUTE FUNCTION refuse_mail()`,
    )
    .execute(db.kysely);
}

async function allowMail(db: Db): Promise<void> {
  await sql
    .raw(
      db.dialect === 'sqlite'
        ? 'DROP TRIGGER IF EXISTS refuse_mail'
        : 'DROP TRIGGER IF EXISTS refuse_mail ON mail_outbox',
    )
    .execute(db.kysely);
}

const emailOrder = () => ({
  OrderParameters: {
    ProductCode: 'TrustPoint.DV',
    ValidityPeriod: 12,
    CSR: testCsr().pem,
    DVAuthMethod: 'EMAIL',
    ApproverEmail: 'admin@certdesk-test.com',
  },
  AdminContact: admin,
  TechContact: tech,
});

describe.each(testDialects())('notices commit with their change, on $dialect', (dialect) => {
  let t: TestContext;
  let c: TestCustomer;
  let dns: TestDnsServer;

  beforeAll(async () => {
    dns = await startDnsServer();
    t = await createTestContext(
      dialect,
      { CERTDESK_DNS_SERVERS: dns.address, CERTDESK_RATE_LIMIT: '1000000' },
      { logger: pino({ level: 'silent' }) },
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
  afterEach(() => allowMail(t.db));
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
        AdminContact: admin,
        TechContact: tech,
      },
    });
  const notices = async (id: number) =>
    (await t.services.mailRepo.list({ limit: 20, orderId: id })).map((m) => `${m.kind} ${m.to}`).sort();
  const statusOf = (id: number) =>
    t.db.kysely
      .selectFrom('orders')
      .select(['major_status', 'minor_status', 'issuance_claim'])
      .where('id', '=', id)
      .executeTakeFirstOrThrow();

  it('ok/an order issued inline commits its issued notices with the completion, one per contact', async () => {
    const res = await place();
    expect(res.statusCode, res.body).toBe(200);
    const id = res.json().ServiceOrderID as number;
    expect(await notices(id)).toEqual(['order.issued ada@certdesk-test.com', 'order.issued tech@certdesk-test.com']);
  });

  it('ok/revoking: the order revoked, its audit event and its revoked notices are recorded together', async () => {
    const placed = await place();
    expect(placed.statusCode, placed.body).toBe(200);
    const id = placed.json().ServiceOrderID as number;
    const res = await t.call(c.token, {
      method: 'DELETE',
      url: `/rest/v1/Revoke/${id}`,
      payload: { RevokeReason: 'keyCompromise', Certificate: placed.json().Fulfillment.Certificate as string },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(await statusOf(id)).toMatchObject({ major_status: 'REVOKED' });
    expect(await notices(id)).toEqual([
      'order.issued ada@certdesk-test.com',
      'order.issued tech@certdesk-test.com',
      'order.revoked ada@certdesk-test.com',
      'order.revoked tech@certdesk-test.com',
    ]);
    const audit = await t.db.kysely
      .selectFrom('audit_events')
      .select('action')
      .where('subject', '=', String(id))
      .where('action', '=', 'order.revoked')
      .execute();
    expect(audit).toHaveLength(1);
  });

  it('fail/the issued notice refused: the completion is not committed either; the job completes it with its notices, signing nothing new', async () => {
    const before = await accountingOf(t.db, c.customerId);
    await refuseMail(t.db, 'order.issued');

    const res = await place();
    // Answered from the stored order (the failure came after the order's commit): waiting for issuance.
    expect(res.statusCode, res.body).toBe(200);
    const id = res.json().ServiceOrderID as number;
    expect(res.json().Fulfillment?.Certificate).toBeUndefined();
    expect(await statusOf(id)).toEqual({ major_status: 'PENDING', minor_status: 'WF_ISSUANCE', issuance_claim: null });
    expect(await notices(id)).toEqual([]);
    const signed = await t.db.kysely
      .selectFrom('certificates')
      .select(['serial', 'delivered_at'])
      .where('order_id', '=', id)
      .execute();
    expect(signed).toHaveLength(1);
    expect(signed[0]!.delivered_at).toBeNull();

    await allowMail(t.db);
    const worker = createWorker(t.services, pino({ level: 'silent' }));
    t.clock.advance(HELD_RECHECK_SECONDS + 1);
    while ((await worker.runOnce()) > 0);
    expect(await statusOf(id)).toMatchObject({ major_status: 'COMPLETE', minor_status: 'COMPLETED' });
    expect(await notices(id)).toEqual(['order.issued ada@certdesk-test.com', 'order.issued tech@certdesk-test.com']);
    // The certificate signed in the failed round was adopted, not signed again.
    const after = await t.db.kysely
      .selectFrom('certificates')
      .select(['serial', 'delivered_at', 'revoked_at'])
      .where('order_id', '=', id)
      .execute();
    expect(after.map((x) => x.serial)).toEqual([signed[0]!.serial]);
    expect(after[0]!.delivered_at).not.toBeNull();
    expect(after[0]!.revoked_at).toBeNull();
    const books = await accountingOf(t.db, c.customerId);
    expect(books.orphans).toEqual([]);
    expect(books.used - before.used).toBe(books.liveCharges - before.liveCharges);
  });

  it('fail/the cancellation notice refused: DELETE /Order changes nothing (no refund, no revocation); its retry cancels with one notice', async () => {
    const placed = await place();
    expect(placed.statusCode, placed.body).toBe(200);
    const id = placed.json().ServiceOrderID as number;
    const before = await accountingOf(t.db, c.customerId);
    await refuseMail(t.db, 'order.cancelled');

    const refused = await t.call(c.token, { method: 'DELETE', url: `/rest/v1/Order/${id}` });
    expect(refused.statusCode).toBeGreaterThanOrEqual(500);
    expect(await statusOf(id)).toMatchObject({ major_status: 'COMPLETE' });
    expect((await accountingOf(t.db, c.customerId)).liveCharges).toBe(before.liveCharges);
    const revocationJobs = await t.db.kysely
      .selectFrom('jobs')
      .select('id')
      .where('unique_key', '=', `revoke:${id}`)
      .execute();
    expect(revocationJobs).toEqual([]);
    expect(await notices(id)).toEqual(['order.issued ada@certdesk-test.com', 'order.issued tech@certdesk-test.com']);

    await allowMail(t.db);
    const retried = await t.call(c.token, { method: 'DELETE', url: `/rest/v1/Order/${id}` });
    expect(retried.statusCode, retried.body).toBe(200);
    expect(await statusOf(id)).toMatchObject({ major_status: 'CANCELLED' });
    expect(await notices(id)).toEqual([
      'order.cancelled ada@certdesk-test.com',
      'order.cancelled tech@certdesk-test.com',
      'order.issued ada@certdesk-test.com',
      'order.issued tech@certdesk-test.com',
    ]);
  });
  it('fail/the new approval mail refused: POST /ApproverEmail changes nothing (no audit event either); the old link and its mail stay; the retry replaces both', async () => {
    const placed = await t.call(c.token, {
      method: 'POST',
      url: '/rest/v1/Order',
      payload: emailOrder(),
    });
    expect(placed.statusCode, placed.body).toBe(200);
    const id = placed.json().ServiceOrderID as number;
    const links = async () =>
      (
        await t.db.kysely.selectFrom('order_names').select('approval_token_hash').where('order_id', '=', id).execute()
      ).map((n) => n.approval_token_hash);
    const approvalMails = async () =>
      (await t.services.mailRepo.list({ limit: 20, orderId: id }))
        .filter((m) => m.kind === 'dcv.approval')
        .map((m) => m.status)
        .sort();
    const before = await links();
    expect(before.every((h) => typeof h === 'string')).toBe(true);
    expect(await approvalMails()).toEqual(['outbox']);
    await refuseMail(t.db, 'dcv.approval');

    const refused = await t.call(c.token, { method: 'POST', url: `/rest/v1/ApproverEmail/${id}`, payload: {} });
    expect(refused.statusCode).toBeGreaterThanOrEqual(500);
    expect(await links()).toEqual(before);
    expect(await approvalMails()).toEqual(['outbox']);
    const resentEvents = async () =>
      (
        await t.db.kysely
          .selectFrom('audit_events')
          .select('id')
          .where('subject', '=', String(id))
          .where('action', '=', 'dcv.mail-resent')
          .execute()
      ).length;
    expect(await resentEvents()).toBe(0);

    await allowMail(t.db);
    const retried = await t.call(c.token, { method: 'POST', url: `/rest/v1/ApproverEmail/${id}`, payload: {} });
    expect(retried.statusCode, retried.body).toBe(200);
    const after = await links();
    expect(after.some((h, i) => h === before[i])).toBe(false);
    expect(await approvalMails()).toEqual(['outbox', 'withdrawn']);
    expect(await resentEvents()).toBe(1);
  });
  it('fail/the approval mail of a new EMAIL order refused: the order is not stored, nor charged; placed again, it has its mail', async () => {
    const before = await accountingOf(t.db, c.customerId);
    const ordersBefore = await t.db.kysely
      .selectFrom('orders')
      .select('id')
      .where('customer_id', '=', c.customerId)
      .execute();
    await refuseMail(t.db, 'dcv.approval');
    const refused = await t.call(c.token, { method: 'POST', url: '/rest/v1/Order', payload: emailOrder() });
    expect(refused.statusCode).toBeGreaterThanOrEqual(500);
    const ordersAfter = await t.db.kysely
      .selectFrom('orders')
      .select('id')
      .where('customer_id', '=', c.customerId)
      .execute();
    expect(ordersAfter).toEqual(ordersBefore);
    expect((await accountingOf(t.db, c.customerId)).used).toBe(before.used);

    await allowMail(t.db);
    const placed = await t.call(c.token, { method: 'POST', url: '/rest/v1/Order', payload: emailOrder() });
    expect(placed.statusCode, placed.body).toBe(200);
    expect(await notices(placed.json().ServiceOrderID as number)).toEqual(['dcv.approval admin@certdesk-test.com']);
  });
});
