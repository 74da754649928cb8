// The issuance claim, actor by actor (see IssuanceRounds.issue): who may sign an order's round, who
// waits, who takes over, and what happens to a certificate signed under a claim that was lost.
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { IssuanceClaimLost, type Issuer } from '../src/ca/index.js';
import { holderHost, orderId, type CustomerId, type OrderId } from '../src/core/index.js';
import { ISSUANCE_CLAIM_SECONDS, OrderFlow } from '../src/ra/issuance/order-flow.js';
import { Reconciliation } from '../src/ra/issuance/reconciliation.js';
import {
  AuditRepo,
  CaRepo,
  JobsRepo,
  MailRepo,
  OrderCertificatesRepo,
  OrderNamesRepo,
  OrdersRepo,
  inTransaction,
  type Db,
} from '../src/storage/index.js';
import { DcvResolver } from '../src/validation/index.js';
import { createTestContext, type TestContext, type TestCustomer } from './support/app.js';
import { testCsr } from './support/csr.js';
import { testDialects, waitUntilBlockedBy } from './support/databases.js';
import { signForOrder } from './support/stray-certificates.js';
import { startDnsServer, type TestDnsServer } from './support/dns-server.js';

const contact = { FirstName: 'Ada', LastName: 'Lovelace', Phone: '+49 30 1234567', Email: 'ada@certdesk-test.com' };
const dir = mkdtempSync(join(tmpdir(), 'issuance-claim-'));

/** A process id that certainly belongs to no process: a child that has already exited. */
function deadPid(): number {
  const r = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  return Number(r.stdout);
}

