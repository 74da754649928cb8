import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext, type TestCustomer } from '../support/app.js';
import { testDialects } from '../support/databases.js';
import { csrFor, testCsr } from '../support/csr.js';
import { ORDER_CONTACT, ORG_ADDRESS, ORG_CONTACT } from '../support/issuing-context.js';

const contact = ORDER_CONTACT;
const address = ORG_ADDRESS;
const orgContact = ORG_CONTACT;

/** A CSR for `cn` that asks for `dnsNames` (by default www.certdesk-test.com and shop.certdesk-test.com). */
function extraNameCsr(
  cn = 'www.certdesk-test.com',
  dnsNames: readonly string[] = ['www.certdesk-test.com', 'shop.certdesk-test.com'],
): string {
  return csrFor(cn, dnsNames);
}

function dvOrder(overrides: Record<string, unknown> = {}, params: Record<string, unknown> = {}) {
  return {
    OrderParameters: {
      ProductCode: 'TrustPoint.DV',
      ValidityPeriod: 12,
      CSR: testCsr().pem,
      DVAuthMethod: 'EMAIL',
      ApproverEmail: 'admin@certdesk-test.com',
      ...params,
    },
    AdminContact: contact,
    TechContact: contact,
    ...overrides,
  };
}

describe.each(testDialects())('orders on $dialect', (dialect) => {
  let t: TestContext;
  let a: TestCustomer;
  let b: TestCustomer;
  beforeAll(async () => {
    t = await createTestContext(dialect, {
      CERTDESK_RATE_LIMIT: '1000000',
      CERTDESK_BLOCKED_NAMES: 'blocked-brand.com,*.walled-certdesk.com',
    });
    a = await t.customer({ name: 'A', creditLimit: 5000 });
    b = await t.customer({ name: 'B' });
  });
  afterAll(async () => t.close());

  const post = (token: string, payload: unknown) =>
    t.call(token, { method: 'POST', url: '/rest/v1/Order', payload: payload as Record<string, unknown> });
  const get = (token: string, url: string) => t.call(token, { method: 'GET', url });
  const used = async (c: TestCustomer) => (await get(c.token, '/rest/v1/Limit')).json().LimitInfo.Used as number;
  const orderCount = async () =>
    Number(
      (
        await t.db.kysely
          .selectFrom('orders')
          .select((e) => e.fn.countAll().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );

  describe('POST /Order', () => {
    it('ok/a DV order by EMAIL: ServiceOrderID, echo, PENDING WF_EMAIL_AUTH 25 %, no Fulfillment, charged once', async () => {
      const before = await used(a);
      const res = await post(a.token, dvOrder());
      expect(res.statusCode).toBe(200);
      const body = res.json();
      expect(body).toMatchObject({
        success: true,
        ServiceOrderID: expect.any(Number),
        Timestamp: expect.stringMatching(/Z$/),
      });
      expect(body.ServiceOrderID).toBeGreaterThan(0);
      expect(body.OrderParameters).toMatchObject({
        ProductCode: 'TrustPoint.DV',
        ValidityPeriod: 12,
        SubjectAltNameCount: 0,
        DVAuthMethod: 'EMAIL',
        ApproverEmail: 'admin@certdesk-test.com',
        PartnerOrderID: expect.stringMatching(/^cd-/),
      });
      expect(await used(a)).toBeCloseTo(before + 49, 2);

      const info = (
        await get(
          a.token,
          `/rest/v1/Order/${body.ServiceOrderID}?includeBillingDetails=true&includeDCVStatus=true&includeFulfillment=true`,
        )
      ).json().OrderInfo;
      expect(info).toMatchObject({
        ServiceOrderID: body.ServiceOrderID,
        CommonName: 'www.certdesk-test.com',
        OrderStatus: { MajorStatus: 'PENDING', MinorStatus: 'WF_EMAIL_AUTH', Progress: 25 },
      });
      expect(info.BillingInfo).toEqual({ Currency: 'EUR', Price: 49, Status: 'uncleared' });
      expect(info).not.toHaveProperty('Fulfillment');
      expect(info.DCVStatus.map((d: { Domain: string }) => d.Domain)).toEqual([
        'www.certdesk-test.com',
        'certdesk-test.com',
      ]);
      const audit = await t.db.kysely
        .selectFrom('audit_events')
        .select(['action', 'actor', 'client_address'])
        .where('subject', '=', String(body.ServiceOrderID))
        .execute();
      expect(audit).toEqual([
        { action: 'order.placed', actor: expect.stringMatching(/^(user|app):/), client_address: '127.0.0.1' },
      ]);
    });

    it('ok/DNS orders return DNSAuthDetails: TXT for the token-style brand, CNAME for the hash-style brand', async () => {
      const tp = (await post(a.token, dvOrder({}, { DVAuthMethod: 'DNS', ApproverEmail: undefined }))).json();
      expect(tp.OrderParameters.DNSAuthDetails).toMatchObject({
        PointerType: 'TXT',
        DNSEntry: 'certdesk-test.com',
        FQDNs: ['certdesk-test.com'],
        Example: expect.stringMatching(/^certdesk-test\.com\. 3600 IN TXT "[A-Za-z0-9]{20}"$/),
      });
      const vcsr = (
        await t.call(a.token, { method: 'POST', url: '/rest/v1/ValidateCSR', payload: { CSR: testCsr().pem } })
      ).json().ParsedCSR;
      const se = await post(
        a.token,
        dvOrder(
          {
            AdminContact: { ...contact, OrganizationName: 'X', OrganizationAddress: address },
            TechContact: { ...contact, OrganizationName: 'X', OrganizationAddress: address },
          },
          { ProductCode: 'Sectra.DV', DVAuthMethod: 'DNS', ApproverEmail: undefined, ServerCount: 1 },
        ),
      );
      expect(se.statusCode).toBe(200);
      const d = se.json().OrderParameters.DNSAuthDetails;
      expect(d).toMatchObject({ PointerType: 'CNAME', DNSEntry: `_${vcsr.HashMD5.toLowerCase()}` });
      expect(d.DNSValue).toBe(
        `${vcsr.HashSHA256.toLowerCase().slice(0, 32)}.${vcsr.HashSHA256.toLowerCase().slice(32)}.sectra-ca.example`,
      );
      const file = (await post(a.token, dvOrder({}, { DVAuthMethod: 'FILE', ApproverEmail: undefined }))).json()
        .OrderParameters.FileAuthDetails;
      expect(file).toMatchObject({
        FileName: 'fileauth.txt',
        FilePath: '/.well-known/pki-validation/',
        FileContents: tp.OrderParameters.DNSAuthDetails.DNSValue,
      });
    });

    it('fail/every fault at once in Errors, ServiceOrderID 0, nothing stored or charged', async () => {
      const [n0, u0] = [await orderCount(), await used(a)];
      const res = await post(a.token, {
        OrderParameters: {
          ProductCode: 'TrustPoint.DV',
          ValidityPeriod: 7,
          CSR: 'nope',
          DVAuthMethod: 'META',
          SignatureHashAlgorithm: 'MD5',
        },
        AdminContact: { FirstName: 'x' },
      });
      expect(res.statusCode).toBe(417);
      const body = res.json();
      expect(body).toMatchObject({ success: false, ServiceOrderID: 0 });
      const fields = body.Errors.map((e: { ErrorField: string }) => e.ErrorField);
      expect(fields).toEqual(
        expect.arrayContaining([
          'CSR',
          'ValidityPeriod',
          'DVAuthMethod',
          'SignatureHashAlgorithm',
          'AdminContact.LastName',
          'TechContact',
        ]),
      );
      expect(await orderCount()).toBe(n0);
      expect(await used(a)).toBe(u0);
    });

    it.each([
      ['an unknown product', { ProductCode: 'Nope.DV' }, 'ProductCode', -1004],
      ['a non-TLS product', { ProductCode: 'TrustPoint.CodeSigning' }, 'ProductCode', -1001],
      ['SANs on a single-name product', { SubjectAltNames: ['shop.certdesk-test.com'] }, 'SubjectAltNameCount', -1001],
      ['an approver that is not one', { ApproverEmail: 'someone@gmail.com' }, 'ApproverEmail', -1001],
      [
        'DomainApprovers at the brand without them',
        {
          ProductCode: 'Sectra.DV',
          ServerCount: 1,
          DomainApprovers: [{ Domain: 'www.certdesk-test.com', Approvers: ['admin@certdesk-test.com'] }],
        },
        'DomainApprovers',
        -1001,
      ],
      [
        'a wildcard SAN on a product without wildcards',
        { SubjectAltNames: '*.certdesk-test.com' },
        'SubjectAltNames',
        -1003,
      ],
      ['an ECC chain for an RSA key', { SignatureHashAlgorithm: 'SHA256-ECC-HYBRID' }, 'SignatureHashAlgorithm', -1001],
      [
        'a competitive upgrade over 12 months',
        { ValidityPeriod: 24, IsCompetitiveUpgrade: true },
        'ValidityPeriod',
        -1001,
      ],
      ['a missing ServerCount at the brand that needs it', { ProductCode: 'Sectra.DV' }, 'ServerCount', -1001],
    ])('fail/%s → 417 with its field', async (_case, params, field, errorId) => {
      const n0 = await orderCount();
      const res = await post(a.token, dvOrder({}, params));
      expect(res.statusCode).toBe(417);
      if (field !== undefined)
        expect(res.json().Errors).toEqual(
          expect.arrayContaining([expect.objectContaining({ ErrorField: field, ErrorId: errorId })]),
        );
      expect(await orderCount()).toBe(n0);
    });

    it("ok/DomainApprovers keyed by the names' registered domain approve every name under it (DESIGN §5.2)", async () => {
      const res = await post(
        a.token,
        dvOrder(
          {},
          {
            ApproverEmail: undefined,
            DomainApprovers: {
              DomainApprover: [
                { Domain: 'certdesk-test.com', Approvers: [{ ApproverEmail: 'webmaster@certdesk-test.com' }] },
              ],
            },
          },
        ),
      );
      expect(res.statusCode, res.body).toBe(200);
      const info = (await get(a.token, `/rest/v1/Order/${res.json().ServiceOrderID}?includeDCVStatus=true`)).json()
        .OrderInfo;
      expect(info.DCVStatus.map((d: { Domain: string; ApproverEmail: string }) => [d.Domain, d.ApproverEmail])).toEqual(
        [
          ['www.certdesk-test.com', 'webmaster@certdesk-test.com'],
          ['certdesk-test.com', 'webmaster@certdesk-test.com'],
        ],
      );
      const stray = await post(
        a.token,
        dvOrder(
          {},
          { ApproverEmail: undefined, DomainApprovers: [{ Domain: 'example.org', Approvers: ['admin@example.org'] }] },
        ),
      );
      expect(stray.statusCode).toBe(417);
      expect(stray.json().Errors).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ ErrorField: 'DomainApprovers', Message: expect.stringMatching(/example\.org/) }),
        ]),
      );
    });

    it('ok/OrganizationInfo: null on a DV order is no organization: the order reads back without one (was a 500)', async () => {
      const res = await post(a.token, dvOrder({ OrganizationInfo: null }));
      expect(res.statusCode, res.body).toBe(200);
      const read = await get(a.token, `/rest/v1/Order/${res.json().ServiceOrderID}?includeOrganizationInfos=true`);
      expect(read.statusCode, read.body).toBe(200);
      expect(read.json().OrderInfo).not.toHaveProperty('OrganizationInfo');
    });

    it('fail/a CSR name the order does not list → 417 SubjectAltNames; listing it makes the order valid', async () => {
      const csr = extraNameCsr();
      const res = await post(a.token, dvOrder({}, { CSR: csr, ProductCode: 'TrustPoint.DVMultiDomain' }));
      expect(res.statusCode).toBe(417);
      expect(res.json().Errors).toEqual([
        expect.objectContaining({
          ErrorField: 'SubjectAltNames',
          ErrorId: -1003,
          Message: expect.stringMatching(/shop\.certdesk-test\.com/),
        }),
      ]);
      const ok = await post(
        a.token,
        dvOrder(
          {},
          {
            CSR: csr,
            ProductCode: 'TrustPoint.DVMultiDomain',
            SubjectAltNames: 'shop.certdesk-test.com',
            ApproverEmail: 'admin@certdesk-test.com',
          },
        ),
      );
      expect(ok.statusCode).toBe(200);
      expect(ok.json().OrderParameters).toMatchObject({
        SubjectAltNames: ['shop.certdesk-test.com'],
        SubjectAltNameCount: 1,
      });
    });

    it('fail/a blocked name is refused once, for being blocked, not again as a name the order does not list', async () => {
      const before = await orderCount();
      const usedBefore = await used(a);
      const res = await post(
        a.token,
        dvOrder({}, { CSR: extraNameCsr('www.blocked-brand.com', ['www.blocked-brand.com', 'blocked-brand.com']) }),
      );
      expect(res.statusCode).toBe(417);
      expect(res.json().Errors).toEqual([
        expect.objectContaining({
          ErrorField: 'CSR',
          Message: 'www.blocked-brand.com may not be certified (blocked name).',
        }),
        expect.objectContaining({
          ErrorField: 'CSR',
          Message: 'blocked-brand.com may not be certified (blocked name).',
        }),
      ]);
      // A blocked SAN the CSR also asks for: one error, naming the block.
      const san = await post(
        a.token,
        dvOrder(
          {},
          {
            CSR: extraNameCsr('www.certdesk-test.com', ['www.certdesk-test.com', 'shop.blocked-brand.com']),
            ProductCode: 'TrustPoint.DVMultiDomain',
            SubjectAltNames: ['shop.blocked-brand.com'],
          },
        ),
      );
      expect(san.statusCode).toBe(417);
      expect(san.json().Errors).toEqual([
        expect.objectContaining({
          ErrorField: 'SubjectAltNames',
          Message: 'shop.blocked-brand.com may not be certified (blocked name).',
        }),
      ]);
      expect(await orderCount()).toBe(before);
      expect(await used(a)).toBe(usedBefore);
    });

    it('fail/the free www. twin of the common name is held to the block list too (it was added unchecked)', async () => {
      // `*.walled-certdesk.com` blocks www.walled-certdesk.com but not walled-certdesk.com itself.
      const csr = extraNameCsr('walled-certdesk.com', ['walled-certdesk.com', 'www.walled-certdesk.com']);
      const before = await orderCount();
      const res = await post(a.token, dvOrder({}, { CSR: csr, ApproverEmail: 'admin@walled-certdesk.com' }));
      expect(res.statusCode).toBe(417);
      expect(res.json().Errors).toEqual([
        expect.objectContaining({
          ErrorField: 'CSR',
          Message: 'www.walled-certdesk.com may not be certified (blocked name).',
        }),
      ]);
      expect(await orderCount()).toBe(before);
      // Without the twin in the CSR, the bare name may be ordered.
      const bare = extraNameCsr('walled-certdesk.com', ['walled-certdesk.com']);
      const ok = await post(a.token, dvOrder({}, { CSR: bare, ApproverEmail: 'admin@walled-certdesk.com' }));
      expect(ok.statusCode).toBe(200);
      const rows = await t.db.kysely
        .selectFrom('order_names')
        .select('name')
        .where('order_id', '=', Number(ok.json().ServiceOrderID))
        .execute();
      expect(rows.map((r) => r.name)).toEqual(['walled-certdesk.com']);
    });

    it('fail/the free twin that is a public suffix (github.io for www.github.io) is refused as an ordered one would be', async () => {
      const before = await orderCount();
      const res = await post(
        a.token,
        dvOrder(
          {},
          { CSR: extraNameCsr('www.github.io', ['www.github.io', 'github.io']), ApproverEmail: 'admin@github.io' },
        ),
      );
      expect(res.statusCode).toBe(417);
      expect(res.json().Errors).toEqual([
        expect.objectContaining({
          ErrorField: 'CSR',
          Message: expect.stringMatching(/github\.io.* is a public suffix/),
        }),
      ]);
      expect(await orderCount()).toBe(before);
    });

    it('fail/OV without organization data lists each missing member', async () => {
      const res = await post(a.token, dvOrder({}, { ProductCode: 'TrustPoint.OV' }));
      expect(res.statusCode).toBe(417);
      const fields = res.json().Errors.map((e: { ErrorField: string }) => e.ErrorField);
      expect(fields).toEqual(
        expect.arrayContaining([
          'AdminContact.Title',
          'AdminContact.Fax',
          'AdminContact.OrganizationAddress',
          'OrganizationInfo',
        ]),
      );
      const ok = await post(
        a.token,
        dvOrder(
          {
            AdminContact: orgContact,
            TechContact: orgContact,
            OrganizationInfo: { OrganizationName: 'Certdesk Test GmbH', OrganizationAddress: address },
          },
          { ProductCode: 'TrustPoint.OV' },
        ),
      );
      expect(ok.statusCode).toBe(200);
    });

    it('ok/a retried POST with the same PartnerOrderID returns the original order without a second charge; a different body is refused', async () => {
      const body = dvOrder({}, { PartnerOrderID: 'retry-1' });
      const first = (await post(a.token, body)).json();
      const u1 = await used(a);
      const again = (await post(a.token, body)).json();
      expect(again.ServiceOrderID).toBe(first.ServiceOrderID);
      expect(await used(a)).toBe(u1);
      const other = await post(a.token, dvOrder({}, { PartnerOrderID: 'retry-1', ValidityPeriod: 24 }));
      expect(other.statusCode).toBe(409);
      expect(other.json()).toMatchObject({ ErrorField: 'PartnerOrderID', ServiceOrderID: 0 });
      // Another customer may use the same PartnerOrderID.
      expect((await post(b.token, body)).statusCode).toBe(200);
    });

    it('fail/an order over the credit limit → -3001 and nothing stored', async () => {
      const poor = await t.customer({ name: 'Poor', creditLimit: 10 });
      const res = await post(poor.token, dvOrder());
      expect(res.statusCode).toBe(417);
      expect(res.json()).toMatchObject({ ErrorId: -3001, ServiceOrderID: 0 });
      expect(await used(poor)).toBe(0);
    });

    it('ok/an account in a currency without minor units (JPY) sees the price it is charged, in BillingInfo and in the refusal over its limit', async () => {
      const yen = await t.customer({ name: 'Yen', currency: 'JPY', creditLimit: 1_000_000 });
      const quote = (
        await get(
          yen.token,
          '/rest/v1/Quote?ProductCode=TrustPoint.DV&ValidityPeriod=12&ServerCount=1&SubjectAltNameCount=0',
        )
      ).json();
      expect(quote).toMatchObject({ success: true, Currency: 'JPY' });
      expect(Number.isInteger(quote.Price)).toBe(true);
      const placed = (await post(yen.token, dvOrder())).json();
      const info = (await get(yen.token, `/rest/v1/Order/${placed.ServiceOrderID}?includeBillingDetails=true`)).json()
        .OrderInfo;
      expect(info.BillingInfo).toEqual({ Currency: 'JPY', Price: quote.Price, Status: 'uncleared' });
      expect(await used(yen)).toBe(quote.Price);
      const poor = await t.customer({ name: 'PoorYen', currency: 'JPY', creditLimit: 100 });
      expect((await post(poor.token, dvOrder())).json()).toMatchObject({
        ErrorId: -3001,
        Message: expect.stringContaining(`costs ${quote.Price} JPY`),
      });
    });

    it('fail/without the order scope → 403; without a token → 401', async () => {
      const readOnly = await t.token(a, 'read');
      expect((await post(readOnly, dvOrder())).statusCode).toBe(403);
      expect((await post('', dvOrder())).statusCode).toBe(401);
    });
  });

  describe('POST /Order body schema', () => {
    it('ok/the OpenAPI document describes the body, OrderParameters member by member, and the refusal with ServiceOrderID', async () => {
      const doc = (await t.app.inject({ method: 'GET', url: '/rest/v1/openapi.json' })).json();
      const op = doc.paths['/rest/v1/Order'].post;
      const body = op.requestBody.content['application/json'].schema;
      expect(body.required).toEqual(['OrderParameters']);
      expect(Object.keys(body.properties)).toEqual(
        expect.arrayContaining(['OrderParameters', 'AdminContact', 'TechContact', 'OrganizationInfo']),
      );
      expect(Object.keys(body.properties.OrderParameters.properties)).toEqual(
        expect.arrayContaining([
          'ProductCode',
          'PartnerOrderID',
          'ValidityPeriod',
          'CSR',
          'ServerCount',
          'SubjectAltNames',
          'DVAuthMethod',
          'ApproverEmail',
          'DomainApprovers',
          'SignatureHashAlgorithm',
          'InstallationService',
          'ExpediteIssuance',
          'IsRenewal',
          'IsCompetitiveUpgrade',
          'IsUpsell',
        ]),
      );
      expect(Object.keys(body.properties.AdminContact.properties)).toEqual(
        expect.arrayContaining(['FirstName', 'LastName', 'Phone', 'Email', 'OrganizationAddress']),
      );
      expect(op.responses['200'].content['application/json'].schema.properties).toHaveProperty('ServiceOrderID');
      expect(op.responses['417'].content['application/json'].schema.properties).toHaveProperty('ServiceOrderID');
    });

    it('ok/what real clients send passes the schema: True and 1 for booleans, numbers as strings, an empty ServerCount, SANs as one string', async () => {
      const priced = async (params: Record<string, unknown>) => {
        const res = await post(
          a.token,
          dvOrder(
            {},
            {
              ProductCode: 'TrustPoint.DVMultiDomain',
              CSR: extraNameCsr(),
              SubjectAltNames: 'shop.certdesk-test.com',
              ...params,
            },
          ),
        );
        expect(res.statusCode, res.body).toBe(200);
        const id = res.json().ServiceOrderID as number;
        return (
          await get(a.token, `/rest/v1/Order/${id}?includeBillingDetails=true&includeOrderParameters=true`)
        ).json().OrderInfo;
      };
      const plain = await priced({});
      for (const spelling of [true, 'True', '1', 1]) {
        const info = await priced({ InstallationService: spelling, ValidityPeriod: '12', ServerCount: '' });
        expect(info.BillingInfo.Price).toBeGreaterThan(plain.BillingInfo.Price);
        expect(info.OrderParameters).toMatchObject({
          InstallationService: true,
          ValidityPeriod: 12,
          ServerCount: 1,
          SubjectAltNames: ['shop.certdesk-test.com'],
        });
      }
    });

    it('fail/a member of the wrong type → 417 naming it, through the one error handler: ServiceOrderID 0 and a Timestamp, nothing stored', async () => {
      const n0 = await orderCount();
      for (const [params, field] of [
        [{ CSR: { pem: 'x' } }, 'OrderParameters.CSR'],
        [{ ValidityPeriod: 'twelve' }, 'OrderParameters.ValidityPeriod'],
        [{ IsRenewal: 'yes' }, 'OrderParameters.IsRenewal'],
      ] as const) {
        const res = await post(a.token, dvOrder({}, params));
        expect(res.statusCode).toBe(417);
        expect(res.json()).toMatchObject({
          success: false,
          ErrorField: field,
          ServiceOrderID: 0,
          Timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/),
        });
      }
      const noParams = await post(a.token, { AdminContact: contact, TechContact: contact });
      expect(noParams.json()).toMatchObject({ ErrorId: -1001, ErrorField: 'OrderParameters', ServiceOrderID: 0 });
      expect(await orderCount()).toBe(n0);
    });
  });

  describe('concurrency', () => {
    it('ok/50 simultaneous orders against a limit that fits 20 → exactly 20 succeed and Used is exact', async () => {
      const c = await t.customer({ name: 'Busy', creditLimit: 20 * 49 });
      const results = await Promise.all(Array.from({ length: 50 }, () => post(c.token, dvOrder())));
      const ok = results.filter((r) => r.statusCode === 200);
      expect(ok).toHaveLength(20);
      expect(results.filter((r) => r.statusCode === 417).every((r) => r.json().ErrorId === -3001)).toBe(true);
      expect(await used(c)).toBe(20 * 49);
      const ledger = await t.db.kysely
        .selectFrom('ledger')
        .select('amount_minor')
        .where('customer_id', '=', c.customerId)
        .execute();
      expect(ledger).toHaveLength(20);
    }, 60_000);
  });

  describe('reading orders', () => {
    it('fail/another customer’s order is not found (404 -2011); a bad id too', async () => {
      const id = (await post(a.token, dvOrder())).json().ServiceOrderID;
      const res = await get(b.token, `/rest/v1/Order/${id}`);
      expect(res.statusCode).toBe(404);
      expect(res.json()).toMatchObject({ ErrorId: -2011 });
      expect((await get(a.token, '/rest/v1/Order/999999')).statusCode).toBe(404);
      expect((await get(a.token, '/rest/v1/Order/abc')).statusCode).toBeLessThan(500);
      const bList = (await get(b.token, '/rest/v1/Orders?ItemsPerPage=1000'))
        .json()
        .OrderInfos.map((o: { ServiceOrderID: number }) => o.ServiceOrderID);
      expect(bList).not.toContain(id);
      const window = 'FromDate=2000-01-01T00:00:00Z&ToDate=2100-01-01T00:00:00Z';
      const bPolled = (await get(b.token, `/rest/v1/ModifiedOrders?${window}`))
        .json()
        .OrderInfos.map((o: { ServiceOrderID: number }) => o.ServiceOrderID);
      expect(bPolled).not.toContain(id);
      expect(
        (await get(a.token, `/rest/v1/ModifiedOrders?${window}`))
          .json()
          .OrderInfos.map((o: { ServiceOrderID: number }) => o.ServiceOrderID),
      ).toContain(id);
    });

    it('ok/GET /Orders filters by Status, ProductType and CommonName with %, pages, and echoes _meta', async () => {
      const c = await t.customer({ name: 'Lister' });
      for (let i = 0; i < 5; i++) expect((await post(c.token, dvOrder())).statusCode).toBe(200);
      const page = (
        await get(
          c.token,
          '/rest/v1/Orders?Status=PENDING,COMPLETE&ProductType=SSL&CommonName=www.%25&Page=2&ItemsPerPage=2&OrderBy=ServiceOrderID&OrderDir=asc',
        )
      ).json();
      expect(page.OrderInfos).toHaveLength(2);
      expect(page._meta).toMatchObject({
        ItemsAvailable: 5,
        Page: 2,
        ItemsPerPage: 2,
        Status: ['PENDING', 'COMPLETE'],
      });
      const ids = page.OrderInfos.map((o: { ServiceOrderID: number }) => o.ServiceOrderID);
      expect(ids[0]).toBeLessThan(ids[1]);
      expect((await get(c.token, '/rest/v1/Orders?Status=CANCELLED')).json().OrderInfos).toEqual([]);
      expect((await get(c.token, '/rest/v1/Orders?CommonName=nothing%25')).json().OrderInfos).toEqual([]);
      expect((await get(c.token, '/rest/v1/Orders?Status=BOGUS')).statusCode).toBe(417);
      expect((await get(c.token, '/rest/v1/Orders?ItemsPerPage=100000')).statusCode).toBe(417);
    });

    it('ok/GET /ModifiedOrders returns exactly the orders with FromDate ≤ UpdateDate < ToDate', async () => {
      const c = await t.customer({ name: 'Poller' });
      const saved = t.clock.nowSeconds();
      const at = (s: number) => new Date(s * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
      t.clock.set(saved + 100);
      const first = (await post(c.token, dvOrder())).json().ServiceOrderID;
      t.clock.set(saved + 200);
      const second = (await post(c.token, dvOrder())).json().ServiceOrderID;
      t.clock.set(saved);
      const ids = async (from: number, to: number) =>
        (await get(c.token, `/rest/v1/ModifiedOrders?FromDate=${at(from)}&ToDate=${at(to)}`))
          .json()
          .OrderInfos.map((o: { ServiceOrderID: number }) => o.ServiceOrderID);
      expect(await ids(saved + 100, saved + 200)).toEqual([first]);
      expect(await ids(saved + 100, saved + 201)).toEqual([first, second]);
      expect(await ids(saved + 101, saved + 200)).toEqual([]);
      expect((await get(c.token, '/rest/v1/ModifiedOrders?FromDate=yesterday&ToDate=now')).statusCode).toBe(417);
    });
  });

  describe('fuzz', () => {
    it('2,000 mutated POST /Order bodies → 4xx, never 5xx, and nothing stored', async () => {
      const c = await t.customer({ name: 'Fuzz', creditLimit: 0 });
      let seed = dialect.dialect === 'sqlite' ? 7 : 8;
      const rnd = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
      const base = JSON.stringify(dvOrder());
      const junk = [null, 0, -1, 1e308, '', 'x'.repeat(5000), [], {}, true, '\u0000', '<script>', '%', '*.', '../..'];
      const statuses = new Map<number, number>();
      let refusedForInput = 0;
      for (let batch = 0; batch < 100; batch++) {
        const bodies = Array.from({ length: 20 }, () => {
          const obj = JSON.parse(base) as Record<string, Record<string, unknown>>;
          const sections = ['OrderParameters', 'AdminContact', 'TechContact'] as const;
          for (let k = 0; k < 1 + Math.floor(rnd() * 4); k++) {
            const section = sections[Math.floor(rnd() * sections.length)]!;
            const keys = Object.keys(obj[section] ?? {});
            const key = rnd() < 0.8 ? (keys[Math.floor(rnd() * keys.length)] ?? 'X') : 'Extra';
            if (rnd() < 0.15) delete obj[section]![key];
            else obj[section]![key] = junk[Math.floor(rnd() * junk.length)];
          }
          if (rnd() < 0.05) return base.slice(0, Math.floor(rnd() * base.length));
          return JSON.stringify(obj);
        });
        const results = await Promise.all(
          bodies.map((payload) =>
            t.call(c.token, {
              method: 'POST',
              url: '/rest/v1/Order',
              payload,
              headers: { 'content-type': 'application/json' },
            }),
          ),
        );
        for (const r of results) {
          statuses.set(r.statusCode, (statuses.get(r.statusCode) ?? 0) + 1);
          expect(r.statusCode, r.body).toBeLessThan(500);
          expect(r.statusCode).not.toBe(200);
          if (r.json().ErrorId !== -3001) refusedForInput++;
        }
      }
      expect(await used(c)).toBe(0);
      expect(
        await t.db.kysely.selectFrom('orders').select('id').where('customer_id', '=', c.customerId).execute(),
      ).toEqual([]);
      expect(statuses.get(417)).toBeGreaterThan(1000);
      // The credit limit of 0 only backs up the check: most bodies are refused for their content.
      expect(refusedForInput).toBeGreaterThan(1000);
    }, 120_000);
  });
});
