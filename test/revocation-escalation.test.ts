import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestContext, TestCustomer } from './support/app.js';
import { testDialects, waitUntilBlockedBy } from './support/databases.js';
import { dnsOrderBody, issuingContext, type IssuingContext } from './support/issuing-context.js';
import { ocspStatus } from './support/openssl-checks.js';
import { allowCrlWrites, refuseCrlWrites } from './support/refusals.js';

const dir = mkdtempSync(join(tmpdir(), 'escalation-'));
const ISSUER = 'trustpoint-rsa-int-1';

describe.each(testDialects())('revocation reasons on $dialect', (dialect) => {
  let t: TestContext;
  let c: TestCustomer;

  let context: IssuingContext;

  beforeAll(async () => {
    context = await issuingContext(dialect, 'Escalation');
    ({ t, c } = context);
  }, 120_000);
  afterAll(async () => context.close());

  /** An order issued at once (the DNS proof is in place). */
  const place = async () => {
    const res = await t.call(c.token, {
      method: 'POST',
      url: '/rest/v1/Order',
      payload: dnsOrderBody(),
    });
    expect(res.statusCode, res.body).toBe(200);
    const placed = res.json() as { ServiceOrderID: number; Fulfillment: { Certificate: string; Intermediate: string } };
    const serial = (
      await t.db.kysely
        .selectFrom('certificates')
        .select('serial')
        .where('order_id', '=', placed.ServiceOrderID)
        .executeTakeFirstOrThrow()
    ).serial;
    return {
      id: placed.ServiceOrderID,
      certificate: placed.Fulfillment.Certificate,
      intermediate: placed.Fulfillment.Intermediate,
      serial,
    };
  };
  const revoke = (o: { id: number; certificate: string }, reason: string, token = c.token) =>
    t.call(token, {
      method: 'DELETE',
      url: `/rest/v1/Revoke/${o.id}`,
      payload: { RevokeReason: reason, Certificate: o.certificate },
    });
  const row = (serial: string) =>
    t.db.kysely
      .selectFrom('certificates')
      .select(['revoked_at', 'revocation_reason'])
      .where('serial', '=', serial)
      .executeTakeFirstOrThrow();
  const orderEvents = async (id: number) =>
    (
      await t.db.kysely
        .selectFrom('audit_events')
        .select('action')
        .where('subject', '=', String(id))
        .orderBy('id')
        .execute()
    ).map((e) => e.action);
  const caEvents = async (serial: string) =>
    (
      await t.db.kysely
        .selectFrom('audit_events')
        .select('action')
        .where('subject', '=', serial)
        .where('action', 'like', 'ca.revoke.%')
        .orderBy('id')
        .execute()
    ).map((e) => e.action);
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
  const storedCrl = async () =>
    await t.db.kysely
      .selectFrom('ca_crls')
      .select(['number', 'der'])
      .where('key_id', '=', ISSUER)
      .executeTakeFirstOrThrow();
  /** `openssl crl -inform DER -text` of the CRL as served, and the entry of one serial in it. */
  const crlEntry = async (serial: string) => {
    writeFileSync(join(dir, 'c.crl'), (await t.services.ca.crl(ISSUER))!);
    const text = spawnSync('openssl', ['crl', '-inform', 'DER', '-noout', '-text', '-in', join(dir, 'c.crl')], {
      encoding: 'utf8',
    }).stdout;
    const entry = new RegExp(
      `Serial Number: ${serial}\\s*\\n\\s*Revocation Date: ([^\\n]*)\\n(?:\\s*CRL entry extensions:\\s*\\n\\s*X509v3 CRL Reason Code:\\s*\\n\\s*([^\\n]*))?`,
    ).exec(text);
    return { date: entry?.[1]?.trim(), reason: entry?.[2]?.trim() };
  };
  /** The responder's answer for a certificate, verified by `openssl ocsp`. */
  const ocsp = (o: { certificate: string; intermediate: string }) => ocspStatus(t.services.ca, o, t.clock.nowSeconds());
  const later = async <T>(seconds: number, fn: () => Promise<T>): Promise<T> => {
    const saved = t.clock.nowSeconds();
    t.clock.set(saved + seconds);
    try {
      return await fn();
    } finally {
      t.clock.set(saved);
    }
  };

  describe('DELETE /Revoke/{id} of a revoked certificate', () => {
    it('ok/superseded, then keyCompromise: the reason changes in the database, the CRL and OCSP at once; the revocation date stays; one audit event more', async () => {
      const o = await place();
      expect((await revoke(o, 'superseded')).json()).toMatchObject({
        success: true,
        Message: expect.stringMatching(/superseded/),
      });
      const first = await row(o.serial);
      expect(first.revocation_reason).toBe(4);
      expect((await crlEntry(o.serial)).reason).toBe('Superseded');
      // Answered (and cached) before the escalation: the escalation must drop that answer.
      expect(await ocsp(o)).toMatch(/o-leaf\.pem: revoked[^]*Reason: superseded/);
      const firstDate = (await crlEntry(o.serial)).date;
      const before = await orderEvents(o.id);
      const crlBefore = (await storedCrl()).number;

      const res = await later(3600, () => revoke(o, 'The private key was leaked'));
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toMatchObject({
        success: true,
        Message: expect.stringMatching(/changed from superseded to keyCompromise/),
      });
      expect(await row(o.serial)).toEqual({ revoked_at: first.revoked_at, revocation_reason: 1 });
      expect((await storedCrl()).number).toBeGreaterThan(crlBefore);
      expect(await crlEntry(o.serial)).toEqual({ date: firstDate, reason: 'Key Compromise' });
      const status = await ocsp(o);
      expect(status).toContain('Response verify OK');
      expect(status).toMatch(/o-leaf\.pem: revoked[^]*Reason: keyCompromise/);
      expect(await orderEvents(o.id)).toEqual([...before, 'order.revocation-escalated']);
      expect(await caEvents(o.serial)).toEqual([
        'ca.revoke.begin',
        'ca.revoke.done',
        'ca.revoke.begin',
        'ca.revoke.done',
      ]);
      const order = (await t.call(c.token, { method: 'GET', url: `/rest/v1/Order/${o.id}` })).json().OrderInfo;
      expect(order.OrderStatus.MajorStatus).toBe('REVOKED');
    });

    it('ok/a revocation without a reason (no reasonCode) can also become keyCompromise', async () => {
      const o = await place();
      expect((await revoke(o, 'whatever')).json()).toMatchObject({
        success: true,
        Message: expect.stringMatching(/unspecified/),
      });
      expect((await row(o.serial)).revocation_reason).toBeNull();
      expect((await revoke(o, 'keyCompromise')).json()).toMatchObject({
        success: true,
        Message: expect.stringMatching(/from unspecified to keyCompromise/),
      });
      expect((await row(o.serial)).revocation_reason).toBe(1);
      expect((await crlEntry(o.serial)).reason).toBe('Key Compromise');
    });

    it.each([
      ['keyCompromise, then superseded', 'key compromise', 'superseded', /already revoked for keyCompromise/],
      ['keyCompromise twice', 'keyCompromise', 'stolen key', /already revoked for keyCompromise/],
      [
        'superseded twice',
        'superseded',
        'superseded',
        /already revoked \(superseded.*only be changed to keyCompromise/,
      ],
      ['superseded, then cessationOfOperation', 'superseded', 'no longer needed', /already revoked \(superseded/],
    ])(
      'fail/%s: 409 -2011 on Certificate; nothing changes (row, CRL, OCSP, audit, mail)',
      async (_case, firstReason, again, message) => {
        const o = await place();
        expect((await revoke(o, firstReason)).statusCode).toBe(200);
        const stored = await row(o.serial);
        const crl = await storedCrl();
        const status = await ocsp(o);
        const events = await allEvents();
        const sent = await mails(o.id);

        const res = await later(60, () => revoke(o, again));
        expect(res.statusCode).toBe(409);
        expect(res.json()).toMatchObject({
          success: false,
          ErrorId: -2011,
          ErrorField: 'Certificate',
          Message: expect.stringMatching(message),
        });
        expect(await row(o.serial)).toEqual(stored);
        expect(await storedCrl()).toEqual(crl);
        expect(await ocsp(o)).toBe(status);
        expect(await allEvents()).toBe(events);
        expect(await mails(o.id)).toBe(sent);
      },
    );

    it('fail/another customer cannot revoke or escalate: 404, nothing changes', async () => {
      const o = await place();
      const other = await t.customer({ name: 'Escalation other' });
      const first = await revoke(o, 'keyCompromise', other.token);
      expect(first.statusCode).toBe(404);
      expect(first.json()).toMatchObject({ success: false, ErrorId: -2011 });
      expect(await row(o.serial)).toEqual({ revoked_at: null, revocation_reason: null });
      await revoke(o, 'superseded');
      const stored = await row(o.serial);
      const events = await allEvents();
      expect((await revoke(o, 'keyCompromise', other.token)).statusCode).toBe(404);
      expect(await row(o.serial)).toEqual(stored);
      expect(await allEvents()).toBe(events);
    });
  });

  it('ok/the CRL cannot be signed: DELETE /Revoke still answers 200 (revocation and record committed), OCSP says revoked, the job re-signs the CRL', async () => {
    const o = await place();
    await t.services.ca.crl(ISSUER); // one stored, whatever ran before
    const before = (await storedCrl()).number;
    await refuseCrlWrites(t.db);
    let res;
    try {
      res = await revoke(o, 'keyCompromise');
    } finally {
      await allowCrlWrites(t.db);
    }
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({
      success: true,
      Message: expect.stringMatching(/was revoked \(keyCompromise\)/),
    });
    expect(await row(o.serial)).toMatchObject({ revocation_reason: 1 });
    expect(await orderEvents(o.id)).toContain('order.revoked');
    expect(await ocsp(o)).toMatch(/o-leaf\.pem: revoked/);
    expect((await storedCrl()).number).toBe(before);
    expect(await t.services.ca.refreshDueCrls()).toContain(ISSUER);
    expect((await crlEntry(o.serial)).reason).toBe('Key Compromise');
    const done = await t.db.kysely
      .selectFrom('audit_events')
      .select('details')
      .where('subject', '=', o.serial)
      .where('action', '=', 'ca.revoke.done')
      .executeTakeFirstOrThrow();
    expect(String(done.details)).toMatch(/crl refused/);
  });

  describe('lock order', () => {
    // Deadlocks need two connections: SQLite has one, and its transactions run one after another.
    it.runIf(dialect.dialect === 'postgres')(
      'ok/a revocation takes the order row before the certificate row, as an issuance completion does: the two never deadlock',
      async () => {
        const o = await place();
        const raw = new pg.Client({ connectionString: t.db.url });
        await raw.connect();
        try {
          if (t.db.schema !== undefined) await raw.query(`SET search_path TO "${t.db.schema}"`);
          // A completion's first two steps, paused between them: the order's row, then its certificate's.
          await raw.query('BEGIN');
          await raw.query('UPDATE orders SET update_date = update_date WHERE id = $1', [o.id]);
          const rawPid = Number((await raw.query('SELECT pg_backend_pid() AS pid')).rows[0].pid);
          const revoking = revoke(o, 'superseded');
          // Wait until the revocation waits for the order's row.
          await waitUntilBlockedBy(t.db, rawPid);
          // Its certificate is not locked yet: the completion goes on and commits.
          await raw.query('UPDATE certificates SET delivered_at = delivered_at WHERE serial = $1', [o.serial]);
          await raw.query('COMMIT');
          const res = await revoking;
          expect(res.statusCode, res.body).toBe(200);
          expect((await row(o.serial)).revocation_reason).toBe(4);
        } finally {
          await raw.end();
        }
      },
      30_000,
    );
    if (dialect.dialect === 'sqlite') console.warn('lock order test not run on SQLite: one connection, no deadlock');
  });

  describe('concurrency', () => {
    it('ok/8 concurrent escalations: exactly one succeeds, the others get 409 -2011; one audit event, one new CRL', async () => {
      const o = await place();
      await revoke(o, 'superseded');
      const first = await row(o.serial);
      const before = await orderEvents(o.id);
      const crlBefore = (await storedCrl()).number;
      const results = await Promise.all(Array.from({ length: 8 }, () => revoke(o, 'keyCompromise')));
      const codes = results.map((r) => r.statusCode).sort();
      expect(codes).toEqual([200, 409, 409, 409, 409, 409, 409, 409]);
      for (const r of results.filter((x) => x.statusCode === 409))
        expect(r.json()).toMatchObject({ ErrorId: -2011, ErrorField: 'Certificate' });
      expect(await row(o.serial)).toEqual({ revoked_at: first.revoked_at, revocation_reason: 1 });
      expect(await orderEvents(o.id)).toEqual([...before, 'order.revocation-escalated']);
      expect(await caEvents(o.serial)).toEqual([
        'ca.revoke.begin',
        'ca.revoke.done',
        'ca.revoke.begin',
        'ca.revoke.done',
      ]);
      expect((await storedCrl()).number).toBe(crlBefore + 1);
      expect((await crlEntry(o.serial)).reason).toBe('Key Compromise');
    }, 30_000);

    it('ok/a first revocation racing an escalation always ends in keyCompromise with one date', async () => {
      for (let round = 0; round < 3; round++) {
        const o = await place();
        const [a, b] = await Promise.all([revoke(o, 'superseded'), revoke(o, 'keyCompromise')]);
        expect(b.statusCode, b.body).toBe(200);
        // superseded either came first (then keyCompromise raised it) or second (then it was refused).
        expect([200, 409]).toContain(a.statusCode);
        expect((await row(o.serial)).revocation_reason).toBe(1);
        expect((await crlEntry(o.serial)).reason).toBe('Key Compromise');
      }
    }, 30_000);
  });
});
