import type { Product, ProductPrice } from '../../core/catalog.js';
import { CertdeskError, type FieldFault } from '../../core/errors.js';
import type { CatalogService } from './catalog.js';

/** What a price depends on: the members of GET /Quote and of POST /Order's OrderParameters. */
export interface QuoteInput {
  productCode: string;
  /** Months (12, 24) on regular products, days (180–365) on the free automated DV product. */
  validityPeriod: number;
  /** 0 stands for the default 1 unless the product is license-priced or its brand requires it. */
  serverCount: number;
  /** Non-wildcard SAN hosts. */
  subjectAltNameCount: number;
  /** Wildcard SAN hosts (counted from SubjectAltNames by POST /Order); default 0. */
  wildcardSanCount?: number;
  installationService?: boolean;
  expediteIssuance?: boolean;
}

export type QuoteItem =
  | 'base' | 'additionalLicenses' | 'sanPackage' | 'sanHosts' | 'sanWildcards' | 'installationService' | 'expediteIssuance';

export interface QuoteLine {
  item: QuoteItem;
  /** Minor units of the quote's currency. */
  minor: number;
}

export interface Quote {
  currency: string;
  /** Sum of the lines, in minor units; rendered with `fromMinor` as Quote.Price. */
  totalMinor: number;
  lines: QuoteLine[];
  /** The ServerCount priced: 0 (absent) on a product that does not require it stands for 1. */
  serverCount: number;
}

/** Highest ServerCount accepted; keeps every product of prices far inside the safe integers. */
export const MAX_SERVER_COUNT = 9999;

/** Validity as a fraction of the priced year: months/12 or days/365. */
interface Term {
  readonly num: number;
  readonly den: number;
}

type Fault = (field: string, message: string) => void;

/**
 * The price of one order: GET /Quote shows it and POST /Order charges it (DESIGN §5.5).
 * Rules (docs/catalog.md): base = perYear × years; a license-priced product covers `licenses`
 * servers and each further server costs perLicense × years; SANs cost the package (when at least
 * one host is ordered) plus sanHost per host beyond it, or sanHost per host beyond `includedHosts`,
 * and sanWildcard per wildcard, all × years; the days product is priced pro rata by days/365;
 * extras are one-off EUR amounts converted to `currency`. Rounds half up to minor units.
 *
 * Throws CertdeskError `unknownProduct` (field ProductCode) for an unknown code, and
 * `invalidInput` carrying every bad member as a fault (fields ValidityPeriod, ServerCount,
 * SubjectAltNameCount, SubjectAltNames for wildcards, InstallationService, ExpediteIssuance);
 * a plain Error for a currency the catalog does not support. Pure: changes nothing.
 */
export function quotePrice(catalog: Pick<CatalogService, 'product' | 'brand' | 'prices' | 'extra'>, input: QuoteInput, currency: string): Quote {
  // Step 1: the product and its prices in the account currency.
  const product = catalog.product(input.productCode);
  const price = catalog.prices(product.code, currency);
  const brand = catalog.brand(product.brand);
  const faults: FieldFault[] = [];
  const fault: Fault = (field, message) => faults.push({ kind: 'invalidInput', field, message });

  // Step 2: every member checked, all faults reported together.
  const term = checkValidity(product, input.validityPeriod, fault);
  const servers = checkServerCount(product, brand.serverCountRequired, input.serverCount, fault);
  const hosts = input.subjectAltNameCount;
  const wildcards = input.wildcardSanCount ?? 0;
  checkSans(product, hosts, wildcards, fault);
  if (input.installationService === true && product.type !== 'SSL') {
    fault('InstallationService', `InstallationService configures a web server and is only offered for SSL products, not ${product.type}.`);
  }
  if (input.expediteIssuance === true) {
    if (!brand.expediteAvailable) fault('ExpediteIssuance', `ExpediteIssuance is not offered for ${brand.name} products.`);
    else if (product.validationLevel !== 'OV' && product.validationLevel !== 'EV') {
      fault('ExpediteIssuance', 'ExpediteIssuance speeds up organization vetting and is only offered for OV and EV products.');
    }
  }
  if (faults.length > 0) throw CertdeskError.ofFaults(faults);

  // Step 3: the lines.
  const lines: QuoteLine[] = [{ item: 'base', minor: prorate(price.perYear, 1, term) }];
  const add = (item: QuoteItem, unit: number | undefined, count: number) => {
    if (count > 0) lines.push({ item, minor: prorate(member(product, unit, item), count, term) });
  };
  if (product.pricing === 'license') add('additionalLicenses', price.perLicense, servers - product.licenses);
  const san = product.san;
  if (san !== undefined && san.packageSize > 0) {
    add('sanPackage', price.sanPackage, hosts > 0 ? 1 : 0);
    add('sanHosts', price.sanHost, hosts - san.packageSize);
  } else if (san !== undefined) {
    add('sanHosts', price.sanHost, hosts - (san.includedHosts ?? 0));
  }
  add('sanWildcards', price.sanWildcard, wildcards);
  if (input.installationService === true) lines.push({ item: 'installationService', minor: catalog.extra('installation', currency) });
  if (input.expediteIssuance === true) lines.push({ item: 'expediteIssuance', minor: catalog.extra('expedite', currency) });
  return { currency, totalMinor: lines.reduce((sum, line) => sum + line.minor, 0), lines, serverCount: servers };
}

