import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isAutomatedProduct } from '../../core/catalog.js';
import { CertdeskError } from '../../core/errors.js';
import { CatalogService, loadCatalog } from './catalog.js';

const bundledText = readFileSync(new URL('../../../catalog/default.json', import.meta.url), 'utf8');
const dir = mkdtempSync(join(tmpdir(), 'certdesk-catalog-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Index of a product in the bundled file, so that paths read by code. */
const codes: string[] = (JSON.parse(bundledText) as { products: { code: string }[] }).products.map((p) => p.code);
const at = (code: string) => {
  const i = codes.indexOf(code);
  if (i < 0) throw new Error(`no product ${code}`);
  return i;
};

type Edit = [path: string, value: unknown];

/** Writes the bundled catalog with edits applied (`undefined` deletes) and returns the file path. */
let files = 0;
function writeCatalog(edits: Edit[]): string {
  const root = JSON.parse(bundledText) as Record<string, unknown>;
  for (const [path, value] of edits) {
    const keys = path.split('.');
    const last = keys.pop() ?? '';
    let node = root;
    for (const key of keys) node = node[key] as Record<string, unknown>;
    if (value === undefined) delete node[last];
    else node[last] = value;
  }
  const file = join(dir, `catalog-${++files}.json`);
  writeFileSync(file, JSON.stringify(root));
  return file;
}

function problemsOf(edits: Edit[]): string {
  try {
    loadCatalog(writeCatalog(edits));
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error('the catalog loaded');
}

describe('loadCatalog', () => {
  it('loads the bundled catalog, frozen', () => {
    const catalog = loadCatalog();
    expect(catalog.products.map((p) => p.code)).toEqual(codes);
    expect(catalog.brands.map((b) => b.id)).toEqual(['TrustPoint', 'Sectra']);
    expect(catalog.extras).toEqual({ installation: 8900, expedite: 2900 });
    expect(Object.isFrozen(catalog.products[0]?.prices)).toBe(true);
  });

  it('bundles the brands and products DESIGN §5.5 asks for', () => {
    const catalog = loadCatalog();
    const [token, hash] = catalog.brands;
    expect(token).toMatchObject({ dcvConvention: 'token', supportsDomainApprovers: true, expediteAvailable: true });
    expect(token?.signatureHashAlgorithms).toContain('SHA2-256');
    expect(hash).toMatchObject({ dcvConvention: 'hash', supportsDomainApprovers: false, maxSans: 250, serverCountRequired: true });
    expect(catalog.brands.filter((b) => b.signatureHashAlgorithms.includes('SHA256-ECC-FULL')).map((b) => b.id)).toEqual(['Sectra']);
    const metaBrands = new Set(catalog.products.filter((p) => p.dvAuthMethods.includes('META')).map((p) => p.brand));
    expect([...metaBrands]).toEqual(['Sectra']);
    expect(new Set(catalog.products.map((p) => p.type))).toEqual(new Set(['SSL', 'CODESIGN', 'SMIME', 'TRUSTSEAL']));
    for (const feature of ['WC', 'SAN', 'WVS', 'DMS', 'TS'] as const) {
      expect(catalog.products.some((p) => p.features.includes(feature)), feature).toBe(true);
    }
    expect(catalog.products.some((p) => p.validationLevel === 'EV' && p.features.includes('SAN'))).toBe(true);
    expect(catalog.products.filter((p) => (p.san?.packageSize ?? 0) > 0).map((p) => p.code)).toEqual(['TrustPoint.DVMultiDomain']);
    expect(catalog.products.filter((p) => p.pricing === 'license').map((p) => p.code)).toEqual(['TrustPoint.OVServer']);
    const free = catalog.products.filter(isAutomatedProduct);
    expect(free.map((p) => p.code)).toEqual(['TrustPoint.FreeDV']);
    expect(free[0]).toMatchObject({ validity: { unit: 'days', min: 180, max: 365 }, dvAuthMethods: ['DNS', 'FILE'] });
    for (const product of catalog.products) {
      expect(Object.keys(product.prices), product.code).toEqual(['EUR', 'USD', 'GBP']);
    }
  });

  it('reads a custom file given by path', () => {
    const file = writeCatalog([['products', JSON.parse(bundledText).products.slice(0, 2)]]);
    expect(loadCatalog(file).products.map((p) => p.code)).toEqual(['TrustPoint.FreeDV', 'TrustPoint.DV']);
  });

  it('fails on a missing file and on a file that is not JSON', () => {
    expect(() => loadCatalog(join(dir, 'absent.json'))).toThrow(/absent\.json: cannot be read as JSON/);
    const file = join(dir, 'broken.json');
    writeFileSync(file, '{"brands": [');
    expect(() => loadCatalog(file)).toThrow(/broken\.json: cannot be read as JSON/);
  });

  const dv = at('TrustPoint.DV');
  const free = at('TrustPoint.FreeDV');
  const multi = at('TrustPoint.DVMultiDomain');
  const cases: { name: string; edits: Edit[]; problem: string }[] = [
    { name: 'fail/unknown top-level key', edits: [['colour', 'blue']], problem: '$.colour: unknown key' },
    { name: 'fail/missing brands', edits: [['brands', undefined]], problem: '$.brands: is required' },
    { name: 'fail/bad DCV convention', edits: [['brands.0.dcvConvention', 'magic']], problem: '$.brands[0].dcvConvention: must be one of "token", "hash"' },
    { name: 'fail/duplicate brand id', edits: [['brands.1.id', 'TrustPoint']], problem: "$.brands[1].id: duplicate brand id 'TrustPoint'" },
    { name: 'fail/brand without the default algorithm', edits: [['brands.0.signatureHashAlgorithms', ['SHA2-256']]], problem: '$.brands[0].signatureHashAlgorithms: must include SHA256-FULL-CHAIN' },
    { name: 'fail/issuer not URL-safe', edits: [['brands.0.issuer', 'Trust/Point']], problem: '$.brands[0].issuer: must be lowercase letters, digits and hyphens' },
    { name: 'fail/code without brand prefix', edits: [[`products.${dv}.code`, 'Other.DV']], problem: `$.products[${dv}].code: must start with its brand id: 'TrustPoint.'` },
    { name: 'fail/unknown brand', edits: [[`products.${dv}.brand`, 'Nope']], problem: `$.products[${dv}].brand: unknown brand 'Nope'` },
    { name: 'fail/duplicate code', edits: [[`products.${dv + 1}.code`, 'TrustPoint.DV']], problem: `$.products[${dv + 1}].code: duplicate product code 'TrustPoint.DV' (also $.products[${dv}])` },
    { name: 'fail/negative price', edits: [[`products.${dv}.prices.EUR.perYear`, -1]], problem: `$.products[${dv}].prices.EUR.perYear: must be >= 0` },
    { name: 'fail/price not in minor units', edits: [[`products.${dv}.prices.USD.perYear`, 54.5]], problem: `$.products[${dv}].prices.USD.perYear: must be integer` },
    { name: 'fail/no EUR price', edits: [[`products.${dv}.prices.EUR`, undefined]], problem: `$.products[${dv}].prices.EUR: is required` },
    { name: 'fail/currency without rate', edits: [[`products.${dv}.prices.SEK`, { perYear: 1 }]], problem: `$.products[${dv}].prices.SEK: currency has no rate in $.exchangeRates` },
    { name: 'fail/currency key not a code', edits: [[`products.${dv}.prices.usd`, { perYear: 1 }]], problem: `$.products[${dv}].prices.usd: unknown key` },
    { name: 'fail/unknown feature', edits: [[`products.${dv}.features`, ['DV', 'XYZ']]], problem: `$.products[${dv}].features[1]: must be one of "DV", "OV"` },
    { name: 'fail/SAN feature without san', edits: [[`products.${dv}.features`, ['DV', 'SAN']]], problem: `$.products[${dv}].san: is required with the SAN feature` },
    { name: 'fail/san without SAN feature', edits: [[`products.${multi}.features`, ['DV', 'ECC']]], problem: `$.products[${multi}].san: is only allowed with the SAN feature` },
    { name: 'fail/SAN host price missing', edits: [[`products.${multi}.prices.GBP.sanHost`, undefined]], problem: `$.products[${multi}].prices.GBP.sanHost: is required by the SAN feature` },
    { name: 'fail/package price without package', edits: [[`products.${multi}.san.packageSize`, 0]], problem: `$.products[${multi}].prices.EUR.sanPackage: does not apply to this product` },
    { name: 'fail/license price on a certificate product', edits: [[`products.${dv}.prices.EUR.perLicense`, 100]], problem: `$.products[${dv}].prices.EUR.perLicense: does not apply to this product` },
    { name: 'fail/SANs above the brand maximum', edits: [[`products.${multi}.san.maxHosts`, 101]], problem: `$.products[${multi}].san.maxHosts: exceeds the brand's maxSans 100` },
    { name: 'fail/36 months', edits: [[`products.${dv}.validity.allowed`, [12, 36]]], problem: `$.products[${dv}].validity.allowed[1]: must be one of 12, 24` },
    { name: 'fail/months above the maximum', edits: [[`products.${dv}.maxValidityMonths`, 12]], problem: `$.products[${dv}].validity.allowed: 24 exceed maxValidityMonths 12` },
    { name: 'fail/unknown validity unit', edits: [[`products.${dv}.validity.unit`, 'weeks']], problem: `$.products[${dv}].validity.unit: must be one of "months", "days"` },
    { name: 'fail/days without max', edits: [[`products.${free}.validity.max`, undefined]], problem: `$.products[${free}].validity.max: is required` },
    { name: 'fail/days min above max', edits: [[`products.${free}.validity.min`, 366]], problem: `$.products[${free}].validity.min: must not exceed validity.max` },
    { name: 'fail/days beyond a year', edits: [[`products.${free}.validity.max`, 400]], problem: `$.products[${free}].validity.max: exceeds maxValidityMonths 12 (365 days)` },
    { name: 'fail/SSL without level', edits: [[`products.${dv}.validationLevel`, null]], problem: `$.products[${dv}].validationLevel: must be DV, OV or EV for SSL products` },
    { name: 'fail/bad level', edits: [[`products.${dv}.validationLevel`, 'XV']], problem: `$.products[${dv}].validationLevel: must be one of "DV", "OV", "EV", null` },
    { name: 'fail/wildcard by FILE', edits: [[`products.${at('TrustPoint.DVWildcard')}.dvAuthMethods`, ['DNS', 'FILE']]], problem: 'cannot use FILE or META' },
    { name: 'fail/code signing with DCV', edits: [[`products.${at('TrustPoint.CodeSigning')}.dvAuthMethods`, ['DNS']]], problem: 'CODESIGN products allow none' },
    { name: 'fail/license product without license', edits: [[`products.${at('TrustPoint.OVServer')}.licenses`, 0]], problem: 'license-priced products include at least 1 license' },
    { name: 'fail/EUR rate not 1', edits: [['exchangeRates.EUR', 2]], problem: '$.exchangeRates.EUR: must be present and equal 1' },
    { name: 'fail/rate too precise', edits: [['exchangeRates.USD', 1.0800001]], problem: '$.exchangeRates.USD: must have at most 6 decimals' },
    { name: 'fail/negative extra', edits: [['extras.installation', -5]], problem: '$.extras.installation: must be >= 0' },
  ];
  it.each(cases)('$name', ({ edits, problem }) => {
    expect(problemsOf(edits)).toContain(problem);
  });

  it('lists every bad key of a broken file at once', () => {
    const message = problemsOf([
      ['colour', 'blue'],
      [`products.${dv}.prices.EUR.perYear`, -1],
      [`products.${dv}.name`, undefined],
      [`products.${free}.validity.max`, undefined],
      [`products.${multi}.prices.GBP.sanHost`, undefined],
      ['exchangeRates.EUR', 2],
    ]);
    expect(message.split('\n').filter((line) => line.startsWith('  - '))).toEqual([
      '  - $.colour: unknown key',
      `  - $.products[${free}].validity.max: is required`,
      `  - $.products[${dv}].name: is required`,
      `  - $.products[${dv}].prices.EUR.perYear: must be >= 0`,
      '  - $.exchangeRates.EUR: must be present and equal 1 (prices are converted from EUR)',
      `  - $.products[${multi}].prices.GBP.sanHost: is required by the SAN feature`,
    ]);
    expect(message).toContain('(6 problems)');
  });
});

describe('CatalogService', () => {
  const service = new CatalogService(loadCatalog());

  it('lists the product codes in catalog order', () => {
    expect(service.productCodes()).toEqual(codes);
  });

  it.each([
    { name: 'fail/unknown code', code: 'TrustPoint.Nope', message: "Unknown ProductCode 'TrustPoint.Nope'" },
    { name: 'fail/empty code', code: '', message: 'ProductCode is required.' },
    { name: 'fail/code of another case', code: 'trustpoint.dv', message: "Unknown ProductCode 'trustpoint.dv'" },
  ])('$name is an unknownProduct error on ProductCode', ({ code, message }) => {
    const error = (() => {
      try {
        service.product(code);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(CertdeskError);
    expect(error).toMatchObject({ kind: 'unknownProduct', field: 'ProductCode' });
    expect((error as Error).message).toContain(message);
  });

  it('finds brands, a product brand and its user agreement', () => {
    expect(service.product('Sectra.OV').type).toBe('SSL');
    expect(service.brand('Sectra').caDomain).toBe('sectra-ca.example');
    expect(service.brandOf('TrustPoint.EV').id).toBe('TrustPoint');
    expect(service.userAgreement('Sectra.DV')).toMatch(/^Sectra Trust Services Subscriber Agreement/);
    expect(() => service.brand('Nope')).toThrow("unknown CA brand 'Nope'");
    expect(service.currencies()).toEqual(['EUR', 'USD', 'GBP', 'CHF', 'JPY']);
  });

  it.each([
    { name: 'ok/EUR is identity', minor: 8900, currency: 'EUR', expected: 8900 },
    { name: 'ok/USD', minor: 8900, currency: 'USD', expected: 9612 },
    { name: 'ok/GBP', minor: 2900, currency: 'GBP', expected: 2465 },
    { name: 'ok/JPY has no decimals, half rounds up', minor: 4900, currency: 'JPY', expected: 7963 },
    { name: 'ok/CHF', minor: 1, currency: 'CHF', expected: 1 },
    { name: 'ok/zero', minor: 0, currency: 'JPY', expected: 0 },
  ])('convertFromEur $name', ({ minor, currency, expected }) => {
    expect(service.convertFromEur(minor, currency)).toBe(expected);
  });

  it('refuses an unsupported currency with a plain Error', () => {
    expect(() => service.productDetails('TrustPoint.DV', 'SEK')).toThrow('currency SEK is not supported');
    expect(() => service.convertFromEur(100, 'SEK')).toThrow('currency SEK is not supported');
  });
});

describe('CatalogService.productDetails', () => {
  const service = new CatalogService(loadCatalog());
  const common = {
    CA: 'TrustPoint CA', Licenses: 0, MaxValidityPeriod: 24, ProductType: 'SSL', RefundPeriod: 30, RenewPeriod: 90,
  };

  it.each([
    { currency: 'EUR', price: 79, pkg: 49, host: 15, wildcard: 99 },
    { currency: 'USD', price: 89, pkg: 55, host: 17, wildcard: 109 },
    { currency: 'GBP', price: 69, pkg: 42, host: 13, wildcard: 85 },
    { currency: 'CHF', price: 75.05, pkg: 46.55, host: 14.25, wildcard: 94.05 },
    { currency: 'JPY', price: 12838, pkg: 7963, host: 2438, wildcard: 16088 },
  ])('ok/SAN package product in $currency', ({ currency, price, pkg, host, wildcard }) => {
    expect(service.productDetails('TrustPoint.DVMultiDomain', currency)).toStrictEqual({
      ...common,
      Currency: currency,
      Features: ['DV', 'SAN', 'ECC'],
      Price: price,
      ProductCode: 'TrustPoint.DVMultiDomain',
      ProductName: 'TrustPoint DV Multi-Domain SSL',
      DVAuthMethods: ['DNS', 'EMAIL', 'FILE'],
      SANFeatures: ['externalDomains', 'HostOnlyIncluded', 'wildcard'],
      SANPackagePrice: pkg,
      SANPackageSize: 4,
      SANMaxHosts: 100,
      SANHostPrice: host,
      SANWildcardPrice: wildcard,
    });
  });

  it('ok/SAN product without package or wildcards leaves those fields out', () => {
    const details = service.productDetails('Sectra.EVMultiDomain', 'GBP');
    expect(details).toMatchObject({ CA: 'Sectra Trust Services', Price: 345, SANMaxHosts: 250, SANHostPrice: 109 });
    expect(Object.keys(details)).not.toContain('SANPackagePrice');
    expect(Object.keys(details)).not.toContain('SANPackageSize');
    expect(Object.keys(details)).not.toContain('SANWildcardPrice');
  });

  it.each([
    { currency: 'EUR', price: 49 },
    { currency: 'USD', price: 55 },
    { currency: 'GBP', price: 42 },
    { currency: 'CHF', price: 46.55 },
    { currency: 'JPY', price: 7963 },
  ])('ok/plain product in $currency', ({ currency, price }) => {
    expect(service.productDetails('TrustPoint.DV', currency)).toStrictEqual({
      ...common,
      Currency: currency,
      Features: ['DV', 'ECC'],
      Price: price,
      ProductCode: 'TrustPoint.DV',
      ProductName: 'TrustPoint DV SSL',
      DVAuthMethods: ['DNS', 'EMAIL', 'FILE'],
    });
  });

  it.each(['EUR', 'USD', 'GBP', 'JPY'])('ok/free automated DV product in %s', (currency) => {
    expect(service.productDetails('TrustPoint.FreeDV', currency)).toStrictEqual({
      ...common,
      Currency: currency,
      Features: ['DV', 'ECC'],
      MaxValidityPeriod: 12,
      Price: 0,
      ProductCode: 'TrustPoint.FreeDV',
      ProductName: 'TrustPoint Free Automated DV',
      RefundPeriod: 0,
      RenewPeriod: 0,
      DVAuthMethods: ['DNS', 'FILE'],
    });
  });

  it('ok/non-TLS products carry their type and no SAN fields', () => {
    expect(service.productDetails('Sectra.TrustSeal', 'EUR')).toMatchObject({ ProductType: 'TRUSTSEAL', Features: ['TS', 'DMS'], DVAuthMethods: [], Price: 99 });
    expect(service.productDetails('TrustPoint.SMIME', 'USD')).toMatchObject({ ProductType: 'SMIME', DVAuthMethods: ['EMAIL'], Price: 32 });
    expect(service.productDetails('TrustPoint.OVServer', 'EUR')).toMatchObject({ Licenses: 1, Price: 199 });
  });
});