describe.each(testDialects())('the issuance claim on $dialect', (dialect) => {
  let t: TestContext;
  let c: TestCustomer;
  let dns: TestDnsServer;
  let db: Db;
  let orders: OrdersRepo;

  /** An OrderFlow of its own (another actor, as a second process would be), optionally over a CA seam. */
  const flow = (ca: Pick<Issuer, 'issue' | 'revoke'> = t.services.ca, holder?: string, blockedNames?: string[]) => {
    const repos = (d: Db) => ({
      orders: new OrdersRepo(d),
      orderCertificates: new OrderCertificatesRepo(d),
      orderNames: new OrderNamesRepo(d),
      audit: new AuditRepo(d),
      jobs: new JobsRepo(d),
      mail: new MailRepo(d),
    });
    return new OrderFlow({
      ...repos(db),
      catalog: t.services.catalog,
      clock: t.clock,
      ca,
      resolver: new DcvResolver({ servers: [dns.address] }),
      file: { httpPort: 9, allowPrivate: true },
      transact: (fn, options) => inTransaction(db, (tx) => fn(repos(tx)), options),
      ...(holder === undefined ? {} : { holder }),
      ...(blockedNames === undefined ? {} : { blockedNames }),
    });
  };
  /** An order placed without its proof, then shown valid: waiting in WF_ISSUANCE, nobody holding it. */
  const waitingForIssuance = async () => {
    const res = await t.call(c.token, {
      method: 'POST',
      url: '/rest/v1/Order',
      payload: {
        OrderParameters: { ProductCode: 'TrustPoint.DV', ValidityPeriod: 12, CSR: testCsr().pem, DVAuthMethod: 'DNS' },
        AdminContact: contact,
        TechContact: contact,
      },
    });
    expect(res.statusCode, res.body).toBe(200);
    const id = orderId(res.json().ServiceOrderID as number);
    await db.kysely
      .updateTable('order_names')
      .set({ status: 'VALIDATED', validated_at: t.clock.nowSeconds() })
      .where('order_id', '=', id)
      .execute();
    const { version } = (await new OrderNamesRepo(db).proofState(id))!;
    expect(
      await orders.markAwaitingIssuance(id, { major: 'PENDING', minor: 'WF_DNS_AUTH', version }, t.clock.nowSeconds()),
    ).toBe(true);
    return (await orders.byId(id))!;
  };
  /** Signs and records a certificate for `order` outside its issuance round (as a holder would, under `claim`). */
  const signFor = (order: { id: OrderId; customerId: CustomerId }, claim?: string) =>
    signForOrder(t.services, order, claim === undefined ? {} : { claim });
  const certificatesOf = (id: number) =>
    db.kysely
      .selectFrom('certificates')
      .select(['serial', 'revoked_at', 'revocation_reason', 'delivered_at'])
      .where('order_id', '=', id)
      .orderBy('id')
      .execute();
  const signings = async (id: number) =>
    (
      await db.kysely.selectFrom('audit_events').select('details').where('action', '=', 'ca.sign.begin').execute()
    ).filter((e) => (JSON.parse(e.details ?? '{}') as { orderId?: number }).orderId === id).length;

  beforeAll(async () => {
    dns = await startDnsServer();
    dns.set('certdesk-test.com', [{ type: 'A', address: '127.0.0.1' }]);
    t = await createTestContext(dialect, { CERTDESK_DNS_SERVERS: dns.address, CERTDESK_RATE_LIMIT: '1000000' });
    await t.services.ca.init({ rsaRootBits: 2048, rsaIntermediateBits: 2048 });
    c = await t.customer({ creditLimit: 1_000_000 });
    db = t.db;
    orders = new OrdersRepo(db);
  }, 120_000);
  afterAll(async () => {
    await t.close();
    await dns.close();
  });
  beforeEach(() => {
    t.clock.set(1795219200);
  });

  it('ok/eight actors at once: exactly one signs, the others find the round held or done', async () => {
    const order = await waitingForIssuance();
    const actors = Array.from({ length: 8 }, () => flow());
    const outcomes = await Promise.all(actors.map((a) => a.issue(order)));
    expect(outcomes).toContain('done');
    expect(await signings(order.id)).toBe(1);
    const certs = await certificatesOf(order.id);
    expect(certs).toHaveLength(1);
    expect(certs[0]).toMatchObject({ revoked_at: null, delivered_at: expect.any(Number) });
    expect(await orders.byId(order.id)).toMatchObject({ majorStatus: 'COMPLETE', issuanceClaim: null });
  });

  it('fail/an order awaiting issuance with a name not shown (however it got there): the holder signs nothing and gives the claim back', async () => {
    const order = await waitingForIssuance();
    await db.kysely
      .updateTable('order_names')
      .set({ status: 'PENDING', validated_at: null })
      .where('order_id', '=', order.id)
      .where('name', '=', 'certdesk-test.com')
      .execute();
    await expect(flow().issue(order)).rejects.toThrow(/names not shown \(certdesk-test\.com\): not signed/);
    expect(await signings(order.id)).toBe(0);
    expect(await certificatesOf(order.id)).toEqual([]);
    expect(await orders.byId(order.id)).toMatchObject({ minorStatus: 'WF_ISSUANCE', issuanceClaim: null });
  });

  it('fail/a name blocked after the order was placed: the round is not signed, the order FAILED/REJECTED naming it, the charge refunded', async () => {
    const order = await waitingForIssuance();
    const charged = await t.call(c.token, { method: 'GET', url: '/rest/v1/Limit' });
    const usedBefore = charged.json().LimitInfo.Used as number;
    expect(await flow(t.services.ca, undefined, ['certdesk-test.com']).issue(order)).toBe('done');
    expect(await signings(order.id)).toBe(0);
    expect(await certificatesOf(order.id)).toEqual([]);
    const failed = (await t.call(c.token, { method: 'GET', url: `/rest/v1/Order/${order.id}` })).json().OrderInfo;
    expect(failed.OrderStatus).toMatchObject({ MajorStatus: 'FAILED', MinorStatus: 'REJECTED' });
    const after = (await t.call(c.token, { method: 'GET', url: '/rest/v1/Limit' })).json().LimitInfo.Used as number;
    expect(after).toBeLessThan(usedBefore);
  });

  it('fail/a live holder keeps the round: another actor waits, and takes over only once the claim has lapsed', async () => {
    const order = await waitingForIssuance();
    // A live holder (this very process) claimed and has not finished.
    expect(
      await orders.claimIssuance(
        order.id,
        'PENDING',
        `${holderHost}:${process.pid}:live/1`,
        t.clock.nowSeconds(),
        t.clock.nowSeconds() + ISSUANCE_CLAIM_SECONDS,
      ),
    ).toBe(true);
    expect(await flow().issue(order)).toBe('held');
    expect(await certificatesOf(order.id)).toEqual([]);
    t.clock.advance(ISSUANCE_CLAIM_SECONDS + 1);
    expect(await flow().issue(order)).toBe('done');
    expect((await certificatesOf(order.id)).filter((x) => x.revoked_at === null)).toHaveLength(1);
    expect((await orders.byId(order.id))?.majorStatus).toBe('COMPLETE');
  });

  it('ok/a round claimed with its order (POST /Order inline): every other actor finds it held; the holder signs once, without reading the order back', async () => {
    const order = await waitingForIssuance();
    const holder = flow();
    // What POST /Order does in the order's own transaction: the claim is stored with the order.
    const { claim, until } = holder.newClaim();
    expect(until).toBe(t.clock.nowSeconds() + ISSUANCE_CLAIM_SECONDS);
    expect(await orders.claimIssuance(order.id, 'PENDING', claim, t.clock.nowSeconds(), until)).toBe(true);
    const stored = (await orders.byId(order.id))!;
    // The worker's job and a second process, between the commit and the signing.
    expect(await Promise.all([flow().issue(stored), flow().issue(stored)])).toEqual(['held', 'held']);
    expect(await signings(order.id)).toBe(0);
    const names = (await new OrderNamesRepo(db).names([order.id])).map((n) => n.name);
    const done = await holder.issueClaimed(stored, names, claim);
    expect(done?.order).toMatchObject({ id: order.id, majorStatus: 'COMPLETE', issuanceClaim: null });
    expect(done?.order).toEqual(await orders.byId(order.id));
    expect(await signings(order.id)).toBe(1);
    const certs = await certificatesOf(order.id);
    expect(certs).toEqual([
      expect.objectContaining({ serial: done?.certificate?.serial, delivered_at: expect.any(Number) }),
    ]);
    // Called again with the spent claim (no caller does: each request stores its own order), the
    // CA's record-time check fences it: that signature is recorded revoked and delivers nothing.
    expect(await holder.issueClaimed(stored, names, claim)).toBeUndefined();
    expect(await signings(order.id)).toBe(2);
    expect(await certificatesOf(order.id)).toEqual([
      expect.objectContaining({ serial: done?.certificate?.serial, revoked_at: null }),
      expect.objectContaining({ revoked_at: expect.any(Number), delivered_at: null }),
    ]);
    expect(await new OrderCertificatesRepo(db).orphanCertificates(100)).toEqual([]);
  });

  it('ok/a POST /Order whose process died after storing the order with its claim: the job takes the round over at once', async () => {
    const order = await waitingForIssuance();
    const dead = flow(t.services.ca, `${holderHost}:${deadPid()}:gone`);
    const { claim, until } = dead.newClaim();
    expect(await orders.claimIssuance(order.id, 'PENDING', claim, t.clock.nowSeconds(), until)).toBe(true);
    expect(await flow().issue((await orders.byId(order.id))!)).toBe('done');
    expect(await signings(order.id)).toBe(1);
    expect((await certificatesOf(order.id)).filter((x) => x.revoked_at === null)).toHaveLength(1);
    expect((await orders.byId(order.id))?.majorStatus).toBe('COMPLETE');
  });

  it('ok/a holder that died after recording its certificate: the next actor takes over at once and delivers that certificate, signing nothing', async () => {
    const order = await waitingForIssuance();
    const dead = `${holderHost}:${deadPid()}:gone`;
    const claim = `${dead}/1`;
    expect(
      await orders.claimIssuance(
        order.id,
        'PENDING',
        claim,
        t.clock.nowSeconds(),
        t.clock.nowSeconds() + ISSUANCE_CLAIM_SECONDS,
      ),
    ).toBe(true);
    // What the dead holder did before it died: signed under its claim, recorded.
    const signed = await signFor(order, claim);
    expect(await new OrderCertificatesRepo(db).orphanCertificates(100)).toEqual([]);
    expect(await flow().issue(order)).toBe('done');
    expect(await signings(order.id)).toBe(1);
    expect(await certificatesOf(order.id)).toEqual([
      expect.objectContaining({ serial: signed.serial, revoked_at: null, delivered_at: expect.any(Number) }),
    ]);
  });

  it("ok/a certificate signed and not yet delivered is not yet the order's own: GET /Order shows the delivered one, and revoking that revokes the order", async () => {
    const order = await waitingForIssuance();
    expect(await flow().issue(order)).toBe('done');
    const [first] = await certificatesOf(order.id);
    const delivered = (await t.services.ca.fulfillment(first!.serial))!.certificate;
    // A newer certificate of the order, signed and recorded, that no round has delivered (a reissue
    // round between signing and completing, or one that died there). The order is read only now:
    // no view of it is cached from before.
    const undelivered = await signFor(order);
    try {
      expect(undelivered.serial).not.toBe(first!.serial);
      const shown = (
        await t.call(c.token, { method: 'GET', url: `/rest/v1/Order/${order.id}?includeFulfillment=true` })
      ).json().OrderInfo as { Fulfillment?: { Certificate?: string } };
      expect(shown.Fulfillment?.Certificate).toBe(delivered);

      const res = await t.call(c.token, {
        method: 'DELETE',
        url: `/rest/v1/Revoke/${order.id}`,
        payload: { RevokeReason: 'keyCompromise', Certificate: delivered },
      });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toMatchObject({ success: true });
      expect((await orders.byId(order.id))?.majorStatus).toBe('REVOKED');
    } finally {
      // The undelivered one is what the reconciliation would revoke; revoked here, so that the
      // reconciliation tests below find only their own.
      await t.services.ca.revoke(undelivered.serial, 'superseded', { actor: 'test' });
    }
  });

  // Two connections are needed to interleave them: SQLite has one, its transactions run one after another.
  it.runIf(dialect.dialect === 'postgres')(
    'race/a reissue starting while the round before it records a certificate: the new round can never adopt that certificate',
    async () => {
      const order = await waitingForIssuance();
      expect(await flow().issue(order)).toBe('done');
      const [first] = await certificatesOf(order.id);
      const raw = new pg.Client({ connectionString: db.url });
      await raw.connect();
      const lateSerial = `7E${randomBytes(15).toString('hex').toUpperCase()}`;
      try {
        if (db.schema !== undefined) await raw.query(`SET search_path TO "${db.schema}"`);
        // The CA recording a certificate for the order, paused between its two steps: the
        // order's row held (as recordLeavesUnderClaims holds it), the certificate not yet written.
        await raw.query('BEGIN');
        await raw.query('UPDATE orders SET issuance_claim = issuance_claim WHERE id = $1', [order.id]);
        const rawPid = Number((await raw.query('SELECT pg_backend_pid() AS pid')).rows[0].pid);
        const reissuing = t.call(c.token, {
          method: 'POST',
          url: '/rest/v1/Reissue',
          payload: { ServiceOrderID: order.id },
        });
        await waitUntilBlockedBy(db, rawPid);
        const late = await raw.query<{ id: number }>(
          `INSERT INTO certificates (order_id, customer_id, issuer_id, key_id, serial, pem, chain_pem, pkcs7_pem,
             not_before, not_after, created_at, chain_ids, profile)
           SELECT order_id, customer_id, issuer_id, key_id, $2, pem, chain_pem, pkcs7_pem,
             not_before, not_after, created_at, chain_ids, profile FROM certificates WHERE serial = $1
           RETURNING id`,
          [first!.serial, lateSerial],
        );
        await raw.query('COMMIT');
        const res = await reissuing;
        expect(res.statusCode, res.body).toBe(200);
        // The new round's boundary is at or past the late certificate: it is not the round's to adopt.
        const round = (await orders.byId(order.id))!;
        expect(Number(round.reissueBaseCert)).toBe(Number(late.rows[0]!.id));
        expect(
          await new OrderCertificatesRepo(db).adoptableCertificate(order.id, round.reissueBaseCert),
        ).toBeUndefined();
      } finally {
        await raw.query('ROLLBACK').catch(() => undefined);
        await raw.end();
        if ((await certificatesOf(order.id)).some((x) => x.serial === lateSerial && x.revoked_at === null))
          await t.services.ca.revoke(lateSerial, 'superseded', { actor: 'test' });
      }
    },
    30_000,
  );
  if (dialect.dialect === 'sqlite')
    console.warn('the reissue boundary race and the claim lock race are not run on SQLite: one connection');

  it.runIf(dialect.dialect === 'postgres')(
    'race/the claims the CA checked stay held until its certificates are recorded: a takeover waits for that commit',
    async () => {
      const order = await waitingForIssuance();
      const now = t.clock.nowSeconds();
      const holding = `${holderHost}:${process.pid}:recording/1`;
      expect(await orders.claimIssuance(order.id, 'PENDING', holding, now, now + 60)).toBe(true);
      let locked!: (pid: number) => void;
      const lockedBy = new Promise<number>((resolve) => (locked = resolve));
      let record!: () => void;
      const recorded = new Promise<void>((resolve) => (record = resolve));
      // The CA's recording transaction, paused between its check of the claims and its commit.
      const recording = inTransaction(db, async (tx) => {
        const held = await new CaRepo(tx).lockIssuanceClaims([order.id]);
        locked((await sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`.execute(tx.kysely)).rows[0]!.pid);
        await recorded;
        return held;
      });
      try {
        const pid = await lockedBy;
        const takeover = orders.takeOverIssuance(order.id, holding, `${holding}-taken`, now + 60);
        await waitUntilBlockedBy(db, pid);
        record();
        expect((await recording).get(order.id)).toBe(holding);
        expect(await takeover).toBe(true);
        await orders.releaseIssuance(order.id, `${holding}-taken`);
      } finally {
        record();
        await recording.catch(() => undefined);
      }
    },
    45_000,
  );

  it('fail/a holder that stalled past its claim: its certificate is recorded revoked, it delivers nothing, the CRL lists it at once', async () => {
    const order = await waitingForIssuance();
    const stale = `${holderHost}:${process.pid}:stalled/1`;
    expect(await orders.claimIssuance(order.id, 'PENDING', stale, t.clock.nowSeconds(), t.clock.nowSeconds() + 1)).toBe(
      true,
    );
    t.clock.advance(2);
    // Another actor takes the lapsed claim over and finishes the round.
    expect(await flow().issue(order)).toBe('done');
    // The stalled holder wakes up and signs under the claim it no longer holds.
    const late = signFor(order, stale);
    await expect(late).rejects.toBeInstanceOf(IssuanceClaimLost);
    const certs = await certificatesOf(order.id);
    expect(certs).toHaveLength(2);
    expect(certs.filter((x) => x.revoked_at === null)).toEqual([
      expect.objectContaining({ delivered_at: expect.any(Number) }),
    ]);
    const discarded = certs.find((x) => x.revoked_at !== null)!;
    expect(discarded).toMatchObject({ revocation_reason: 4, delivered_at: null });
    const keyId = t.services.ca.chain('TrustPoint', 'SHA256-FULL-CHAIN').issuerId;
    writeFileSync(join(dir, 'crl.der'), (await t.services.ca.crl(keyId))!);
    const text = spawnSync('openssl', ['crl', '-inform', 'DER', '-in', join(dir, 'crl.der'), '-noout', '-text'], {
      encoding: 'utf8',
    }).stdout;
    expect(text).toContain(`Serial Number: ${discarded.serial}`);
    expect(await new OrderCertificatesRepo(db).orphanCertificates(100)).toEqual([]);
  });

  it('ok/a holder that stalled after recording its certificate, whose round another actor completed with it: nothing is revoked', async () => {
    const order = await waitingForIssuance();
    // The first holder's CA records the certificate, then the holder stalls past its claim; meanwhile the
    // worker takes the lapsed claim over, adopts that certificate and completes the order with it.
    const stalling: Pick<Issuer, 'issue' | 'revoke'> = {
      issue: async (req) => {
        const issued = await t.services.ca.issue(req);
        t.clock.advance(ISSUANCE_CLAIM_SECONDS + 1);
        expect(await flow().issue((await orders.byId(order.id))!)).toBe('done');
        return issued;
      },
      revoke: (serial, reason, o) => t.services.ca.revoke(serial, reason, o),
    };
    expect(await flow(stalling).issue(order)).toBe('done');
    expect(await signings(order.id)).toBe(1);
    expect(await certificatesOf(order.id)).toEqual([
      expect.objectContaining({ revoked_at: null, delivered_at: expect.any(Number) }),
    ]);
    expect(await orders.byId(order.id)).toMatchObject({ majorStatus: 'COMPLETE', issuanceClaim: null });
  });

  it('fail/an order cancelled while its certificate is being signed: the completion is refused and the certificate revoked', async () => {
    const order = await waitingForIssuance();
    const ca = t.services.ca;
    // Our own seam: the CA signs, and before it answers the customer cancels the order.
    const cancelling: Pick<Issuer, 'issue' | 'revoke'> = {
      issue: async (req) => {
        const issued = await ca.issue(req);
        const res = await t.call(c.token, { method: 'DELETE', url: `/rest/v1/Order/${order.id}` });
        expect(res.statusCode, res.body).toBe(200);
        return issued;
      },
      revoke: (serial, reason, options) => ca.revoke(serial, reason, options),
    };
    expect(await flow(cancelling).issue(order)).toBe('done');
    expect((await orders.byId(order.id))?.majorStatus).toBe('CANCELLED');
    expect(await certificatesOf(order.id)).toEqual([
      expect.objectContaining({ revocation_reason: 5, delivered_at: null }),
    ]);
    expect(await new OrderCertificatesRepo(db).orphanCertificates(100)).toEqual([]);
  });

  it('ok/the reconciliation finds a certificate no issuance delivered, and revokes it', async () => {
    const order = await waitingForIssuance();
    expect(await flow().issue(order)).toBe('done');
    // A twin, as the double signing of before made them: signed for the order outside any claim.
    const twin = await signFor(order);
    const reconciliation = new Reconciliation({
      orderCertificates: new OrderCertificatesRepo(db),
      ca: t.services.ca,
      audit: new AuditRepo(db),
      clock: t.clock,
    });
    expect((await reconciliation.orphans()).map((o) => o.serial)).toEqual([twin.serial]);
    expect((await reconciliation.revokeOrphans('operator')).map((o) => [o.serial, o.orderId])).toEqual([
      [twin.serial, order.id],
    ]);
    expect(await reconciliation.orphans()).toEqual([]);
    const certs = await certificatesOf(order.id);
    expect(certs.filter((x) => x.revoked_at === null)).toEqual([
      expect.objectContaining({ delivered_at: expect.any(Number) }),
    ]);
    expect(certs.find((x) => x.serial === twin.serial)).toMatchObject({ revocation_reason: 4 });
  });
});
