import { describe, expect, it } from 'vitest';
import type { Catalog, Product } from '../../core/catalog.js';
import { CertdeskError } from '../../core/errors.js';
import { CatalogService, loadCatalog } from './catalog.js';
import { quotePrice, type QuoteInput, type QuoteItem } from './pricing.js';

const bundled = loadCatalog();
const service = new CatalogService(bundled);

/** A service over the bundled catalog with one product changed (no loader: pricing must hold on its own). */
function withProduct(code: string, change: Partial<Product>): CatalogService {
  const catalog: Catalog = { ...bundled, products: bundled.products.map((p) => (p.code === code ? { ...p, ...change } : p)) };
  return new CatalogService(catalog);
}

const input = (productCode: string, more: Partial<QuoteInput> = {}): QuoteInput => ({
  productCode, validityPeriod: 12, serverCount: 1, subjectAltNameCount: 0, ...more,
});

function thrown(run: () => unknown): unknown {
  try {
    run();
  } catch (e) {
    return e;
  }
  throw new Error('nothing was thrown');
}

describe('quotePrice', () => {
  const cases: { name: string; in: QuoteInput; currency?: string; total: number; lines?: [QuoteItem, number][] }[] = [
    { name: 'ok/plain product, 12 months', in: input('TrustPoint.DV'), total: 4900, lines: [['base', 4900]] },
    { name: 'ok/plain product, 24 months costs two years', in: input('TrustPoint.DV', { validityPeriod: 24 }), total: 9800 },
    { name: 'ok/listed USD price', in: input('TrustPoint.DV', { validityPeriod: 24 }), currency: 'USD', total: 11000 },
    { name: 'ok/listed GBP price', in: input('Sectra.EV'), currency: 'GBP', total: 21500 },
    { name: 'ok/CHF converted from EUR', in: input('TrustPoint.DV'), currency: 'CHF', total: 4655 },
    { name: 'ok/JPY converted per unit, then two years', in: input('TrustPoint.DV', { validityPeriod: 24 }), currency: 'JPY', total: 15926 },
    { name: 'ok/free product, 365 days', in: input('TrustPoint.FreeDV', { validityPeriod: 365 }), total: 0, lines: [['base', 0]] },
    { name: 'ok/free product, 180 days', in: input('TrustPoint.FreeDV', { validityPeriod: 180 }), currency: 'USD', total: 0 },
    { name: 'ok/server count ignored on certificate pricing', in: input('TrustPoint.DV', { serverCount: 5 }), total: 4900 },
    { name: 'ok/server count 0 means 1', in: input('TrustPoint.DV', { serverCount: 0 }), total: 4900 },
    { name: 'ok/package product without SANs', in: input('TrustPoint.DVMultiDomain'), total: 7900, lines: [['base', 7900]] },
    {
      name: 'ok/package covers the first host', in: input('TrustPoint.DVMultiDomain', { subjectAltNameCount: 1 }), total: 12800,
      lines: [['base', 7900], ['sanPackage', 4900]],
    },
    { name: 'ok/package covers packageSize hosts', in: input('TrustPoint.DVMultiDomain', { subjectAltNameCount: 4 }), total: 12800 },
    {
      name: 'ok/hosts beyond the package', in: input('TrustPoint.DVMultiDomain', { subjectAltNameCount: 6 }), total: 15800,
      lines: [['base', 7900], ['sanPackage', 4900], ['sanHosts', 3000]],
    },
    { name: 'ok/SAN prices are per year', in: input('TrustPoint.DVMultiDomain', { subjectAltNameCount: 6, validityPeriod: 24 }), total: 31600 },
    {
      name: 'ok/wildcard SANs', in: input('TrustPoint.DVMultiDomain', { subjectAltNameCount: 2, wildcardSanCount: 3 }), total: 42500,
      lines: [['base', 7900], ['sanPackage', 4900], ['sanWildcards', 29700]],
    },
    { name: 'ok/wildcards alone buy no package', in: input('TrustPoint.DVMultiDomain', { wildcardSanCount: 1 }), total: 17800 },
    { name: 'ok/package in USD', in: input('TrustPoint.DVMultiDomain', { subjectAltNameCount: 5 }), currency: 'USD', total: 16100 },
    { name: 'ok/package converted to JPY', in: input('TrustPoint.DVMultiDomain', { subjectAltNameCount: 5 }), currency: 'JPY', total: 23239 },
    { name: 'ok/each SAN host on a non-package product', in: input('TrustPoint.OVPro', { subjectAltNameCount: 3 }), total: 60600 },
    { name: 'ok/included hosts are free', in: input('TrustPoint.EVMultiDomain', { subjectAltNameCount: 2 }), total: 49900 },
    {
      name: 'ok/hosts beyond the included ones', in: input('TrustPoint.EVMultiDomain', { subjectAltNameCount: 5, validityPeriod: 24 }), total: 189200,
      lines: [['base', 99800], ['sanHosts', 89400]],
    },
    { name: 'ok/hash brand hosts and wildcards', in: input('Sectra.DVMultiDomain', { subjectAltNameCount: 4, wildcardSanCount: 1 }), total: 21600 },
    { name: 'ok/250 SANs on the hash brand', in: input('Sectra.EVMultiDomain', { subjectAltNameCount: 250 }), total: 3264900 },
    { name: 'ok/one license', in: input('TrustPoint.OVServer'), total: 19900, lines: [['base', 19900]] },
    {
      name: 'ok/further licenses', in: input('TrustPoint.OVServer', { serverCount: 3 }), total: 49700,
      lines: [['base', 19900], ['additionalLicenses', 29800]],
    },
    { name: 'ok/licenses are per year', in: input('TrustPoint.OVServer', { serverCount: 3, validityPeriod: 24 }), total: 99400 },
    { name: 'ok/licenses in USD', in: input('TrustPoint.OVServer', { serverCount: 2 }), currency: 'USD', total: 38400 },
    {
      name: 'ok/extras in EUR', in: input('TrustPoint.OV', { installationService: true, expediteIssuance: true }), total: 24700,
      lines: [['base', 12900], ['installationService', 8900], ['expediteIssuance', 2900]],
    },
    { name: 'ok/extras converted to USD', in: input('TrustPoint.OV', { installationService: true, expediteIssuance: true }), currency: 'USD', total: 26644 },
    { name: 'ok/extras converted to GBP', in: input('TrustPoint.EV', { installationService: true, expediteIssuance: true }), currency: 'GBP', total: 35930 },
    { name: 'ok/extras converted to JPY', in: input('TrustPoint.OV', { installationService: true, expediteIssuance: true }), currency: 'JPY', total: 40139 },
    { name: 'ok/extras are not per year', in: input('TrustPoint.DV', { validityPeriod: 24, installationService: true }), total: 18700 },
    { name: 'ok/installation on the free product', in: input('TrustPoint.FreeDV', { validityPeriod: 200, installationService: true }), total: 8900 },
    { name: 'ok/false extras cost nothing', in: input('Sectra.DV', { installationService: false, expediteIssuance: false }), total: 3900 },
  ];
  it.each(cases)('$name', ({ in: given, currency = 'EUR', total, lines }) => {
    const quote = quotePrice(service, given, currency);
    expect(quote.currency).toBe(currency);
    expect(quote.totalMinor).toBe(total);
    expect(quote.lines.reduce((sum, line) => sum + line.minor, 0)).toBe(total);
    if (lines !== undefined) expect(quote.lines.map((l) => [l.item, l.minor])).toEqual(lines);
  });

  describe('days product pro rata', () => {
    const paid = withProduct('TrustPoint.FreeDV', {
      prices: { EUR: { perYear: 36500 } },
    });
    it.each([
      { name: 'ok/365 days is the yearly price', days: 365, total: 36500 },
      { name: 'ok/180 days', days: 180, total: 18000 },
      { name: 'ok/200 days', days: 200, total: 20000 },
    ])('$name', ({ days, total }) => {
      expect(quotePrice(paid, input('TrustPoint.FreeDV', { validityPeriod: days }), 'EUR').totalMinor).toBe(total);
    });
    it('ok/rounds half up to minor units', () => {
      const odd = withProduct('TrustPoint.FreeDV', { prices: { EUR: { perYear: 1000 } } });
      // 1000 × 181 / 365 = 495.89 → 496; 1000 × 219 / 365 = 600 exactly.
      expect(quotePrice(odd, input('TrustPoint.FreeDV', { validityPeriod: 181 }), 'EUR').totalMinor).toBe(496);
      expect(quotePrice(odd, input('TrustPoint.FreeDV', { validityPeriod: 219 }), 'EUR').totalMinor).toBe(600);
      expect(quotePrice(odd, input('TrustPoint.FreeDV', { validityPeriod: 365 }), 'USD').totalMinor).toBe(1080);
    });
  });

  const failures: { name: string; in: QuoteInput; field: string; message: RegExp; catalog?: CatalogService }[] = [
    { name: 'fail/36 months', in: input('TrustPoint.DV', { validityPeriod: 36 }), field: 'ValidityPeriod', message: /counted in months: 12 or 24/ },
    { name: 'fail/6 months', in: input('TrustPoint.DV', { validityPeriod: 6 }), field: 'ValidityPeriod', message: /12 or 24/ },
    { name: 'fail/fractional months', in: input('TrustPoint.DV', { validityPeriod: 12.5 }), field: 'ValidityPeriod', message: /months/ },
    { name: 'fail/days on a months product', in: input('TrustPoint.DV', { validityPeriod: 365 }), field: 'ValidityPeriod', message: /months/ },
    {
      name: 'fail/months above MaxValidityPeriod', in: input('TrustPoint.DV', { validityPeriod: 24 }), field: 'ValidityPeriod',
      message: /counted in months: 12\.$/, catalog: withProduct('TrustPoint.DV', { maxValidityMonths: 12 }),
    },
    { name: 'fail/179 days', in: input('TrustPoint.FreeDV', { validityPeriod: 179 }), field: 'ValidityPeriod', message: /in days: 180 to 365/ },
    { name: 'fail/366 days', in: input('TrustPoint.FreeDV', { validityPeriod: 366 }), field: 'ValidityPeriod', message: /in days: 180 to 365/ },
    { name: 'fail/months on the days product', in: input('TrustPoint.FreeDV', { validityPeriod: 12 }), field: 'ValidityPeriod', message: /in days/ },
    { name: 'fail/negative server count', in: input('TrustPoint.DV', { serverCount: -1 }), field: 'ServerCount', message: /whole number from 1 to 9999/ },
    { name: 'fail/fractional server count', in: input('TrustPoint.OVServer', { serverCount: 1.5 }), field: 'ServerCount', message: /whole number/ },
    { name: 'fail/too many servers', in: input('TrustPoint.OVServer', { serverCount: 10000 }), field: 'ServerCount', message: /1 to 9999/ },
    { name: 'fail/license product without servers', in: input('TrustPoint.OVServer', { serverCount: 0 }), field: 'ServerCount', message: /required for TrustPoint\.OVServer/ },
    { name: 'fail/brand requires the server count', in: input('Sectra.DV', { serverCount: 0 }), field: 'ServerCount', message: /required for Sectra\.DV/ },
    {
      name: 'fail/more servers than included licenses', in: input('TrustPoint.DV', { serverCount: 3 }), field: 'ServerCount',
      message: /includes 2 server license/, catalog: withProduct('TrustPoint.DV', { licenses: 2 }),
    },
    { name: 'fail/SANs on a single-name product', in: input('TrustPoint.DV', { subjectAltNameCount: 1 }), field: 'SubjectAltNameCount', message: /not a multi-domain product/ },
    { name: 'fail/wildcard SANs on a single-name product', in: input('TrustPoint.DVWildcard', { wildcardSanCount: 1 }), field: 'SubjectAltNames', message: /no wildcard SANs/ },
    { name: 'fail/wildcard SANs not sold', in: input('TrustPoint.OVPro', { wildcardSanCount: 1 }), field: 'SubjectAltNames', message: /does not allow wildcard SANs/ },
    { name: 'fail/more SANs than SANMaxHosts', in: input('TrustPoint.DVMultiDomain', { subjectAltNameCount: 101 }), field: 'SubjectAltNameCount', message: /at most 100 SANs/ },
    {
      name: 'fail/hosts and wildcards together above SANMaxHosts', in: input('TrustPoint.DVMultiDomain', { subjectAltNameCount: 99, wildcardSanCount: 2 }),
      field: 'SubjectAltNameCount', message: /not 101/,
    },
    { name: 'fail/251 SANs on the hash brand', in: input('Sectra.EVMultiDomain', { subjectAltNameCount: 251 }), field: 'SubjectAltNameCount', message: /at most 250/ },
    { name: 'fail/negative SAN count', in: input('TrustPoint.DVMultiDomain', { subjectAltNameCount: -1 }), field: 'SubjectAltNameCount', message: /0 or more/ },
    { name: 'fail/negative wildcard count', in: input('TrustPoint.DVMultiDomain', { wildcardSanCount: -2 }), field: 'SubjectAltNames', message: /0 or more/ },
    { name: 'fail/installation for code signing', in: input('TrustPoint.CodeSigning', { installationService: true }), field: 'InstallationService', message: /only offered for SSL/ },
    { name: 'fail/expedite on the brand without it', in: input('Sectra.EV', { expediteIssuance: true }), field: 'ExpediteIssuance', message: /not offered for Sectra Trust Services/ },
    { name: 'fail/expedite on a DV product', in: input('TrustPoint.DV', { expediteIssuance: true }), field: 'ExpediteIssuance', message: /only offered for OV and EV/ },
  ];
  it.each(failures)('$name', ({ in: given, field, message, catalog = service }) => {
    const error = thrown(() => quotePrice(catalog, given, 'EUR'));
    expect(error).toBeInstanceOf(CertdeskError);
    expect(error).toMatchObject({ kind: 'invalidInput', field });
    expect((error as Error).message).toMatch(message);
  });

  it.each([
    { name: 'fail/unknown product code', code: 'TrustPoint.Gold' },
    { name: 'fail/empty product code', code: '' },
  ])('$name is unknownProduct on ProductCode', ({ code }) => {
    expect(thrown(() => quotePrice(service, input(code), 'EUR'))).toMatchObject({ kind: 'unknownProduct', field: 'ProductCode' });
  });

  it('reports every bad member at once, the first as the flat error', () => {
    const error = thrown(() => quotePrice(service, input('TrustPoint.DV', { validityPeriod: 7, serverCount: -3, subjectAltNameCount: 2, expediteIssuance: true }), 'EUR'));
    expect(error).toMatchObject({ kind: 'invalidInput', field: 'ValidityPeriod' });
    expect((error as CertdeskError).faults.map((f) => f.field)).toEqual(['ValidityPeriod', 'ServerCount', 'SubjectAltNameCount', 'ExpediteIssuance']);
  });

  it('refuses a currency the catalog does not support with a plain Error', () => {
    const error = thrown(() => quotePrice(service, input('TrustPoint.DV'), 'SEK'));
    expect(error).not.toBeInstanceOf(CertdeskError);
    expect((error as Error).message).toContain('currency SEK is not supported');
  });

  it('quotes every bundled product in every supported currency, deterministically', () => {
    for (const product of bundled.products) {
      const validityPeriod = product.validity.unit === 'days' ? product.validity.max : 12;
      for (const currency of service.currencies()) {
        const given = input(product.code, { validityPeriod });
        const first = quotePrice(service, given, currency);
        expect(Number.isSafeInteger(first.totalMinor), `${product.code} ${currency}`).toBe(true);
        expect(quotePrice(service, given, currency)).toEqual(first);
      }
    }
  });
});
