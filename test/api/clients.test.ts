// What the original API's published clients send and read (issue: existing integrations work
// unchanged). Each request is sent as those clients send it: a JSON text with the members and
// spellings of their examples, the order id taken from `CertCenterOrderID` of the answer before.
import { X509Certificate } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext, type TestCustomer } from '../support/app.js';
import { testCsr } from '../support/csr.js';
import { testDialects } from '../support/databases.js';
import { startDnsServer, type TestDnsServer } from '../support/dns-server.js';

const contact = { FirstName: 'Ada', LastName: 'Lovelace', Phone: '+49 30 1234567', Email: 'ada@certdesk-test.com' };
const TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;
const stamp = (date: string) => new Date(date).toISOString().replace(/\.\d{3}Z$/, 'Z');

describe.each(testDialects())("the original API's clients on $dialect", (dialect) => {
  let t: TestContext;
  let c: TestCustomer;
  let dns: TestDnsServer;
  let web: Server;
  const files = new Map<string, string>();

  beforeAll(async () => {
    dns = await startDnsServer();
    web = createServer((req, res) => {
      const body = files.get(`${String(req.headers.host).split(':')[0]}${req.url ?? ''}`);
      res.writeHead(body === undefined ? 404 : 200, { 'content-type': 'text/plain' }).end(body ?? 'not found');
    });
    await new Promise<void>((r) => web.listen(0, '127.0.0.1', r));
    t = await createTestContext(dialect, {
      CERTDESK_DNS_SERVERS: dns.address,
      CERTDESK_VALIDATION_ALLOW_PRIVATE: 'true',
      CERTDESK_VALIDATION_HTTP_PORT: String((web.address() as AddressInfo).port),
      CERTDESK_RATE_LIMIT: '1000000',
    });
    c = await t.customer({ name: 'Clients', creditLimit: 1_000_000 });
    for (const name of ['certdesk-test.com', 'www.certdesk-test.com'])
      dns.set(name, [{ type: 'A', address: '127.0.0.1' }]);
  }, 120_000);
  afterAll(async () => {
    await t.close();
    await dns.close();
    web.close();
  });

  /** A request as the clients send it: a JSON text, labelled JSON. */
  const raw = (token: string, method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, body?: unknown) =>
    t.call(token, {
      method,
      url: `/rest/v1${url}`,
      headers: { 'content-type': 'application/json' },
      ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
    });
  /** The TXT record of the customer's DCV value for the test CSR, published. */
  const publishTxt = async (customer: TestCustomer = c) => {
    const value = (
      await raw(customer.token, 'POST', '/DNSData', { CSR: testCsr().pem, ProductCode: 'TrustPoint.FreeDV' })
    ).json().DNSAuthDetails.DNSValue as string;
    dns.set('certdesk-test.com', [
      { type: 'A', address: '127.0.0.1' },
      { type: 'TXT', data: value },
    ]);
  };
  /** The clients' own example for the free product: nothing but these four members. */
  const freeOrder = (method: 'DNS' | 'FILE') => ({
    OrderParameters: {
      ProductCode: 'TrustPoint.FreeDV',
      CSR: testCsr().pem,
      ValidityPeriod: 180,
      DVAuthMethod: method,
    },
  });
  const emailOrder = (extra: Record<string, unknown> = {}) => ({
    OrderParameters: { ProductCode: 'TrustPoint.DV', ValidityPeriod: 12, CSR: testCsr().pem, ...extra },
    AdminContact: contact,
    TechContact: contact,
  });
  const counts = async () => {
    const n = async (table: string) =>
      Number((await sql<{ n: number }>`select count(*) as n from ${sql.table(table)}`.execute(t.db.kysely)).rows[0]!.n);
    return {
      orders: await n('orders'),
      ledger: await n('ledger'),
      jobs: await n('jobs'),
      mail: await n('mail_outbox'),
      dcvValues: await n('dcv_values'),
      audit: await n('audit_events'),
      used: (await raw(c.token, 'GET', '/Limit')).json().LimitInfo.Used as number,
    };
  };

  describe('the order id', () => {
    it('ok/every answer carries CertCenterOrderID beside ServiceOrderID, and the follow-up calls take it', async () => {
      const placed = await raw(c.token, 'POST', '/Order', emailOrder({ ApproverEmail: 'admin@certdesk-test.com' }));
      expect(placed.statusCode, placed.body).toBe(200);
      const id = placed.json().CertCenterOrderID as number;
      expect(id).toBeGreaterThan(0);
      expect(placed.json().ServiceOrderID).toBe(id);

      const one = (await raw(c.token, 'GET', `/Order/${id}`)).json().OrderInfo;
      expect([one.ServiceOrderID, one.CertCenterOrderID]).toEqual([id, id]);
      const window = 'FromDate=2000-01-01T00:00:00Z&ToDate=2100-01-01T00:00:00Z';
      for (const url of ['/Orders?ItemsPerPage=1000', `/ModifiedOrders?${window}`]) {
        const infos = (await raw(c.token, 'GET', url)).json().OrderInfos as Record<string, number>[];
        expect(infos.length).toBeGreaterThan(0);
        for (const o of infos) expect(o.CertCenterOrderID).toBe(o.ServiceOrderID);
        expect(infos.map((o) => o.CertCenterOrderID)).toContain(id);
      }
      expect(
        (await raw(c.token, 'PUT', `/ApproverEmail/${id}?ApproverEmail=webmaster@certdesk-test.com`)).statusCode,
      ).toBe(200);
      expect((await raw(c.token, 'POST', `/ApproverEmail/${id}`, {})).statusCode).toBe(200);
      expect((await raw(c.token, 'DELETE', `/Order/${id}`, {})).json()).toMatchObject({ success: true });
    });

    it('ok/an issued order is reissued and revoked by the id read as CertCenterOrderID', async () => {
      await publishTxt();
      const placed = (await raw(c.token, 'POST', '/Order', freeOrder('DNS'))).json();
      const id = placed.CertCenterOrderID as number;
      expect(placed.Fulfillment.Certificate).toMatch(/^-----BEGIN CERTIFICATE-----/);
      const reissue = await raw(c.token, 'POST', '/Reissue', {
        CertCenterOrderID: id,
        OrderParameters: { CSR: testCsr().pem, DVAuthMethod: 'DNS' },
      });
      expect(reissue.statusCode, reissue.body).toBe(200);
      const revoke = await raw(c.token, 'DELETE', `/Revoke/${id}`, {
        RevokeReason: 'Key compromise',
        Certificate: placed.Fulfillment.Certificate,
      });
      expect(revoke.statusCode, revoke.body).toBe(200);
    });

    it('fail/a refused order carries 0 under both names', async () => {
      const res = await raw(c.token, 'POST', '/Order', { OrderParameters: { ProductCode: 'Nope.DV' } });
      expect(res.statusCode).toBe(417);
      expect(res.json()).toMatchObject({ success: false, ServiceOrderID: 0, CertCenterOrderID: 0 });
    });

    it("fail/another customer's order is not found by its CertCenterOrderID", async () => {
      const id = (await raw(c.token, 'POST', '/Order', emailOrder({ ApproverEmail: 'admin@certdesk-test.com' }))).json()
        .CertCenterOrderID as number;
      const other = await t.customer({ name: 'Other client' });
      expect((await raw(other.token, 'GET', `/Order/${id}`)).statusCode).toBe(404);
      expect((await raw(other.token, 'POST', '/Reissue', { CertCenterOrderID: id })).statusCode).toBe(404);
    });
  });

  describe('the free automated product without contacts', () => {
    it("ok/by DNS: issued at once, Fulfillment with StartDate and EndDate, the account's contact in ContactInfo", async () => {
      await publishTxt();
      const res = await raw(c.token, 'POST', '/Order', freeOrder('DNS'));
      expect(res.statusCode, res.body).toBe(200);
      const f = res.json().Fulfillment;
      const cert = new X509Certificate(f.Certificate);
      expect(f.StartDate).toMatch(TIMESTAMP);
      expect([f.StartDate, f.EndDate]).toEqual([stamp(cert.validFrom), stamp(cert.validTo)]);
      const info = (
        await raw(c.token, 'GET', `/Order/${res.json().CertCenterOrderID}?includeContacts=true&includeFulfillment=True`)
      ).json().OrderInfo;
      const own = { FirstName: 'Clients', LastName: 'administrator', Email: 'ops@customer.example' };
      expect(info.ContactInfo.AdminContact).toMatchObject({ ...own, OrganizationName: 'Clients' });
      expect(info.ContactInfo.TechContact).toMatchObject(own);
      expect(info.Fulfillment).toMatchObject({ StartDate: f.StartDate, EndDate: f.EndDate });
      expect(info.OrderStatus).toMatchObject({ StartDate: f.StartDate, EndDate: f.EndDate });
    });

    it('ok/by FILE: the file in place, issued at once', async () => {
      const details = (
        await raw(c.token, 'POST', '/FileData', { CSR: testCsr().pem, ProductCode: 'TrustPoint.FreeDV' })
      ).json().FileAuthDetails;
      for (const host of details.FQDNs as string[])
        files.set(`${host}${details.FilePath}${details.FileName}`, details.FileContents);
      const res = await raw(c.token, 'POST', '/Order', freeOrder('FILE'));
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json().Fulfillment.EndDate).toMatch(TIMESTAMP);
    });

    it('fail/other products keep the spec’s rules: both contacts required', async () => {
      const res = await raw(c.token, 'POST', '/Order', {
        OrderParameters: { ...freeOrder('DNS').OrderParameters, ProductCode: 'TrustPoint.DV', ValidityPeriod: 12 },
      });
      expect(res.statusCode).toBe(417);
      expect(res.json().Errors.map((e: { ErrorField: string }) => e.ErrorField)).toEqual([
        'AdminContact',
        'TechContact',
      ]);
    });

    it('fail/a contact that is given is still checked', async () => {
      const res = await raw(c.token, 'POST', '/Order', {
        ...freeOrder('DNS'),
        AdminContact: { ...contact, Email: 'x' },
      });
      expect(res.statusCode).toBe(417);
      expect(res.json().ErrorField).toBe('AdminContact.Email');
    });
  });

  describe('GET /Orders sorting', () => {
    const ids = async (query: string) =>
      (
        (await raw(c.token, 'GET', `/Orders?ItemsPerPage=1000&${query}`)).json().OrderInfos as {
          ServiceOrderID: number;
        }[]
      ).map((o) => o.ServiceOrderID);

    it('ok/OrderBy=ID&OrderDir=DESC, the default, and any case of names and directions', async () => {
      for (let i = 0; i < 2; i++)
        await raw(c.token, 'POST', '/Order', emailOrder({ ApproverEmail: 'admin@certdesk-test.com' }));
      const desc = await ids('OrderBy=ID&OrderDir=DESC');
      expect(desc.length).toBeGreaterThan(2);
      expect(desc).toEqual([...desc].sort((a, b) => b - a));
      expect(await ids('')).toEqual(desc);
      expect(await ids('OrderBy=id&OrderDir=asc')).toEqual([...desc].reverse());
      expect(await ids('OrderBy=serviceorderid&OrderDir=Desc')).toEqual(desc);
      expect(await ids('OrderBy=ORDERDATE&OrderDir=ASC')).toHaveLength(desc.length);
      expect((await raw(c.token, 'GET', '/Orders')).json()._meta).toMatchObject({ OrderBy: 'ID', OrderDir: 'DESC' });
      expect((await raw(c.token, 'GET', '/Orders?OrderBy=updatedate')).json()._meta.OrderBy).toBe('UpdateDate');
    });

    it.each([
      [
        'OrderBy=Price',
        [['OrderBy', /not one of ID, ServiceOrderID, CertCenterOrderID, OrderDate, UpdateDate, CommonName/]],
      ],
      ['OrderDir=up', [['OrderDir', /not ASC or DESC/]]],
      [
        'OrderBy=x&OrderDir=y',
        [
          ['OrderBy', /not one of/],
          ['OrderDir', /not ASC or DESC/],
        ],
      ],
      [
        'ItemsPerPage=abc&Page=0',
        [
          ['Page', /^Page must be at least 1\.$/],
          ['ItemsPerPage', /^ItemsPerPage must be an integer\.$/],
        ],
      ],
      ['includeFulfillment=yes', [['includeFulfillment', /must be true or false/]]],
    ])('fail/%s: one readable message per faulty field', async (query, expected) => {
      const res = await raw(c.token, 'GET', `/Orders?${query}`);
      expect(res.statusCode).toBe(417);
      const errors = res.json().Errors as { ErrorField: string; Message: string }[];
      expect(errors.map((e) => e.ErrorField)).toEqual(expected.map(([f]) => f));
      errors.forEach((e, i) => expect(e.Message).toMatch(expected[i]![1] as RegExp));
      expect(res.json().Message).toBe(errors[0]!.Message);
    });

    it('fail/a body member of the wrong type in POST /Order: one message for it, not one per union branch', async () => {
      const res = await raw(c.token, 'POST', '/Order', emailOrder({ ServerCount: 'two', InstallationService: 'yes' }));
      expect(res.statusCode).toBe(417);
      expect(res.json().Errors).toEqual([
        {
          ErrorId: expect.any(Number),
          ErrorField: 'OrderParameters.ServerCount',
          Message: 'OrderParameters.ServerCount must be an integer.',
        },
        {
          ErrorId: expect.any(Number),
          ErrorField: 'OrderParameters.InstallationService',
          Message: 'OrderParameters.InstallationService must be true or false (also True/False or 1/0).',
        },
      ]);
    });
  });

  describe('DomainApprovers', () => {
    const byRegisteredDomain = [{ Domain: 'certdesk-test.com', Approvers: ['admin@certdesk-test.com'] }];
    const echoed = {
      DomainApprover: [
        { Domain: 'www.certdesk-test.com', Approvers: [{ ApproverEmail: 'admin@certdesk-test.com' }] },
        { Domain: 'certdesk-test.com', Approvers: [{ ApproverEmail: 'admin@certdesk-test.com' }] },
      ],
    };

    it("ok/keyed by the registered domain, echoed in the API's object shape by POST /Order and every read", async () => {
      const placed = await raw(
        c.token,
        'POST',
        '/Order',
        emailOrder({ DVAuthMethod: 'EMAIL', DomainApprovers: byRegisteredDomain }),
      );
      expect(placed.statusCode, placed.body).toBe(200);
      expect(placed.json().OrderParameters.DomainApprovers).toEqual(echoed);
      const id = placed.json().CertCenterOrderID as number;
      const window = 'FromDate=2000-01-01T00:00:00Z&ToDate=2100-01-01T00:00:00Z';
      expect(
        (await raw(c.token, 'GET', `/Order/${id}?includeOrderParameters=true`)).json().OrderInfo.OrderParameters
          .DomainApprovers,
      ).toEqual(echoed);
      for (const url of [`/Orders?includeOrderParameters=1`, `/ModifiedOrders?${window}&includeOrderParameters=True`]) {
        const infos = (await raw(c.token, 'GET', url)).json().OrderInfos as {
          ServiceOrderID: number;
          OrderParameters: Record<string, unknown>;
        }[];
        expect(infos.find((o) => o.ServiceOrderID === id)!.OrderParameters.DomainApprovers).toEqual(echoed);
      }
    });

    it('ok/POST /Reissue takes them keyed by the registered domain, in the object shape', async () => {
      await publishTxt();
      const placed = await raw(c.token, 'POST', '/Order', emailOrder({ DVAuthMethod: 'DNS' }));
      expect(placed.json().Fulfillment.Certificate).toMatch(/^-----BEGIN CERTIFICATE-----/);
      const id = placed.json().CertCenterOrderID as number;
      // Past the Baseline Requirements' DCV reuse period, so every name is validated again, by e-mail.
      const saved = t.clock.nowSeconds();
      t.clock.set(saved + 400 * 86_400);
      try {
        const later = await t.token(c);
        const res = await raw(later, 'POST', '/Reissue', {
          CertCenterOrderID: id,
          OrderParameters: {
            DVAuthMethod: 'EMAIL',
            DomainApprovers: {
              DomainApprover: [
                { Domain: 'certdesk-test.com', Approvers: [{ ApproverEmail: 'hostmaster@certdesk-test.com' }] },
              ],
            },
          },
        });
        expect(res.statusCode, res.body).toBe(200);
        const status = (await raw(later, 'GET', `/Order/${id}?includeDCVStatus=true`)).json().OrderInfo.DCVStatus as {
          ApproverEmail: string;
        }[];
        expect(status.map((s) => s.ApproverEmail)).toEqual([
          'hostmaster@certdesk-test.com',
          'hostmaster@certdesk-test.com',
        ]);
        const refused = await raw(later, 'POST', '/Reissue', {
          CertCenterOrderID: id,
          OrderParameters: {
            DVAuthMethod: 'EMAIL',
            DomainApprovers: [{ Domain: 'example.org', Approvers: ['admin@example.org'] }],
          },
        });
        expect(refused.statusCode).toBe(417);
        expect(refused.json().ErrorField).toBe('DomainApprovers');
      } finally {
        t.clock.set(saved);
      }
    });

    it('fail/an item for a public suffix covers nothing, and the order is refused with nothing stored', async () => {
      const before = await counts();
      const res = await raw(
        c.token,
        'POST',
        '/Order',
        emailOrder({ DomainApprovers: [{ Domain: 'com', Approvers: ['admin@com'] }] }),
      );
      expect(res.statusCode).toBe(417);
      expect(res.json().ErrorField).toBe('DomainApprovers');
      expect(await counts()).toEqual(before);
    });

    it("ok/GET /ApproverList has the legacy ApproverList (the CommonName's approvers) beside DomainApprovers", async () => {
      const body = (
        await raw(
          c.token,
          'GET',
          '/ApproverList?CommonName=www.certdesk-test.com&ProductCode=TrustPoint.DV&DNSNames=shop.certdesk-test.com',
        )
      ).json();
      const first = body.DomainApprovers.DomainApprover[0];
      expect(first.Domain).toBe('www.certdesk-test.com');
      expect(body.ApproverList).toEqual(first.Approvers);
      expect(body.ApproverList.map((a: { ApproverEmail: string }) => a.ApproverEmail)).toContain(
        'admin@certdesk-test.com',
      );
    });
  });

  describe('POST /TestOrder', () => {
    it('ok/answers as POST /Order would, with order id 0, and stores, charges, mails and validates nothing', async () => {
      const before = await counts();
      const res = await raw(
        c.token,
        'POST',
        '/TestOrder',
        emailOrder({ DomainApprovers: [{ Domain: 'certdesk-test.com', Approvers: 'admin@certdesk-test.com' }] }),
      );
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toMatchObject({
        success: true,
        ServiceOrderID: 0,
        CertCenterOrderID: 0,
        OrderParameters: { ProductCode: 'TrustPoint.DV', SubjectAltNameCount: 0, DVAuthMethod: 'EMAIL' },
      });
      expect(res.json().Timestamp).toMatch(TIMESTAMP);
      expect(res.json().OrderParameters.DomainApprovers.DomainApprover).toHaveLength(2);
      expect(await counts()).toEqual(before);
    });

    it('ok/shows the DNS record when /DNSData made the value, and makes no value itself', async () => {
      const d = await t.customer({ name: 'Tester' });
      const before = await counts();
      const first = (await raw(d.token, 'POST', '/TestOrder', freeOrder('DNS'))).json();
      expect(first.success).toBe(true);
      expect(first.OrderParameters).not.toHaveProperty('DNSAuthDetails');
      expect((await counts()).dcvValues).toBe(before.dcvValues);
      const value = (
        await raw(d.token, 'POST', '/DNSData', { CSR: testCsr().pem, ProductCode: 'TrustPoint.FreeDV' })
      ).json().DNSAuthDetails.DNSValue;
      const second = (await raw(d.token, 'POST', '/TestOrder', freeOrder('DNS'))).json();
      expect(second.OrderParameters.DNSAuthDetails.DNSValue).toBe(value);
      expect(second).not.toHaveProperty('Fulfillment');
    });

    it('fail/refused with the same faults as POST /Order, order id 0 under both names', async () => {
      const bad = { OrderParameters: { ProductCode: 'TrustPoint.DV', ValidityPeriod: 7, CSR: 'not a CSR' } };
      const test = await raw(c.token, 'POST', '/TestOrder', bad);
      const real = await raw(c.token, 'POST', '/Order', bad);
      expect(test.statusCode).toBe(417);
      expect(test.statusCode).toBe(real.statusCode);
      const { Timestamp: _a, ...testBody } = test.json();
      const { Timestamp: _b, ...realBody } = real.json();
      expect(testBody).toEqual(realBody);
      expect(testBody).toMatchObject({ ServiceOrderID: 0, CertCenterOrderID: 0 });
    });

    it('fail/an order the credit left does not cover is refused, as POST /Order refuses it', async () => {
      const poor = await t.customer({ name: 'Poor', creditLimit: 0 });
      const body = emailOrder({ ApproverEmail: 'admin@certdesk-test.com' });
      const test = await raw(poor.token, 'POST', '/TestOrder', body);
      const real = await raw(poor.token, 'POST', '/Order', body);
      expect(test.statusCode).toBe(417);
      expect([test.statusCode, test.json().Message]).toEqual([real.statusCode, real.json().Message]);
      expect(test.json().Message).toMatch(/more than the credit left/);
    });

    it("fail/a PartnerOrderID used before with another body is refused; another customer's is not its concern", async () => {
      await raw(
        c.token,
        'POST',
        '/Order',
        emailOrder({ ApproverEmail: 'admin@certdesk-test.com', PartnerOrderID: 'client-42' }),
      );
      const again = emailOrder({ ApproverEmail: 'webmaster@certdesk-test.com', PartnerOrderID: 'client-42' });
      expect((await raw(c.token, 'POST', '/TestOrder', again)).json()).toMatchObject({
        success: false,
        ErrorField: 'PartnerOrderID',
      });
      const other = await t.customer({ name: 'Other tester' });
      expect((await raw(other.token, 'POST', '/TestOrder', again)).statusCode).toBe(200);
    });

    it('fail/without a token: 401', async () => {
      expect(
        (await t.app.inject({ method: 'POST', url: '/rest/v1/TestOrder', payload: freeOrder('DNS') })).statusCode,
      ).toBe(401);
    });
  });

  describe('trailing slashes', () => {
    it('ok/every route answers the same with a trailing slash (GET /User/ as clients build it included)', async () => {
      const id = (await raw(c.token, 'POST', '/Order', emailOrder({ ApproverEmail: 'admin@certdesk-test.com' }))).json()
        .CertCenterOrderID as number;
      const window = '?FromDate=2000-01-01T00:00:00Z&ToDate=2100-01-01T00:00:00Z';
      const quote = '?ProductCode=TrustPoint.DV&ValidityPeriod=12&ServerCount=1&SubjectAltNameCount=0';
      const gets = [
        '/Profile',
        '/Limit',
        '/Products',
        '/Orders',
        `/Order/${id}`,
        '/User',
        `/ProductDetails?ProductCode=TrustPoint.DV`,
      ];
      for (const [path, query] of [
        ...gets.map((g) => g.split('?') as [string, string?]),
        ['/ModifiedOrders', window.slice(1)],
        ['/Quote', quote.slice(1)],
      ] as [string, string?][]) {
        const q = query === undefined ? '' : `?${query}`;
        const plain = await raw(c.token, 'GET', `${path}${q}`);
        const slashed = await raw(c.token, 'GET', `${path}/${q}`);
        expect([path, slashed.statusCode]).toEqual([path, plain.statusCode]);
        if (plain.statusCode === 200) expect(Object.keys(slashed.json())).toEqual(Object.keys(plain.json()));
      }
      const tested = await raw(
        c.token,
        'POST',
        '/TestOrder/',
        emailOrder({ ApproverEmail: 'admin@certdesk-test.com' }),
      );
      expect(tested.statusCode).toBe(200);
    });
  });
});
