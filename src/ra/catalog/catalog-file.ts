// Reading and validating a catalog file (docs/catalog.md): schema, consistency rules, messages.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import Type from 'typebox';
import { Settings } from 'typebox/system';
import Value from 'typebox/value';
import {
  DCV_CONVENTIONS, DV_AUTH_METHODS, FEATURES, PRICING_MODELS, PRODUCT_TYPES, SAN_FEATURES,
  DEFAULT_SIGNATURE_HASH_ALGORITHM, SIGNATURE_HASH_ALGORITHMS, VALIDATION_LEVELS,
  type CaBrand, type Catalog, type Product, type ProductPrice,
} from '../../core/catalog.js';

/** Patterns with the wording used when a value breaks them. */
const PATTERNS = {
  brandId: ['^[A-Za-z][A-Za-z0-9]*$', 'must be letters and digits, starting with a letter'],
  code: ['^[A-Za-z][A-Za-z0-9]*\\.[A-Za-z0-9][A-Za-z0-9_-]*$', 'must have the form <brand>.<product_name>'],
  domain: ['^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]$', 'must be a lowercase DNS name such as ca.example'],
  issuer: ['^[a-z0-9][a-z0-9-]{0,62}$', 'must be lowercase letters, digits and hyphens (it names /crl/<issuer>.crl)'],
  currency: ['^[A-Z]{3}$', 'must be an ISO 4217 currency code'],
} as const;
const HINTS = new Map<string, string>(Object.values(PATTERNS));

const Minor = Type.Integer({ minimum: 0 });
const Count = Type.Integer({ minimum: 0 });
const closed = { additionalProperties: false } as const;

export const BrandSchema = Type.Object({
  id: Type.String({ pattern: PATTERNS.brandId[0] }),
  name: Type.String({ minLength: 1 }),
  dcvConvention: Type.Enum(DCV_CONVENTIONS),
  supportsDomainApprovers: Type.Boolean(),
  maxSans: Type.Integer({ minimum: 0, maximum: 1000 }),
  serverCountRequired: Type.Boolean(),
  contactOrganizationRequired: Type.Boolean(),
  signatureHashAlgorithms: Type.Array(Type.Enum(SIGNATURE_HASH_ALGORITHMS), { minItems: 1, uniqueItems: true }),
  caDomain: Type.String({ pattern: PATTERNS.domain[0] }),
  issuer: Type.String({ pattern: PATTERNS.issuer[0] }),
  expediteAvailable: Type.Boolean(),
  userAgreement: Type.String({ minLength: 1 }),
}, closed);

const PriceSchema = Type.Object({
  perYear: Minor,
  sanPackage: Type.Optional(Minor),
  sanHost: Type.Optional(Minor),
  sanWildcard: Type.Optional(Minor),
  perLicense: Type.Optional(Minor),
}, closed);

export const ProductSchema = Type.Object({
  code: Type.String({ pattern: PATTERNS.code[0] }),
  name: Type.String({ minLength: 1 }),
  brand: Type.String({ minLength: 1 }),
  type: Type.Enum(PRODUCT_TYPES),
  validationLevel: Type.Union([Type.Enum(VALIDATION_LEVELS), Type.Null()]),
  features: Type.Array(Type.Enum(FEATURES), { uniqueItems: true }),
  licenses: Type.Integer({ minimum: 0, maximum: 9999 }),
  maxValidityMonths: Type.Integer({ minimum: 12, maximum: 120 }),
  refundPeriodDays: Count,
  renewPeriodDays: Count,
  dvAuthMethods: Type.Array(Type.Enum(DV_AUTH_METHODS), { uniqueItems: true }),
  validity: Type.Union([
    Type.Object({
      unit: Type.Literal('months'),
      allowed: Type.Array(Type.Enum([12, 24]), { minItems: 1, uniqueItems: true }),
    }, closed),
    Type.Object({ unit: Type.Literal('days'), min: Type.Integer({ minimum: 1 }), max: Type.Integer({ minimum: 1 }) }, closed),
  ]),
  pricing: Type.Enum(PRICING_MODELS),
  san: Type.Optional(Type.Object({
    features: Type.Array(Type.Enum(SAN_FEATURES), { uniqueItems: true }),
    packageSize: Count,
    maxHosts: Type.Integer({ minimum: 1 }),
    includedHosts: Type.Optional(Count),
  }, closed)),
  prices: Type.Record(Type.String({ pattern: PATTERNS.currency[0] }), PriceSchema, closed),
}, closed);

