// The notices of a state change are written in its transaction (a true outbox): when the notice
// cannot be recorded the change does not commit either, and is made again, with its notice, by
// the retry. Before, the change committed first and a failure (a crash, the database gone) in
// between lost the notice for good. The failure is a real one: a trigger refusing the outbox row.
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createWorker } from '../src/main.js';
import { HELD_RECHECK_SECONDS } from '../src/ra/issuance/order-flow.js';
import { accountingOf } from './support/accounting.js';
import { allowMail, refuseMail } from './support/refusals.js';
import { createTestContext, type TestContext, type TestCustomer } from './support/app.js';
import { testCsr } from './support/csr.js';
import { testDialects } from './support/databases.js';
import { startDnsServer, type TestDnsServer } from './support/dns-server.js';

const admin = { FirstName: 'Ada', LastName: 'Lovelace', Phone: '+49 30 1234567', Email: 'ada@certdesk-test.com' };
const tech = { ...admin, Email: 'tech@certdesk-test.com' };

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

  /** The revocation of an order's (only) certificate as the CA records it. */
  const revocationOf = (id: number) =>
    t.db.kysely
      .selectFrom('certificates')
      .select(['revoked_at', 'revocation_reason'])
      .where('order_id', '=', id)
      .executeTakeFirstOrThrow();
  const eventCount = async (id: number, action: string) =>
    (
      await t.db.kysely
        .selectFrom('audit_events')
        .select('id')
        .where('subject', '=', String(id))
        .where('action', '=', action)
        .execute()
    ).length;

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
    expect(await eventCount(id, 'order.revoked')).toBe(1);
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
  it('fail/the revocation notice refused: DELETE /Revoke revokes nothing (certificate good, CRL unchanged, order COMPLETE, no refund, no event); the retry revokes with one notice', async () => {
    const placed = await place();
    expect(placed.statusCode, placed.body).toBe(200);
    const id = placed.json().ServiceOrderID as number;
    const pem = placed.json().Fulfillment.Certificate as string;
    const leaf = await t.db.kysely
      .selectFrom('certificates')
      .select(['serial', 'key_id'])
      .where('order_id', '=', id)
      .executeTakeFirstOrThrow();
    const crlNumber = async () =>
      (await t.db.kysely.selectFrom('ca_crls').select('number').where('key_id', '=', leaf.key_id!).executeTakeFirst())
        ?.number ?? null;
    const revocationState = async () => ({
      cert: await revocationOf(id),
      events: (
        await t.db.kysely
          .selectFrom('audit_events')
          .select('action')
          .where((eb) => eb.or([eb('subject', '=', leaf.serial), eb('subject', '=', String(id))]))
          .where((eb) => eb.or([eb('action', 'like', 'ca.revoke.%'), eb('action', 'like', 'order.revo%')]))
          .orderBy('id')
          .execute()
      ).map((e) => e.action),
    });
    const before = await accountingOf(t.db, c.customerId);
    const crlBefore = await crlNumber();
    await refuseMail(t.db, 'order.revoked');

    const revoke = () =>
      t.call(c.token, {
        method: 'DELETE',
        url: `/rest/v1/Revoke/${id}`,
        payload: { RevokeReason: 'keyCompromise', Certificate: pem },
      });
    const refused = await revoke();
    expect(refused.statusCode).toBeGreaterThanOrEqual(500);
    // The CA's revocation rolled back with the RA's record: nothing says revoked anywhere.
    expect(await revocationState()).toEqual({ cert: { revoked_at: null, revocation_reason: null }, events: [] });
    expect(await crlNumber()).toBe(crlBefore);
    expect(await statusOf(id)).toMatchObject({ major_status: 'COMPLETE' });
    expect((await accountingOf(t.db, c.customerId)).liveCharges).toBe(before.liveCharges);
    expect(await notices(id)).toEqual(['order.issued ada@certdesk-test.com', 'order.issued tech@certdesk-test.com']);

    await allowMail(t.db);
    const retried = await revoke();
    expect(retried.statusCode, retried.body).toBe(200);
    expect(await statusOf(id)).toMatchObject({ major_status: 'REVOKED' });
    const after = await revocationState();
    expect(after.cert.revoked_at).not.toBeNull();
    expect(after.cert.revocation_reason).toBe(1);
    expect(after.events).toEqual(['ca.revoke.begin', 'order.revoked', 'ca.revoke.done']);
    expect(await crlNumber()).not.toBe(crlBefore);
    expect(await notices(id)).toEqual([
      'order.issued ada@certdesk-test.com',
      'order.issued tech@certdesk-test.com',
      'order.revoked ada@certdesk-test.com',
      'order.revoked tech@certdesk-test.com',
    ]);
    const books = await accountingOf(t.db, c.customerId);
    expect(books.liveCharges).toBeLessThan(before.liveCharges);
    expect(books.orphans).toEqual([]);
    // A repeat is a repeat: refused, nothing new.
    const again = await revoke();
    expect(again.statusCode).toBe(409);
    expect((await revocationState()).events).toEqual(after.events);
  });

  it("fail/an escalation's notice refused: the reason stays as it was; the retry raises it to keyCompromise with one event", async () => {
    const placed = await place();
    expect(placed.statusCode, placed.body).toBe(200);
    const id = placed.json().ServiceOrderID as number;
    const pem = placed.json().Fulfillment.Certificate as string;
    const revoke = (reason: string) =>
      t.call(c.token, {
        method: 'DELETE',
        url: `/rest/v1/Revoke/${id}`,
        payload: { RevokeReason: reason, Certificate: pem },
      });
    expect((await revoke('superseded')).statusCode).toBe(200);
    const first = await revocationOf(id);
    expect(first.revocation_reason).toBe(4);
    const escalations = () => eventCount(id, 'order.revocation-escalated');
    await refuseMail(t.db, 'order.revoked');

    expect((await revoke('keyCompromise')).statusCode).toBeGreaterThanOrEqual(500);
    expect(await revocationOf(id)).toEqual(first);
    expect(await escalations()).toBe(0);

    await allowMail(t.db);
    const retried = await revoke('keyCompromise');
    expect(retried.statusCode, retried.body).toBe(200);
    expect(await revocationOf(id)).toEqual({ revoked_at: first.revoked_at, revocation_reason: 1 });
    expect(await escalations()).toBe(1);
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
    const resentEvents = () => eventCount(id, 'dcv.mail-resent');
    expect(await resentEvents()).toBe(0);

    await allowMail(t.db);
    const retried = await t.call(c.token, { method: 'POST', url: `/rest/v1/ApproverEmail/${id}`, payload: {} });
    expect(retried.statusCode, retried.body).toBe(200);
    const after = await links();
    expect(after.some((h, i) => h === before[i])).toBe(false);
    expect(await approvalMails()).toEqual(['outbox', 'withdrawn']);
    expect(await resentEvents()).toBe(1);
  });
  it('race/POST /ApproverEmail against DELETE /Order: a cancelled order keeps no approval mail queued; the resend came first or is refused', async () => {
    const answers: number[] = [];
    // The cancel starts 0 to 15 turns of the event loop after the resend, so that across the rounds
    // it lands before, inside and after the resend's own steps (its read of the order, its links).
    // Where the database's answers take longer than those turns (PostgreSQL on a loaded machine),
    // the rounds go on, the cancel then waiting whole milliseconds more each round, until it has
    // landed after the resend too.
    const both = () => answers.includes(200) && answers.includes(409);
    for (let round = 0; round < 16 || (!both() && round < 80); round++) {
      const placed = await t.call(c.token, { method: 'POST', url: '/rest/v1/Order', payload: emailOrder() });
      expect(placed.statusCode, placed.body).toBe(200);
      const id = placed.json().ServiceOrderID as number;
      const cancelLater = async () => {
        for (let turn = 0; turn < Math.min(round, 16); turn++) await new Promise((resolve) => setImmediate(resolve));
        if (round > 16) await new Promise((resolve) => setTimeout(resolve, round - 16));
        return t.call(c.token, { method: 'DELETE', url: `/rest/v1/Order/${id}` });
      };
      const [resent, cancelled] = await Promise.all([
        t.call(c.token, { method: 'POST', url: `/rest/v1/ApproverEmail/${id}`, payload: {} }),
        cancelLater(),
      ]);
      expect(cancelled.statusCode, cancelled.body).toBe(200);
      expect([200, 409], resent.body).toContain(resent.statusCode);
      answers.push(resent.statusCode);
      const approvals = (await t.services.mailRepo.list({ limit: 20, orderId: id }))
        .filter((m) => m.kind === 'dcv.approval')
        .map((m) => m.status);
      expect(approvals.length).toBeGreaterThan(0);
      expect(approvals.every((status) => status === 'withdrawn')).toBe(true);
      // A refused resend left no trace; one that came first left its event.
      expect(await eventCount(id, 'dcv.mail-resent')).toBe(resent.statusCode === 200 ? 1 : 0);
    }
    console.log(`POST /ApproverEmail racing DELETE /Order: answers ${answers.join(' ')}`);
    // The cancel landed before the resend in some rounds and after it in others: the sweep crossed
    // the resend's steps (the window between its read of the order and its links is among them).
    expect(answers).toContain(200);
    expect(answers).toContain(409);
  });

  it('fail/the approval mail of an EMAIL reissue refused: the reissue does not start; the retry starts it with its mail', async () => {
    const placed = await place();
    expect(placed.statusCode, placed.body).toBe(200);
    const id = placed.json().ServiceOrderID as number;
    const saved = t.clock.nowSeconds();
    // Past the reuse period of the names' validation: the reissue must have them approved anew.
    t.clock.set(saved + 201 * 86_400);
    try {
      const token = await t.token(c);
      const reissue = () =>
        t.call(token, {
          method: 'POST',
          url: '/rest/v1/Reissue',
          payload: {
            ServiceOrderID: id,
            OrderParameters: { CSR: testCsr().pem },
            ReissueEmail: 'admin@certdesk-test.com',
          },
        });
      const approvals = async () =>
        (await t.services.mailRepo.list({ limit: 20, orderId: id })).filter((m) => m.kind === 'dcv.approval').length;
      await refuseMail(t.db, 'dcv.approval');
      expect((await reissue()).statusCode).toBeGreaterThanOrEqual(500);
      expect(await statusOf(id)).toMatchObject({ major_status: 'COMPLETE', minor_status: 'COMPLETED' });
      expect(await eventCount(id, 'order.reissue')).toBe(0);
      expect(await approvals()).toBe(0);

      await allowMail(t.db);
      const retried = await reissue();
      expect(retried.statusCode, retried.body).toBe(200);
      expect(await statusOf(id)).toMatchObject({ major_status: 'REISSUE', minor_status: 'WF_EMAIL_AUTH' });
      expect(await eventCount(id, 'order.reissue')).toBe(1);
      expect(await approvals()).toBe(1);
    } finally {
      t.clock.set(saved);
    }
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
