import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDialects } from '../../test/support/databases.js';
import { money, TransactionBatch, type CustomerId, type OrderId } from '../core/index.js';
import { CustomersRepo } from './customers-repo.js';
import { inTransaction, type Db } from './database.js';
import { OrderCertificatesRepo } from './order-certificates-repo.js';
import { OrderNamesRepo } from './order-names-repo.js';
import { OrderQueriesRepo } from './order-queries-repo.js';
import { isUniqueViolation, OrdersRepo, type NewOrder } from './orders-repo.js';

describe.each(testDialects())('OrdersRepo on $dialect', ({ dialect, open }) => {
  let db: Db;
  let orders: OrdersRepo;
  let customer: CustomerId;
  let seq = 0;

  const newOrder = (over: Partial<NewOrder> = {}): NewOrder => ({
    customerId: customer,
    partnerOrderId: `p-${++seq}`,
    requestHash: 'h',
    productCode: 'TrustPoint.OV',
    soldProduct: null,
    productType: 'SSL',
    caBrand: 'TrustPoint',
    validationLevel: 'OV',
    commonName: 'www.example.com',
    sanNames: ['example.com'],
    minorStatus: 'WF_DNS_AUTH',
    dvAuthMethod: 'DNS',
    signatureHashAlgorithm: 'SHA256-FULL-CHAIN',
    validityPeriod: 12,
    serverCount: 1,
    parameters: {
      ProductCode: 'TrustPoint.OV',
      PartnerOrderID: `p-${seq}`,
      ValidityPeriod: 12,
      ServerCount: 1,
      SubjectAltNames: [],
      SubjectAltNameCount: 0,
      DVAuthMethod: 'DNS',
      SignatureHashAlgorithm: 'SHA256-FULL-CHAIN',
      InstallationService: false,
      ExpediteIssuance: false,
      IsRenewal: false,
      IsCompetitiveUpgrade: false,
      IsUpsell: false,
    },
    contacts: { AdminContact: { FirstName: 'Ada', Email: 'ada@example.com' } },
    organization: { OrganizationName: 'Example GmbH', OrganizationAddress: { Country: 'DE' } },
    csrPem: 'pem',
    csrSha256: 'sha',
    price: money(4900, 'EUR'),
    dcvValue: 'v',
    orderDate: 1000,
    ...over,
  });
  const place = async (over: Partial<NewOrder> = {}): Promise<OrderId> => (await orders.insertOrder(newOrder(over))).id;
  const claimed = async (over: Partial<NewOrder> = {}): Promise<OrderId> => {
    const id = await place({ minorStatus: 'WF_ISSUANCE', ...over });
    expect(await orders.claimIssuance(id, 'PENDING', 'holder/1', 1000, 2000)).toBe(true);
    return id;
  };

  beforeAll(async () => {
    db = await open();
    orders = new OrdersRepo(db);
    customer = (
      await new CustomersRepo(db).create(
        {
          name: 'A',
          email: 'a@example.com',
          currency: 'EUR',
          creditLimitMinor: 0,
          country: 'DE',
          locale: 'de_DE',
          timezone: 'UTC',
        },
        1,
      )
    ).id;
  });
  afterAll(async () => {
    await db.close();
  });

  it('ok/an order reads back as the domain object: closed unions, parsed request data, money with its currency', async () => {
    const id = await place();
    const order = await orders.get(customer, id);
    expect(order).toMatchObject({
      id,
      customerId: customer,
      majorStatus: 'PENDING',
      minorStatus: 'WF_DNS_AUTH',
      billingStatus: 'uncleared',
      validationLevel: 'OV',
      sanNames: ['example.com'],
      parameters: { ProductCode: 'TrustPoint.OV', PartnerOrderID: `p-${seq}` },
      contacts: { AdminContact: { Email: 'ada@example.com' } },
      organization: { OrganizationName: 'Example GmbH' },
      vetted: null,
      price: { minor: 4900, currency: 'EUR' },
      issuanceClaim: null,
      cancelRefunded: null,
    });
    expect(await new OrderNamesRepo(db).names([id])).toEqual([]);
  });

  it('ok/the CommonName filter: % is the wildcard, _ and \\ match themselves, case aside', async () => {
    const other = (
      await new CustomersRepo(db).create(
        {
          name: 'L',
          email: 'l@example.com',
          currency: 'EUR',
          creditLimitMinor: 0,
          country: 'DE',
          locale: 'de_DE',
          timezone: 'UTC',
        },
        1,
      )
    ).id;
    for (const commonName of ['www.example.com', 'wwwxexample.com', 'a_b.example.com', 'axb.example.com'])
      await place({ customerId: other, commonName });
    const names = async (pattern: string) =>
      (
        await new OrderQueriesRepo(db).list(other, {
          commonName: pattern,
          orderBy: 'CommonName',
          orderDir: 'ASC',
          offset: 0,
          limit: 10,
        })
      ).orders.map((o) => o.commonName);
    expect(await names('WWW.%')).toEqual(['www.example.com']);
    expect(await names('a_b.%')).toEqual(['a_b.example.com']);
    expect(await names('%example.com')).toHaveLength(4);
    expect(await names('a\\b%')).toEqual([]);
  });

  it('fail/a row whose status is outside its closed union is refused, not passed on', async () => {
    const id = await place();
    await db.kysely.updateTable('orders').set({ major_status: 'LIMBO' }).where('id', '=', id).execute();
    await expect(orders.byId(id)).rejects.toThrow(/major_status holds "LIMBO"/);
    await db.kysely.deleteFrom('orders').where('id', '=', id).execute();
  });

  it('ok/the vetting is recorded beside the organization and read back apart from it', async () => {
    const id = await place({ minorStatus: 'WF_ORG_VALIDATION' });
    const order = (await orders.byId(id))!;
    expect(await orders.markVetted(id, order.organization, { BusinessCategory: 'Private Organization' }, 1100)).toBe(
      true,
    );
    expect(await orders.byId(id)).toMatchObject({
      minorStatus: 'WF_ISSUANCE',
      updateDate: 1100,
      organization: { OrganizationName: 'Example GmbH', OrganizationAddress: { Country: 'DE' } },
      vetted: { BusinessCategory: 'Private Organization' },
    });
    expect((await orders.byId(id))!.organization).not.toHaveProperty('Vetted');
    // A second approval finds the order moved on: nothing is written.
    expect(await orders.markVetted(id, order.organization, { BusinessCategory: 'Government Entity' }, 1200)).toBe(
      false,
    );
    expect((await orders.byId(id))!.vetted).toEqual({ BusinessCategory: 'Private Organization' });
  });

  it.each([
    [
      'markFailed',
      (id: OrderId) => orders.markFailed(id, 'WF_ISSUANCE', 'CAA_FORBIDDEN', 'CAA', 1100),
      { majorStatus: 'FAILED', minorStatus: 'CAA_FORBIDDEN', billingStatus: 'refunded', failureReason: 'CAA' },
    ],
    [
      'markCancelled',
      (id: OrderId) => orders.markCancelled(id, { major: 'PENDING', minor: 'WF_ISSUANCE' }, true, 1100),
      { majorStatus: 'CANCELLED', minorStatus: 'CANCELLED', billingStatus: 'refunded' },
    ],
    [
      'markRevoked',
      (id: OrderId) => orders.markRevoked(id, 'PENDING', false, 1100),
      { majorStatus: 'REVOKED', minorStatus: 'REVOKED', billingStatus: 'uncleared' },
    ],
  ] as const)('ok/%s leaves WF_ISSUANCE and ends the issuance claim', async (_name, move, expected) => {
    const id = await claimed();
    expect(await move(id)).toBe(true);
    expect(await orders.byId(id)).toMatchObject({
      ...expected,
      updateDate: 1100,
      issuanceClaim: null,
      issuanceClaimUntil: null,
    });
    // Guarded: the same change again finds the order in another state and changes nothing.
    expect(await move(id)).toBe(false);
  });

  it('ok/an order stored with its issuance claim is held from its commit on; a claim only with WF_ISSUANCE', async () => {
    const stored = await orders.insertOrder(
      newOrder({ minorStatus: 'WF_ISSUANCE', issuanceClaim: { claim: 'inline/1', until: 2000 } }),
    );
    expect(stored).toMatchObject({ minorStatus: 'WF_ISSUANCE', issuanceClaim: 'inline/1', issuanceClaimUntil: 2000 });
    expect(await orders.byId(stored.id)).toEqual(stored);
    expect(await orders.claimIssuance(stored.id, 'PENDING', 'worker/1', 1000, 3000)).toBe(false);
    expect(await orders.markIssued(stored.id, 'PENDING', 'worker/1', 1100, { certNotAfter: 5000 })).toBeUndefined();
    expect(await orders.markIssued(stored.id, 'PENDING', 'inline/1', 1100, { certNotAfter: 5000 })).toMatchObject({
      majorStatus: 'COMPLETE',
      issuanceClaim: null,
    });
    await expect(
      orders.insertOrder(newOrder({ minorStatus: 'WF_DNS_AUTH', issuanceClaim: { claim: 'inline/2', until: 2000 } })),
    ).rejects.toThrow(/only with an order awaiting issuance/);
  });

  /** `tx` with each statement it runs counted by its kind (InsertQueryNode, RawNode, …). */
  const counted = (tx: Db, kinds: Map<string, number>): Db => ({
    ...tx,
    kysely: tx.kysely.withPlugin({
      transformQuery: ({ node }) => {
        kinds.set(node.kind, (kinds.get(node.kind) ?? 0) + 1);
        return node;
      },
      transformResult: async ({ result }) => result,
    }),
  });

  it('ok/orders inserted side by side in one turn of a transaction: each gets its own row, in one INSERT on PostgreSQL', async () => {
    const kinds = new Map<string, number>();
    const wanted = Array.from({ length: 6 }, (_, i) => newOrder({ commonName: `side${i}.example.com` }));
    const stored = await inTransaction(db, (tx) => {
      const repo = new OrdersRepo(counted(tx, kinds));
      return Promise.all(wanted.map((o) => repo.insertOrder(o)));
    });
    expect(stored.map((o) => [o.partnerOrderId, o.commonName])).toEqual(
      wanted.map((o) => [o.partnerOrderId, o.commonName]),
    );
    expect(new Set(stored.map((o) => o.id)).size).toBe(6);
    for (const o of stored) expect(await orders.byId(o.id)).toEqual(o);
    expect(kinds.get('InsertQueryNode')).toBe(dialect === 'postgres' ? 1 : 6);
  });

  it('fail/a PartnerOrderID twice in one turn: on PostgreSQL the gathered INSERT fails for all three, and nothing is stored', async () => {
    const twice = newOrder();
    const other = newOrder();
    let settled: PromiseSettledResult<unknown>[] = [];
    const committed = await inTransaction(db, async (tx) => {
      const repo = new OrdersRepo(tx);
      settled = await Promise.allSettled([
        repo.insertOrder(twice),
        repo.insertOrder({ ...twice }),
        repo.insertOrder(other),
      ]);
    }).then(
      () => true,
      () => false,
    );
    expect(isUniqueViolation((settled[1] as PromiseRejectedResult).reason)).toBe(true);
    if (dialect === 'postgres') {
      expect(settled.map((s) => s.status)).toEqual(['rejected', 'rejected', 'rejected']);
      // The transaction failed with its statement: its COMMIT rolls back.
      expect(committed).toBe(false);
      expect(await orders.byPartnerOrderId(customer, other.partnerOrderId)).toBeUndefined();
    } else {
      // SQLite runs them one by one: the second alone is refused.
      expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    }
  });

  it('ok/completions side by side in one turn: each as alone (first issuance or not, claim lost), in one UPDATE on PostgreSQL', async () => {
    const first = await claimed();
    const second = await claimed();
    const lost = await claimed();
    const reissue = await claimed();
    // A reissue round's completion: issued_at, term_end and the billing status stay the first issuance's.
    expect(
      await orders.markIssued(reissue, 'PENDING', 'holder/1', 1050, {
        certNotAfter: 4000,
        first: { issuedAt: 1050, termEnd: 9000 },
      }),
    ).toBeDefined();
    await db.kysely
      .updateTable('orders')
      .set({ major_status: 'REISSUE', minor_status: 'WF_ISSUANCE', issuance_claim: 'holder/2' })
      .where('id', '=', reissue)
      .execute();
    const kinds = new Map<string, number>();
    const [a, b, c, d] = await inTransaction(db, (tx) => {
      const repo = new OrdersRepo(counted(tx, kinds));
      return Promise.all([
        repo.markIssued(first, 'PENDING', 'holder/1', 1100, {
          certNotAfter: 5000,
          first: { issuedAt: 1100, termEnd: 9100 },
        }),
        repo.markIssued(second, 'PENDING', 'holder/1', 1200, {
          certNotAfter: 6000,
          first: { issuedAt: 1200, termEnd: 9200 },
        }),
        repo.markIssued(lost, 'PENDING', 'someone/else', 1300, {
          certNotAfter: 7000,
          first: { issuedAt: 1300, termEnd: 9300 },
        }),
        repo.markIssued(reissue, 'REISSUE', 'holder/2', 1400, { certNotAfter: 8000 }),
      ]);
    });
    const done = { majorStatus: 'COMPLETE', minorStatus: 'COMPLETED', issuanceClaim: null, issuanceClaimUntil: null };
    expect(a).toMatchObject({
      ...done,
      id: first,
      updateDate: 1100,
      certNotAfter: 5000,
      issuedAt: 1100,
      termEnd: 9100,
    });
    expect(b).toMatchObject({
      ...done,
      id: second,
      updateDate: 1200,
      certNotAfter: 6000,
      issuedAt: 1200,
      termEnd: 9200,
    });
    expect(c).toBeUndefined();
    expect(d).toMatchObject({
      ...done,
      id: reissue,
      updateDate: 1400,
      certNotAfter: 8000,
      issuedAt: 1050,
      termEnd: 9000,
    });
    for (const o of [a, b, d]) expect(await orders.byId(o!.id)).toEqual(o);
    expect(await orders.byId(lost)).toMatchObject({
      majorStatus: 'PENDING',
      minorStatus: 'WF_ISSUANCE',
      issuanceClaim: 'holder/1',
    });
    expect((await orders.byId(first))!.price).toEqual(money(4900, 'EUR'));
    const billing = await db.kysely
      .selectFrom('orders')
      .select(['id', 'billing_status'])
      .where('id', 'in', [first, lost, reissue])
      .orderBy('id')
      .execute();
    expect(billing.map((r) => r.billing_status)).toEqual(['cleared', 'uncleared', 'cleared']);
    expect(kinds.get('UpdateQueryNode') ?? 0).toBe(dialect === 'postgres' ? 0 : 4);
    if (dialect === 'postgres') expect(kinds.get('RawNode')).toBe(1);
  });

  it('race/completions gathered in batches while cancels of the same orders run: each order ends one way, as its caller was told', async () => {
    const ids = await Promise.all(Array.from({ length: 24 }, () => claimed()));
    const batch = new TransactionBatch(<T>(fn: (tx: OrdersRepo) => Promise<T>) =>
      inTransaction(db, (tx) => fn(new OrdersRepo(tx))),
    );
    const completions = ids.map((id, i) =>
      batch.run((tx) => tx.markIssued(id, 'PENDING', 'holder/1', 1100 + i, { certNotAfter: 5000 + i })),
    );
    // Every third order cancelled at the same moment, outside the batches.
    const cancels = ids.map((id, i) =>
      i % 3 === 0
        ? orders.markCancelled(id, { major: 'PENDING', minor: 'WF_ISSUANCE' }, true, 1500)
        : Promise.resolve(undefined),
    );
    const [completed, cancelled] = await Promise.all([Promise.all(completions), Promise.all(cancels)]);
    for (const [i, id] of ids.entries()) {
      const now = (await orders.byId(id))!;
      if (completed[i] !== undefined) {
        expect(cancelled[i]).not.toBe(true);
        expect(now).toEqual(completed[i]);
        expect(now).toMatchObject({ majorStatus: 'COMPLETE', certNotAfter: 5000 + i, updateDate: 1100 + i });
      } else {
        expect(cancelled[i]).toBe(true);
        expect(now.majorStatus).toBe('CANCELLED');
      }
    }
    // Only the cancelled ones can have lost; the rest completed.
    expect(completed.filter((c) => c === undefined).length).toBeLessThanOrEqual(8);
    expect(completed.filter((c, i) => c === undefined && i % 3 !== 0)).toEqual([]);
  });

  it('ok/one order completed twice in one turn: one by one, so the second finds it completed', async () => {
    const id = await claimed();
    const [a, b] = await inTransaction(db, (tx) => {
      const repo = new OrdersRepo(tx);
      return Promise.all([
        repo.markIssued(id, 'PENDING', 'holder/1', 1100, { certNotAfter: 5000 }),
        repo.markIssued(id, 'PENDING', 'holder/1', 1200, { certNotAfter: 6000 }),
      ]);
    });
    expect(a).toMatchObject({ majorStatus: 'COMPLETE', certNotAfter: 5000 });
    expect(b).toBeUndefined();
  });

  it('ok/names shown: awaiting issuance keeps the major (and any claim); awaiting vetting only from PENDING', async () => {
    const id = await place();
    const version = async (order: typeof id) => (await new OrderNamesRepo(db).proofState(order))!.version;
    const v = await version(id);
    expect(await orders.markAwaitingIssuance(id, { major: 'REISSUE', minor: 'WF_DNS_AUTH', version: v }, 1100)).toBe(
      false,
    );
    // At a version the row has left (any update moves it on), nothing moves.
    expect(
      await orders.markAwaitingIssuance(id, { major: 'PENDING', minor: 'WF_DNS_AUTH', version: v - 1 }, 1100),
    ).toBe(false);
    expect(await orders.markAwaitingIssuance(id, { major: 'PENDING', minor: 'WF_DNS_AUTH', version: v }, 1100)).toBe(
      true,
    );
    expect(await orders.byId(id)).toMatchObject({
      majorStatus: 'PENDING',
      minorStatus: 'WF_ISSUANCE',
      updateDate: 1100,
    });
    const ov = await place();
    expect(await orders.markAwaitingVetting(ov, 'WF_FILE_AUTH', await version(ov), 1100)).toBe(false);
    expect(await orders.markAwaitingVetting(ov, 'WF_DNS_AUTH', (await version(ov)) + 1, 1100)).toBe(false);
    expect(await orders.markAwaitingVetting(ov, 'WF_DNS_AUTH', await version(ov), 1100)).toBe(true);
    expect((await orders.byId(ov))!.minorStatus).toBe('WF_ORG_VALIDATION');
  });

  it('ok/a reissue round starts unclaimed and an abandoned one returns the order to COMPLETE with the reason', async () => {
    const id = await claimed();
    expect(
      await orders.markIssued(id, 'PENDING', 'holder/1', 1100, {
        certNotAfter: 5000,
        first: { issuedAt: 1100, termEnd: 9000 },
      }),
    ).toMatchObject({ id, majorStatus: 'COMPLETE', minorStatus: 'COMPLETED', issuanceClaim: null, certNotAfter: 5000 });
    expect(await orders.byId(id)).toMatchObject({
      majorStatus: 'COMPLETE',
      minorStatus: 'COMPLETED',
      billingStatus: 'cleared',
      issuedAt: 1100,
      termEnd: 9000,
      certNotAfter: 5000,
    });
    const order = (await orders.byId(id))!;
    const round = {
      minorStatus: 'WF_EMAIL_AUTH',
      csrPem: 'pem2',
      csrSha256: 'sha2',
      commonName: 'www.example.com',
      sanNames: ['example.com', 'shop.example.com'],
      signatureHashAlgorithm: 'SHA256-ECC-HYBRID',
      dvAuthMethod: 'EMAIL',
      dcvValue: 'v2',
      parameters: { ...order.parameters, DVAuthMethod: 'EMAIL' },
      baseCert: null,
      startedAt: 1200,
    } as const;
    expect(
      await orders.setPendingReissue(id, 'COMPLETE', round, [
        { name: 'www.example.com', method: 'EMAIL', status: 'PENDING', approverEmail: 'admin@example.com' },
      ]),
    ).toBe(true);
    expect(await orders.setPendingReissue(id, 'COMPLETE', round, [])).toBe(false);
    expect(await orders.byId(id)).toMatchObject({
      majorStatus: 'REISSUE',
      minorStatus: 'WF_EMAIL_AUTH',
      reissuedAt: 1200,
      sanNames: ['example.com', 'shop.example.com'],
      parameters: { DVAuthMethod: 'EMAIL' },
    });
    expect(await new OrderNamesRepo(db).names([id])).toEqual([
      expect.objectContaining({
        orderId: id,
        name: 'www.example.com',
        method: 'EMAIL',
        status: 'PENDING',
        approverEmail: 'admin@example.com',
        validatedAt: null,
      }),
    ]);
    expect(await orders.markReissueAbandoned(id, 'WF_DNS_AUTH', 'r', 1300)).toBe(false);
    expect(await orders.markReissueAbandoned(id, 'WF_EMAIL_AUTH', 'reissue abandoned', 1300)).toBe(true);
    expect(await orders.byId(id)).toMatchObject({
      majorStatus: 'COMPLETE',
      minorStatus: 'COMPLETED',
      failureReason: 'reissue abandoned',
      issuedAt: 1100,
    });
  });

  it("ok/an order's current certificate is its newest delivered one; the newest signed is only the round's boundary", async () => {
    const id = await place();
    let n = 0;
    const certificate = async (chain: string, delivered: boolean) => {
      const serial = `6C${(++n).toString(16).toUpperCase().padStart(30, '0')}`;
      await db.kysely
        .insertInto('certificates')
        .values({
          order_id: id,
          customer_id: customer,
          issuer_id: `${chain}-int`,
          key_id: chain,
          serial,
          pem: '',
          chain_pem: '',
          pkcs7_pem: '',
          not_before: 1000,
          not_after: 1000 + n * 100,
          created_at: 1000,
          chain_ids: `${chain}-int,${chain}-root`,
          profile: 'tls-dv',
        })
        .execute();
      if (delivered) await new OrderCertificatesRepo(db).markDelivered(serial, 1000);
      return serial;
    };
    const repo = new OrderCertificatesRepo(db);
    const first = await certificate('old', true);
    const signed = await certificate('new', false);
    expect((await repo.currentCertificate(id))?.serial).toBe(first);
    expect((await repo.latestCertificate(id))?.serial).toBe(signed);
    expect((await repo.certificates(id)).map((c) => [c.serial, c.delivered])).toEqual([
      [signed, false],
      [first, true],
    ]);
    // filterScheduledToReplace: by the certificate delivered, not the one only signed.
    expect(await repo.chainingTo(customer, ['old-root'])).toEqual([id]);
    expect(await repo.chainingTo(customer, ['new-root'])).toEqual([]);
    // Delivered, the newer one is the order's.
    await repo.markDelivered(signed, 1100);
    expect((await repo.currentCertificate(id))?.serial).toBe(signed);
    expect(await repo.chainingTo(customer, ['old-root'])).toEqual([]);
    expect(await repo.chainingTo(customer, ['new-root'])).toEqual([id]);
  });
});