export const RatesSchema = Type.Record(Type.String({ pattern: PATTERNS.currency[0] }), Type.Number({ exclusiveMinimum: 0 }), closed);

export const CatalogSchema = Type.Object({
  brands: Type.Array(BrandSchema, { minItems: 1 }),
  products: Type.Array(ProductSchema, { minItems: 1 }),
  extras: Type.Object({ installation: Minor, expedite: Minor }, closed),
  exchangeRates: RatesSchema,
}, closed);

/**
 * Reads and validates a product catalog: the bundled `catalog/default.json`, or `path`
 * (`CERTDESK_CATALOG`). Returns the catalog deep-frozen. Throws an Error whose message lists every
 * problem found, each with its JSON path (`$.products[3].prices.USD: …`), when the file cannot be
 * read, is not JSON, breaks the schema or is inconsistent (see docs/catalog.md).
 */
export function loadCatalog(path?: string): Catalog {
  const source = path ?? new URL('../../../catalog/default.json', import.meta.url);
  const label = typeof source === 'string' ? source : fileURLToPath(source);
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(source, 'utf8'));
  } catch (e) {
    throw new Error(`catalog ${label}: cannot be read as JSON: ${(e as Error).message}`, { cause: e });
  }
  const problems = catalogProblems(raw);
  if (problems.length > 0 || !Value.Check(CatalogSchema, raw)) {
    throw new Error(`catalog ${label} is invalid (${problems.length} problem${problems.length === 1 ? '' : 's'}):\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  }
  const catalog: Catalog = raw;
  return deepFreeze(catalog);
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const member of Object.values(value)) deepFreeze(member);
    Object.freeze(value);
  }
  return value;
}

// Problems are reported as `<JSON path>: <message>`: schema errors first, then the consistency
// rules of docs/catalog.md, which run on every brand and product that passed its own schema.

type Rates = Readonly<Record<string, number>>;
type SchemaError = ReturnType<typeof Value.Errors>[number];

function catalogProblems(raw: unknown): string[] {
  const problems = schemaProblems(raw);
  if (isRecord(raw)) problems.push(...consistencyProblems(raw));
  return [...new Set(problems)];
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function jsonPath(pointer: string): string {
  const segments = pointer.split('/').slice(1).map((s) => s.replaceAll('~1', '/').replaceAll('~0', '~'));
  return '$' + segments.map((s) => (/^\d+$/.test(s) ? `[${s}]` : /^[A-Za-z_$][\w$]*$/.test(s) ? `.${s}` : `[${JSON.stringify(s)}]`)).join('');
}

const child = (pointer: string, key: string) => `${pointer}/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`;

function schemaProblems(raw: unknown): string[] {
  // TypeBox stops at `maxErrors` (8 by default, a process-wide setting): lift it for this
  // synchronous call so that every problem is listed, then restore it.
  const maxErrors = Settings.Get().maxErrors;
  Settings.Set({ maxErrors: Number.MAX_SAFE_INTEGER });
  let errors: SchemaError[];
  try {
    errors = Value.Errors(CatalogSchema, raw);
  } finally {
    Settings.Set({ maxErrors });
  }
  const hidden = new Set<SchemaError>();
  const unionMessages = new Map<SchemaError, string>();
  // A union (validity, validationLevel) is reported through the one branch whose
  // discriminating members fit, else as "must be one of" its alternatives.
  for (const union of errors.filter((e) => e.keyword === 'anyOf')) {
    const prefix = `${union.schemaPath}/anyOf/`;
    const inside = errors.filter((e) => e.schemaPath.startsWith(prefix)
      && (e.instancePath === union.instancePath || e.instancePath.startsWith(`${union.instancePath}/`)));
    const branches = new Map<string, SchemaError[]>();
    for (const e of inside) {
      hidden.add(e);
      const index = e.schemaPath.slice(prefix.length).split('/')[0] ?? '';
      branches.set(index, [...(branches.get(index) ?? []), e]);
    }
    const discriminating = (e: SchemaError) => e.keyword === 'const' || ((e.keyword === 'type' || e.keyword === 'enum') && e.instancePath === union.instancePath);
    const fitting = [...branches.values()].filter((branch) => !branch.some(discriminating));
    if (fitting.length === 1) {
      for (const e of fitting[0] ?? []) hidden.delete(e);
      hidden.add(union);
      continue;
    }
    const misses = inside.filter(discriminating);
    const at = new Set(misses.map((e) => e.instancePath));
    const alternatives = misses.flatMap((e) => {
      const params = e.params as { allowedValue?: unknown; allowedValues?: unknown[]; type?: string };
      if (e.keyword === 'type') return [params.type === 'null' ? 'null' : `${/^[aeiou]/.test(params.type ?? '') ? 'an' : 'a'} ${params.type}`];
      return (params.allowedValues ?? [params.allowedValue]).map((v) => JSON.stringify(v));
    });
    const unique = [...new Set(alternatives)];
    unionMessages.set(union, at.size === 1
      ? `${jsonPath([...at][0] ?? '')}: must be ${unique.length === 1 ? '' : 'one of '}${unique.join(', ')}`
      : `${jsonPath(union.instancePath)}: matches none of the allowed forms`);
  }
  return errors.filter((e) => !hidden.has(e)).flatMap((e) => {
    const params = e.params as { additionalProperties?: string[]; requiredProperties?: string[]; allowedValues?: unknown[]; pattern?: string };
    if (e.keyword === 'anyOf') return [unionMessages.get(e) ?? `${jsonPath(e.instancePath)}: ${e.message}`];
    if (e.keyword === 'boolean' && e.schemaPath.endsWith('/additionalProperties')) return [];
    if (e.keyword === 'additionalProperties') {
      return (params.additionalProperties ?? []).map((key) => `${jsonPath(child(e.instancePath, key))}: unknown key`);
    }
    if (e.keyword === 'required') {
      return (params.requiredProperties ?? []).map((key) => `${jsonPath(child(e.instancePath, key))}: is required`);
    }
    if (e.keyword === 'enum') {
      return [`${jsonPath(e.instancePath)}: must be one of ${(params.allowedValues ?? []).map((v) => JSON.stringify(v)).join(', ')}`];
    }
    const hint = e.keyword === 'pattern' ? HINTS.get(params.pattern ?? '') : undefined;
    return [`${jsonPath(e.instancePath)}: ${hint ?? e.message}`];
  });
}

function consistencyProblems(raw: Record<string, unknown>): string[] {
  const problems: string[] = [];
  const rates = Value.Check(RatesSchema, raw['exchangeRates']) ? raw['exchangeRates'] : undefined;
  if (rates !== undefined) {
    if (rates['EUR'] !== 1) problems.push('$.exchangeRates.EUR: must be present and equal 1 (prices are converted from EUR)');
    for (const [currency, rate] of Object.entries(rates)) {
      if (Number(rate.toFixed(6)) !== rate) problems.push(`$.exchangeRates.${currency}: must have at most 6 decimals`);
    }
  }
  const brandIds = new Set<string>();
  const brands = new Map<string, CaBrand>();
  (Array.isArray(raw['brands']) ? raw['brands'] : []).forEach((brand: unknown, i) => {
    if (!isRecord(brand) || typeof brand['id'] !== 'string') return;
    if (brandIds.has(brand['id'])) problems.push(`$.brands[${i}].id: duplicate brand id '${brand['id']}'`);
    brandIds.add(brand['id']);
    if (!Value.Check(BrandSchema, brand) || brands.has(brand.id)) return;
    brands.set(brand.id, brand);
    if (!brand.signatureHashAlgorithms.includes(DEFAULT_SIGNATURE_HASH_ALGORITHM)) {
      problems.push(`$.brands[${i}].signatureHashAlgorithms: must include ${DEFAULT_SIGNATURE_HASH_ALGORITHM}, the default (spec 2.9)`);
    }
  });
  const codes = new Map<string, number>();
  (Array.isArray(raw['products']) ? raw['products'] : []).forEach((product: unknown, i) => {
    if (!isRecord(product)) return;
    const code = product['code'];
    const first = typeof code === 'string' ? codes.get(code) : undefined;
    if (first !== undefined) problems.push(`$.products[${i}].code: duplicate product code '${String(code)}' (also $.products[${first}])`);
    else if (typeof code === 'string') codes.set(code, i);
    if (!Value.Check(ProductSchema, product)) return;
    const at = (key: string, message: string) => problems.push(`$.products[${i}].${key}: ${message}`);
    productProblems(product, at, brandIds, brands.get(product.brand), rates);
  });
  return problems;
}

const LEVELS: readonly string[] = VALIDATION_LEVELS;
const TLS_ONLY_FEATURES: readonly string[] = [...VALIDATION_LEVELS, 'SAN', 'WC'];

function productProblems(p: Product, at: (key: string, message: string) => void, brandIds: Set<string>, brand: CaBrand | undefined, rates: Rates | undefined): void {
  if (!brandIds.has(p.brand)) at('brand', `unknown brand '${p.brand}'`);
  if (p.code.split('.')[0] !== p.brand) at('code', `must start with its brand id: '${p.brand}.'`);
  if (p.type === 'SSL') {
    const levels = p.features.filter((f) => LEVELS.includes(f));
    if (p.validationLevel === null) at('validationLevel', 'must be DV, OV or EV for SSL products');
    else if (levels.length !== 1 || levels[0] !== p.validationLevel) at('features', `must hold exactly one validation level, ${p.validationLevel}`);
    if (p.dvAuthMethods.length === 0) at('dvAuthMethods', 'SSL products need at least one method');
  } else {
    if (p.validationLevel !== null) at('validationLevel', `must be null for ${p.type} products`);
    const tlsOnly = p.features.filter((f) => TLS_ONLY_FEATURES.includes(f));
    if (tlsOnly.length > 0) at('features', `${tlsOnly.join(', ')} only apply to SSL products`);
    if (p.dvAuthMethods.some((m) => p.type !== 'SMIME' || m !== 'EMAIL')) at('dvAuthMethods', `${p.type} products allow ${p.type === 'SMIME' ? 'only EMAIL' : 'none'}`);
  }
  if (p.type === 'TRUSTSEAL' && !p.features.includes('TS')) at('features', 'trust seal products need the TS feature');
  if (p.features.includes('WC') && p.dvAuthMethods.some((m) => m === 'FILE' || m === 'META')) at('dvAuthMethods', 'wildcard products cannot use FILE or META (DESIGN §5.6)');
  const wildcards = p.features.includes('WC') || (p.san?.features.includes('wildcard') ?? false);
  if (wildcards && p.validationLevel === 'EV') at('features', 'EV certificates cannot hold wildcard names (EV Guidelines 9.8.1)');
  const v = p.validity;
  if (v.unit === 'months') {
    const over = v.allowed.filter((m) => m > p.maxValidityMonths);
    if (over.length > 0) at('validity.allowed', `${over.join(', ')} exceed maxValidityMonths ${p.maxValidityMonths}`);
  } else {
    const limit = Math.floor((p.maxValidityMonths * 365) / 12);
    if (v.min > v.max) at('validity.min', 'must not exceed validity.max');
    if (v.max > limit) at('validity.max', `exceeds maxValidityMonths ${p.maxValidityMonths} (${limit} days)`);
    if (p.validationLevel !== 'DV') at('validity.unit', "'days' is only for the free automated DV product (validationLevel DV)");
  }
  if (p.pricing === 'license' && p.licenses < 1) at('licenses', 'license-priced products include at least 1 license');
  const hasSan = p.features.includes('SAN');
  if (hasSan !== (p.san !== undefined)) at('san', hasSan ? 'is required with the SAN feature' : 'is only allowed with the SAN feature');
  const san = p.san;
  if (san !== undefined) {
    if (brand !== undefined && san.maxHosts > brand.maxSans) at('san.maxHosts', `exceeds the brand's maxSans ${brand.maxSans}`);
    if (san.packageSize > san.maxHosts) at('san.packageSize', 'exceeds san.maxHosts');
    if ((san.includedHosts ?? 0) > san.maxHosts) at('san.includedHosts', 'exceeds san.maxHosts');
    if (san.packageSize > 0 && (san.includedHosts ?? 0) > 0) at('san.includedHosts', 'cannot be combined with a SAN package');
    if (san.features.includes('dailyMalwareScan') && !p.features.includes('DMS')) at('san.features', 'dailyMalwareScan needs the DMS feature');
  }
  // Which price members a product needs follows from its SAN rule and pricing model.
  const needs: Record<keyof ProductPrice, string | false> = {
    perYear: 'every product',
    sanPackage: (san?.packageSize ?? 0) > 0 && 'san.packageSize > 0',
    sanHost: san !== undefined && 'the SAN feature',
    sanWildcard: (san?.features.includes('wildcard') ?? false) && "SAN feature 'wildcard'",
    perLicense: p.pricing === 'license' && "pricing 'license'",
  };
  if (p.prices['EUR'] === undefined) at('prices.EUR', 'is required (other currencies are converted from EUR)');
  for (const [currency, price] of Object.entries(p.prices)) {
    if (rates !== undefined && rates[currency] === undefined) at(`prices.${currency}`, 'currency has no rate in $.exchangeRates');
    for (const [key, reason] of Object.entries(needs) as [keyof ProductPrice, string | false][]) {
      if (reason !== false && price[key] === undefined) at(`prices.${currency}.${key}`, `is required by ${reason}`);
      if (reason === false && price[key] !== undefined) at(`prices.${currency}.${key}`, 'does not apply to this product');
    }
  }
}