function checkValidity(product: Product, period: number, fault: Fault): Term {
  const rule = product.validity;
  if (rule.unit === 'days') {
    if (!Number.isInteger(period) || period < rule.min || period > rule.max) {
      fault('ValidityPeriod', `ValidityPeriod of ${product.code} is counted in days: ${rule.min} to ${rule.max}.`);
    }
    return { num: period, den: 365 };
  }
  const allowed = rule.allowed.filter((months) => months <= product.maxValidityMonths);
  if (!Number.isInteger(period) || !allowed.includes(period)) {
    fault('ValidityPeriod', `ValidityPeriod of ${product.code} is counted in months: ${allowed.join(' or ')}.`);
  }
  return { num: period, den: 12 };
}

function checkServerCount(product: Product, brandRequires: boolean, count: number, fault: Fault): number {
  if (!Number.isInteger(count) || count < 0 || count > MAX_SERVER_COUNT) {
    fault('ServerCount', `ServerCount must be a whole number from 1 to ${MAX_SERVER_COUNT}.`);
    return 1;
  }
  if (count === 0 && (product.pricing === 'license' || brandRequires)) {
    fault('ServerCount', `ServerCount is required for ${product.code}: the number of servers the certificate is installed on (at least 1).`);
    return 1;
  }
  const servers = Math.max(1, count);
  if (product.pricing === 'certificate' && product.licenses > 0 && servers > product.licenses) {
    fault('ServerCount', `${product.code} includes ${product.licenses} server license(s); ServerCount must not exceed ${product.licenses}.`);
  }
  return servers;
}

function checkSans(product: Product, hosts: number, wildcards: number, fault: Fault): void {
  const hostsValid = Number.isInteger(hosts) && hosts >= 0;
  const wildcardsValid = Number.isInteger(wildcards) && wildcards >= 0;
  if (!hostsValid) fault('SubjectAltNameCount', 'SubjectAltNameCount must be a whole number of 0 or more.');
  if (!wildcardsValid) fault('SubjectAltNames', 'The number of wildcard SANs must be a whole number of 0 or more.');
  const san = product.san;
  if (san === undefined) {
    if (hostsValid && hosts > 0) fault('SubjectAltNameCount', `${product.code} is not a multi-domain product: SubjectAltNameCount must be 0.`);
    if (wildcardsValid && wildcards > 0) fault('SubjectAltNames', `${product.code} is not a multi-domain product: it takes no wildcard SANs.`);
    return;
  }
  if (wildcardsValid && wildcards > 0 && !san.features.includes('wildcard')) {
    fault('SubjectAltNames', `${product.code} does not allow wildcard SANs.`);
  }
  if (hostsValid && wildcardsValid && hosts + wildcards > san.maxHosts) {
    fault('SubjectAltNameCount', `${product.code} allows at most ${san.maxHosts} SANs (hosts and wildcards together), not ${hosts + wildcards}.`);
  }
}

/** A price member the catalog loader guarantees for this product; its absence is a bug. */
function member(product: Product, unit: number | undefined, item: QuoteItem): number {
  if (unit === undefined) throw new Error(`catalog product ${product.code} lacks the price for ${item}`);
  return unit;
}

/** unit × count × num / den, rounded half up; every operand is a non-negative safe integer. */
function prorate(unit: ProductPrice['perYear'], count: number, term: Term): number {
  return Math.floor((2 * unit * count * term.num + term.den) / (2 * term.den));
}
