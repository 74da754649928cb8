import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDialects } from '../../test/support/databases.js';
import { money, type CustomerId, type OrderId } from '../core/index.js';
import { CustomersRepo } from './customers-repo.js';
import type { Db } from './database.js';
import { OrderCertificatesRepo } from './order-certificates-repo.js';
import { OrderNamesRepo } from './order-names-repo.js';
import { OrderQueriesRepo } from './order-queries-repo.js';
import { OrdersRepo, type NewOrder } from './orders-repo.js';

describe.each(testDialects())('OrdersRepo on $dialect', ({ open }) => {
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

  it('ok/names shown: awaiting issuance keeps the major (and any claim); awaiting vetting only from PENDING', async () => {
    const id = await place();
    expect(await orders.markAwaitingIssuance(id, { major: 'REISSUE', minor: 'WF_DNS_AUTH' }, 1100)).toBe(false);
    expect(await orders.markAwaitingIssuance(id, { major: 'PENDING', minor: 'WF_DNS_AUTH' }, 1100)).toBe(true);
    expect(await orders.byId(id)).toMatchObject({
      majorStatus: 'PENDING',
      minorStatus: 'WF_ISSUANCE',
      updateDate: 1100,
    });
    const ov = await place();
    expect(await orders.markAwaitingVetting(ov, 'WF_FILE_AUTH', 1100)).toBe(false);
    expect(await orders.markAwaitingVetting(ov, 'WF_DNS_AUTH', 1100)).toBe(true);
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
