import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext, type TestCustomer } from '../support/app.js';
import { testDialects } from '../support/databases.js';

describe.each(testDialects())('catalog endpoints on $dialect', (dialect) => {
  let t: TestContext;
  let eur: TestCustomer;
  let usd: TestCustomer;
  beforeAll(async () => {
    t = await createTestContext(dialect);
    eur = await t.customer({ name: 'Euro' });
    usd = await t.customer({ name: 'Dollar', currency: 'USD' });
  });
  afterAll(async () => t.close());

  const get = (token: string, url: string) => t.call(token, { method: 'GET', url });

  describe('GET /Products', () => {
    it('ok/lists every product code of the catalog', async () => {
      const res = await get(eur.token, '/rest/v1/Products');
      expect(res.statusCode).toBe(200);
      const { success, Products } = res.json();
      expect(success).toBe(true);
      expect(Products).toEqual(t.services.catalog.productCodes());
      expect(Products).toContain('TrustPoint.DV');
      expect(Products.every((c: string) => /^[A-Za-z0-9]+\.[A-Za-z0-9]+$/.test(c))).toBe(true);
    });
    it('fail/without the quote or read scope → 403', async () => {
      const token = await t.token(eur, 'limit');
      expect((await get(token, '/rest/v1/Products')).statusCode).toBe(403);
    });
    it('fail/without a token → 401', async () => {
      expect((await t.app.inject({ method: 'GET', url: '/rest/v1/Products' })).statusCode).toBe(401);
    });
  });

  describe('GET /ProductDetails', () => {
    it('ok/spec 2.3 fields in the account currency', async () => {
      const res = await get(eur.token, '/rest/v1/ProductDetails?ProductCode=TrustPoint.DVMultiDomain');
      expect(res.statusCode).toBe(200);
      const d = res.json().ProductDetails;
      expect(d).toMatchObject({ ProductCode: 'TrustPoint.DVMultiDomain', Currency: 'EUR', ProductType: 'SSL' });
      for (const key of [
        'CA',
        'Features',
        'Licenses',
        'MaxValidityPeriod',
        'Price',
        'ProductName',
        'RefundPeriod',
        'RenewPeriod',
        'DVAuthMethods',
        'SANFeatures',
        'SANPackagePrice',
        'SANPackageSize',
        'SANMaxHosts',
        'SANHostPrice',
      ]) {
        expect(d).toHaveProperty(key);
      }
      const dollars = (await get(usd.token, '/rest/v1/ProductDetails?ProductCode=TrustPoint.DVMultiDomain')).json()
        .ProductDetails;
      expect(dollars.Currency).toBe('USD');
    });
    it('ok/a product without SANs has no SAN fields', async () => {
      const d = (await get(eur.token, '/rest/v1/ProductDetails?ProductCode=TrustPoint.DV')).json().ProductDetails;
      expect(d).not.toHaveProperty('SANMaxHosts');
    });
    it.each([
      ['fail/unknown product', '/rest/v1/ProductDetails?ProductCode=Nope.DV', 417, -1004],
      ['fail/missing ProductCode', '/rest/v1/ProductDetails', 417, -1001],
      ['fail/empty ProductCode', '/rest/v1/ProductDetails?ProductCode=', 417, -1001],
    ])('%s', async (_name, url, status, errorId) => {
      const res = await get(eur.token, url);
      expect(res.statusCode).toBe(status);
      expect(res.json()).toMatchObject({ success: false, ErrorId: errorId, ErrorField: 'ProductCode' });
    });
  });

  describe('GET /Quote', () => {
    it('ok/price of the one pricing function, with the request echoed', async () => {
      const res = await get(
        eur.token,
        '/rest/v1/Quote?ProductCode=TrustPoint.DV&ValidityPeriod=24&ServerCount=1&SubjectAltNameCount=0',
      );
      expect(res.statusCode).toBe(200);
      const dv = t.services.catalog.prices('TrustPoint.DV', 'EUR');
      expect(res.json()).toEqual({
        success: true,
        Currency: 'EUR',
        Price: (dv.perYear * 2) / 100,
        OrderParameters: { ProductCode: 'TrustPoint.DV', ServerCount: 1, SubjectAltNameCount: 0, ValidityPeriod: 24 },
      });
    });
    it('ok/SubjectAltName is an alias of SubjectAltNameCount (DESIGN §5.2)', async () => {
      const a = (
        await get(
          eur.token,
          '/rest/v1/Quote?ProductCode=TrustPoint.DVMultiDomain&ValidityPeriod=12&ServerCount=1&SubjectAltNameCount=6',
        )
      ).json();
      const b = (
        await get(
          eur.token,
          '/rest/v1/Quote?ProductCode=TrustPoint.DVMultiDomain&ValidityPeriod=12&ServerCount=1&SubjectAltName=6',
        )
      ).json();
      expect(b).toEqual(a);
      expect(a.OrderParameters.SubjectAltNameCount).toBe(6);
    });
    it('ok/without ServerCount the echo shows the 1 that was priced', async () => {
      const res = await get(eur.token, '/rest/v1/Quote?ProductCode=TrustPoint.DV&ValidityPeriod=12');
      expect(res.json().OrderParameters).toEqual({
        ProductCode: 'TrustPoint.DV',
        ServerCount: 1,
        SubjectAltNameCount: 0,
        ValidityPeriod: 12,
      });
    });
    it('ok/the free automated product in days', async () => {
      const res = await get(
        eur.token,
        '/rest/v1/Quote?ProductCode=TrustPoint.FreeDV&ValidityPeriod=180&ServerCount=1&SubjectAltNameCount=0',
      );
      expect(res.json()).toMatchObject({ success: true, Price: 0 });
    });
    it.each([
      [
        'fail/validity of 13 months',
        'ProductCode=TrustPoint.DV&ValidityPeriod=13&ServerCount=1&SubjectAltNameCount=0',
        'ValidityPeriod',
      ],
      [
        'fail/non-numeric validity',
        'ProductCode=TrustPoint.DV&ValidityPeriod=twelve&ServerCount=1&SubjectAltNameCount=0',
        'ValidityPeriod',
      ],
      [
        'fail/SANs on a product without SANs',
        'ProductCode=TrustPoint.DV&ValidityPeriod=12&ServerCount=1&SubjectAltNameCount=3',
        'SubjectAltNameCount',
      ],
      ['fail/unknown product', 'ProductCode=X.Y&ValidityPeriod=12&ServerCount=1&SubjectAltNameCount=0', 'ProductCode'],
      ['fail/missing ValidityPeriod', 'ProductCode=TrustPoint.DV', 'ValidityPeriod'],
      ['fail/negative ServerCount', 'ProductCode=TrustPoint.DV&ValidityPeriod=12&ServerCount=-1', 'ServerCount'],
      [
        'fail/free product for 400 days',
        'ProductCode=TrustPoint.FreeDV&ValidityPeriod=400&ServerCount=1&SubjectAltNameCount=0',
        'ValidityPeriod',
      ],
    ])('%s', async (_name, query, field) => {
      const res = await get(eur.token, `/rest/v1/Quote?${query}`);
      expect(res.statusCode).toBe(417);
      expect(res.json()).toMatchObject({ success: false, ErrorField: field });
    });
  });

  describe('GET /UserAgreement', () => {
    it('ok/the brand’s agreement text', async () => {
      const res = await get(eur.token, '/rest/v1/UserAgreement?ProductCode=Sectra.DV');
      expect(res.json()).toEqual({
        success: true,
        ProductCode: 'Sectra.DV',
        UserAgreement: t.services.catalog.userAgreement('Sectra.DV'),
      });
      expect(res.json().UserAgreement.length).toBeGreaterThan(20);
    });
    it('fail/unknown product → 417', async () => {
      const res = await get(eur.token, '/rest/v1/UserAgreement?ProductCode=Sectra.Nope');
      expect(res.statusCode).toBe(417);
      expect(res.json().ErrorField).toBe('ProductCode');
    });
  });
});
