/**
 * The product catalog vocabulary (spec 2.3, 2.8, 2.9; DESIGN §5.5). The catalog is data: these
 * types describe `catalog/default.json` (or the file named by `CERTDESK_CATALOG`) after
 * `loadCatalog()` has validated it. Money is integer minor units throughout.
 */

export const PRODUCT_TYPES = ['SSL', 'CODESIGN', 'SMIME', 'TRUSTSEAL'] as const;
export type ProductType = (typeof PRODUCT_TYPES)[number];

/** Spec 2.3: DMS daily malware scan, TS trust seal, WVS vulnerability assessment, RI ready issuance. */
export const FEATURES = ['DV', 'OV', 'EV', 'SAN', 'WC', 'ECC', 'DSA', 'DMS', 'TS', 'WVS', 'RI'] as const;
export type Feature = (typeof FEATURES)[number];

/** Spec 2.3 lists META as advertised by one brand; orders accept EMAIL, DNS and FILE (spec 2.8). */
export const DV_AUTH_METHODS = ['FILE', 'DNS', 'META', 'EMAIL'] as const;
export type DvAuthMethod = (typeof DV_AUTH_METHODS)[number];

/** Spec 2.9; SHA256-FULL-CHAIN is the default and every brand offers it. */
export const SIGNATURE_HASH_ALGORITHMS = [
  'SHA256-FULL-CHAIN',
  'SHA256-ECC-HYBRID',
  'SHA2-256',
  'SHA256-ECC-FULL',
] as const;
export type SignatureHashAlgorithm = (typeof SIGNATURE_HASH_ALGORITHMS)[number];
export const DEFAULT_SIGNATURE_HASH_ALGORITHM: SignatureHashAlgorithm = 'SHA256-FULL-CHAIN';

export const VALIDATION_LEVELS = ['DV', 'OV', 'EV'] as const;
export type ValidationLevel = (typeof VALIDATION_LEVELS)[number];

/**
 * How a brand's DCV values look (DESIGN §5.5/§5.6). `token`: a random value in
 * `fileauth.txt` and a TXT record at the name. `hash`: `<HashMD5>.txt` holding
 * `<HashSHA256>\n<caDomain>\n<UniqueValue>` and a CNAME `_<HashMD5>.<name>` →
 * `<HashSHA256 split>.<caDomain>`.
 */
export const DCV_CONVENTIONS = ['token', 'hash'] as const;
export type DcvConvention = (typeof DCV_CONVENTIONS)[number];

/** Spec 2.3 SANFeatures values. */
export const SAN_FEATURES = [
  'externalDomains',
  'equalDomains',
  'HostOnlyIncluded',
  'dailyMalwareScan',
  'wildcard',
] as const;
export type SanFeature = (typeof SAN_FEATURES)[number];

export const PRICING_MODELS = ['certificate', 'license'] as const;
/** `license`: ServerCount is mandatory and servers beyond `licenses` cost `perLicense` each. */
export type PricingModel = (typeof PRICING_MODELS)[number];

/** A CA brand ("CA family" in the spec): the prefix of its product codes. */
export interface CaBrand {
  /** Product-code prefix, letters and digits only, e.g. `TrustPoint`. */
  readonly id: string;
  /** Display name, rendered as ProductDetails.CA. */
  readonly name: string;
  readonly dcvConvention: DcvConvention;
  /** False: orders must use ApproverEmail, not DomainApprovers (spec 4.9 rule 2). */
  readonly supportsDomainApprovers: boolean;
  /** Upper bound of SANs of any product of the brand (spec §8: up to 250 for one family). */
  readonly maxSans: number;
  /** True: POST /Order must carry OrderParameters.ServerCount (spec 4.9). */
  readonly serverCountRequired: boolean;
  /** True: both contacts must carry OrganizationName and OrganizationAddress (spec 4.9). */
  readonly contactOrganizationRequired: boolean;
  readonly signatureHashAlgorithms: readonly SignatureHashAlgorithm[];
  /** Domain in hash-style file contents and CNAME targets. */
  readonly caDomain: string;
  /** Id of the built-in CA hierarchy that issues for the brand (URL-safe: `/crl/<issuer>.crl`). */
  readonly issuer: string;
  /** True: ExpediteIssuance may be ordered for the brand's OV/EV products (spec 2.8). */
  readonly expediteAvailable: boolean;
  /** Subscriber agreement text returned by GET /UserAgreement. */
  readonly userAgreement: string;
}

/** Allowed ValidityPeriod values: months (regular products) or days (free automated DV). */
export type ValidityRule =
  | { readonly unit: 'months'; readonly allowed: readonly number[] }
  | { readonly unit: 'days'; readonly min: number; readonly max: number };

/** SAN rules of a product that carries the SAN feature. */
export interface SanRule {
  readonly features: readonly SanFeature[];
  /** Hosts covered by the SAN package price; 0 = the product has no package. */
  readonly packageSize: number;
  /** SANMaxHosts: most SANs (hosts and wildcards together) per certificate. */
  readonly maxHosts: number;
  /** Non-wildcard SANs included in the base price (never together with a package). */
  readonly includedHosts?: number;
}

/** Prices of one product in one currency, integer minor units, each per year of validity. */
export interface ProductPrice {
  /** Certificate price for 12 months (for the days product: 365 days); covers `licenses` servers. */
  readonly perYear: number;
  /** The minimum SAN package, present iff `san.packageSize > 0`. */
  readonly sanPackage?: number;
  /** One SAN host (beyond the package or the included hosts), present iff SAN. */
  readonly sanHost?: number;
  /** One wildcard SAN, present iff SAN feature `wildcard`. */
  readonly sanWildcard?: number;
  /** One server license beyond `licenses`, present iff pricing `license`. */
  readonly perLicense?: number;
}

export interface Product {
  /** `<brand>.<product_name>`. */
  readonly code: string;
  readonly name: string;
  /** Id of the CaBrand; equals the code prefix. */
  readonly brand: string;
  readonly type: ProductType;
  /** DV/OV/EV for SSL products, null for the others. */
  readonly validationLevel: ValidationLevel | null;
  readonly features: readonly Feature[];
  /** Included server licenses; 0 = unlimited. */
  readonly licenses: number;
  readonly maxValidityMonths: number;
  readonly refundPeriodDays: number;
  readonly renewPeriodDays: number;
  readonly dvAuthMethods: readonly DvAuthMethod[];
  readonly validity: ValidityRule;
  readonly pricing: PricingModel;
  readonly san?: SanRule;
  /** Keyed by ISO currency code; EUR always present, others converted from EUR when absent. */
  readonly prices: Readonly<Record<string, ProductPrice>>;
}

export interface Catalog {
  readonly brands: readonly CaBrand[];
  readonly products: readonly Product[];
  /** One-time extras in EUR minor units (spec §8: 89 EUR and 29 EUR). */
  readonly extras: { readonly installation: number; readonly expedite: number };
  /** Units of each supported currency per 1 EUR (EUR itself is 1); at most 6 decimals. */
  readonly exchangeRates: Readonly<Record<string, number>>;
}

/** The free automated DV product family is the one whose ValidityPeriod is counted in days. */
export function isAutomatedProduct(product: Product): boolean {
  return product.validity.unit === 'days';
}
