import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorker } from '../src/main.js';
import type { TestContext, TestCustomer } from './support/app.js';
import { testDialects } from './support/databases.js';
import { dnsOrderBody, issuingContext, type IssuingContext } from './support/issuing-context.js';

const DAY = 86_400;

describe.each(testDialects())('DELETE /Order/{id} with an Idempotency-Key on $dialect', (dialect) => {
  let t: TestContext;
  let c: TestCustomer;

  let context: IssuingContext;

  beforeAll(async () => {
    context = await issuingContext(dialect, 'Cancel retry');
    ({ t, c } = context);
  }, 120_000);
  afterAll(async () => context.close());

  /** An order issued at once (the DNS proof is in place). */
  const place = async (token = c.token) => {
    const res = await t.call(token, {
      method: 'POST',
      url: '/rest/v1/Order',
      payload: dnsOrderBody(),
    });
    expect(res.statusCode, res.body).toBe(200);
    return (res.json() as { ServiceOrderID: number }).ServiceOrderID;
  };
  const cancel = (id: number, key?: string, token = c.token) =>
    t.call(token, {
      method: 'DELETE',
      url: `/rest/v1/Order/${id}`,
      headers: key === undefined ? {} : { 'idempotency-key': key },
    });
  const refunds = async (id: number) =>
    (
      await t.db.kysely
        .selectFrom('ledger')
        .select('kind')
        .where('order_id', '=', id)
        .where('kind', '=', 'refund')
        .execute()
    ).length;
  const cancelEvents = async (id: number) =>
    (
      await t.db.kysely
        .selectFrom('audit_events')
        .select('action')
        .where('subject', '=', String(id))
        .where('action', '=', 'order.cancelled')
        .execute()
    ).length;
  const allEvents = async () =>
    Number(
      (
        await t.db.kysely
          .selectFrom('audit_events')
          .select((eb) => eb.fn.countAll().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );
  const mails = async (id: number) => (await t.services.mailRepo.list({ limit: 100, orderId: id })).length;
  const used = async () =>
    (await t.call(c.token, { method: 'GET', url: '/rest/v1/Limit' })).json().LimitInfo.Used as number;
  const order = (id: number) =>
    t.db.kysely
      .selectFrom('orders')
      .select(['major_status', 'billing_status', 'update_date', 'cancel_key', 'cancel_refunded'])
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
  const certificates = (id: number) =>
    t.db.kysely
      .selectFrom('certificates')
      .select(['serial', 'revoked_at', 'revocation_reason'])
      .where('order_id', '=', id)
      .orderBy('id')
      .execute();

  it('ok/cancel with a key → 200; the same key again → the same body, nothing changes: one refund, one order.cancelled event, no mail', async () => {
    const id = await place();
    const key = randomUUID();
    const first = await cancel(id, key);
    expect(first.statusCode, first.body).toBe(200);
    expect(first.json()).toEqual({ success: true, Message: 'The order was cancelled and refunded.' });
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    const stored = await order(id);
    expect(stored).toMatchObject({
      major_status: 'CANCELLED',
      billing_status: 'refunded',
      cancel_key: key,
      cancel_refunded: 1,
    });
    const certs = await certificates(id);
    expect(certs.every((x) => x.revoked_at !== null)).toBe(true);
    const events = await allEvents();
    const sent = await mails(id);
    const limit = await used();

    const again = await cancel(id, key);
    expect(again.statusCode).toBe(200);
    expect(again.body).toBe(first.body);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(await refunds(id)).toBe(1);
    expect(await cancelEvents(id)).toBe(1);
    expect(await allEvents()).toBe(events);
    expect(await mails(id)).toBe(sent);
    expect(await used()).toBe(limit);
    expect(await order(id)).toEqual(stored);
    expect(await certificates(id)).toEqual(certs);
  });

  it('ok/a cancel whose process died before it revoked the certificate: the job it queued revokes it', async () => {
    const id = await place();
    expect((await cancel(id)).statusCode).toBe(200);
    const queued = await t.db.kysely
      .selectFrom('jobs')
      .select(['name', 'status', 'run_at'])
      .where('unique_key', '=', `revoke:${id}`)
      .executeTakeFirstOrThrow();
    expect(queued).toMatchObject({ name: 'order.revoke-certificates', status: 'queued' });
    // As if the process had died between the cancel's commit and its revocations.
    await t.db.kysely
      .updateTable('certificates')
      .set({ revoked_at: null, revocation_reason: null })
      .where('order_id', '=', id)
      .execute();
    const saved = t.clock.nowSeconds();
    t.clock.set(queued.run_at);
    try {
      const worker = createWorker(t.services, pino({ level: 'silent' }));
      while ((await worker.runOnce()) > 0);
    } finally {
      t.clock.set(saved);
    }
    const certs = await certificates(id);
    expect(certs.length).toBeGreaterThan(0);
    expect(certs.every((x) => x.revoked_at !== null && x.revocation_reason === 5)).toBe(true);
  });

  it('ok/a charged cancel (day 31) replays as charged', async () => {
    const id = await place();
    const saved = t.clock.nowSeconds();
    t.clock.set(saved + 31 * DAY);
    try {
      const token = await t.token(c);
      const first = await cancel(id, 'charged-1', token);
      expect(first.json().Message).toMatch(/charged/);
      const again = await cancel(id, 'charged-1', token);
      expect(again.statusCode).toBe(200);
      expect(again.body).toBe(first.body);
      expect(await refunds(id)).toBe(0);
      expect((await order(id)).cancel_refunded).toBe(0);
    } finally {
      t.clock.set(saved);
    }
  });

  it('fail/a cancelled order without a key, with another key, or cancelled without a key: 409 -2011 as the spec says; nothing changes', async () => {
    const id = await place();
    expect((await cancel(id, 'first-key')).statusCode).toBe(200);
    const stored = await order(id);
    const events = await allEvents();
    for (const key of [undefined, 'another-key', 'FIRST-KEY']) {
      const res = await cancel(id, key);
      expect(res.statusCode, String(key)).toBe(409);
      expect(res.json()).toMatchObject({ success: false, ErrorId: -2011, ErrorField: 'ServiceOrderID' });
    }
    expect(await order(id)).toEqual(stored);
    expect(await allEvents()).toBe(events);
    expect(await refunds(id)).toBe(1);

    // Cancelled without a key: no key can claim that cancel afterwards.
    const keyless = await place();
    expect((await cancel(keyless)).statusCode).toBe(200);
    expect((await order(keyless)).cancel_key).toBeNull();
    expect((await cancel(keyless, 'late-key')).statusCode).toBe(409);
    expect((await order(keyless)).cancel_key).toBeNull();
  });

  it('fail/another customer\u2019s order with a key (even the one that cancelled it): 404, nothing changes', async () => {
    const other = await t.customer({ name: 'Cancel retry other' });
    const id = await place();
    const res = await cancel(id, 'k-1', other.token);
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({ success: false, ErrorId: -2011 });
    expect((await order(id)).major_status).toBe('COMPLETE');
    expect((await cancel(id, 'k-1')).statusCode).toBe(200);
    expect((await cancel(id, 'k-1', other.token)).statusCode).toBe(404);
    expect(await refunds(id)).toBe(1);
    // The same key on the other customer's own order is its own scope.
    const theirs = await place(other.token);
    expect((await cancel(theirs, 'k-1', other.token)).statusCode).toBe(200);
    expect((await order(theirs)).cancel_key).toBe('k-1');
  });

  it('fail/an empty key or one over 255 characters: 417 on the header, nothing changes; 255 is fine', async () => {
    const id = await place();
    for (const key of ['', 'k'.repeat(256)]) {
      const res = await cancel(id, key);
      expect(res.statusCode, `length ${key.length}`).toBe(417);
      expect(res.json()).toMatchObject({ success: false, ErrorField: expect.stringMatching(/^idempotency-key$/i) });
    }
    expect((await order(id)).major_status).toBe('COMPLETE');
    const long = 'k'.repeat(255);
    expect((await cancel(id, long)).statusCode).toBe(200);
    expect((await cancel(id, long)).statusCode).toBe(200);
    expect(await refunds(id)).toBe(1);
  });

  it('ok/the OpenAPI document shows the header on DELETE /Order/{id}', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/rest/v1/openapi.json' })).json() as {
      paths: Record<
        string,
        Record<string, { parameters?: { in: string; name: string; schema?: { maxLength?: number } }[] }>
      >;
    };
    const path = Object.keys(doc.paths).find((p) => /^\/rest\/v1\/Order\/\{ServiceOrderID\}$/.test(p))!;
    const header = doc.paths[path]!.delete!.parameters!.find(
      (p) => p.in === 'header' && p.name.toLowerCase() === 'idempotency-key',
    );
    expect(header?.schema?.maxLength).toBe(255);
  });

  describe('concurrency', () => {
    it('ok/8 concurrent cancels with one key all answer the same success; one refund, one order.cancelled event', async () => {
      for (let round = 0; round < 3; round++) {
        const id = await place();
        const key = randomUUID();
        const results = await Promise.all(Array.from({ length: 8 }, () => cancel(id, key)));
        for (const r of results) {
          expect(r.statusCode, r.body).toBe(200);
          expect(r.json()).toEqual({ success: true, Message: 'The order was cancelled and refunded.' });
        }
        expect(results.filter((r) => r.headers['idempotent-replayed'] === undefined)).toHaveLength(1);
        expect(await refunds(id)).toBe(1);
        expect(await cancelEvents(id)).toBe(1);
        expect((await certificates(id)).every((x) => x.revoked_at !== null)).toBe(true);
      }
    }, 60_000);

    it('ok/8 concurrent cancels with different keys: one succeeds, the others are refused; one refund', async () => {
      for (let round = 0; round < 3; round++) {
        const id = await place();
        const keys = Array.from({ length: 8 }, (_, i) => `race-${round}-${i}`);
        const results = await Promise.all(keys.map((k) => cancel(id, k)));
        const ok = results.filter((r) => r.statusCode === 200);
        expect(ok).toHaveLength(1);
        for (const r of results.filter((x) => x.statusCode !== 200)) {
          expect(r.statusCode).toBe(409);
          expect(r.json()).toMatchObject({ success: false, ErrorId: -2011, ErrorField: 'ServiceOrderID' });
        }
        const winner = keys[results.indexOf(ok[0]!)];
        expect((await order(id)).cancel_key).toBe(winner);
        expect(await refunds(id)).toBe(1);
        expect(await cancelEvents(id)).toBe(1);
      }
    }, 60_000);
  });
});
