import {
  type CaBrand, type Catalog, type DvAuthMethod, type Feature, type Product, type ProductPrice,
  type ProductType, type SanFeature,
} from '../../core/catalog.js';
import { CertdeskError } from '../../core/errors.js';
import { currencyDecimals, fromMinor } from '../../core/money.js';

export { loadCatalog } from './catalog-file.js';
/** The ProductDetails record of spec 2.3, amounts in the caller's currency. */
export interface ProductDetails {
  CA: string;
  Currency: string;
  Features: Feature[];
  Licenses: number;
  MaxValidityPeriod: number;
  Price: number;
  ProductCode: string;
  ProductName: string;
  ProductType: ProductType;
  RefundPeriod: number;
  RenewPeriod: number;
  DVAuthMethods: DvAuthMethod[];
  SANFeatures?: SanFeature[];
  SANPackagePrice?: number;
  SANPackageSize?: number;
  SANMaxHosts?: number;
  SANHostPrice?: number;
  SANWildcardPrice?: number;
}

/** Read access to a validated catalog: lookups, currency conversion, spec renderings. */
export class CatalogService {
  readonly #products = new Map<string, Product>();
  readonly #brands = new Map<string, CaBrand>();

  constructor(readonly catalog: Catalog) {
    for (const product of catalog.products) this.#products.set(product.code, product);
    for (const brand of catalog.brands) this.#brands.set(brand.id, brand);
  }

  /** Every product code in catalog order (GET /Products). */
  productCodes(): string[] {
    return [...this.#products.keys()];
  }

  /** The product; throws CertdeskError `unknownProduct` (field ProductCode) when empty or unknown. */
  product(code: string): Product {
    if (typeof code !== 'string' || code.trim() === '') throw new CertdeskError('unknownProduct', 'ProductCode is required.', { field: 'ProductCode' });
    const product = this.#products.get(code);
    if (product === undefined) {
      throw new CertdeskError('unknownProduct', `Unknown ProductCode '${code}': GET /Products lists the valid codes.`, { field: 'ProductCode' });
    }
    return product;
  }

  /**
   * The product an order was sold under: as kept with the order, else (orders from before that was
   * kept) the catalog's. Throws like `product()` only for an old order whose product left the catalog.
   */
  productOf(order: { readonly productCode: string; readonly soldProduct: Product | null }): Product {
    return order.soldProduct ?? this.product(order.productCode);
  }

  /** Every CA brand, in catalog order. */
  brands(): CaBrand[] {
    return [...this.#brands.values()];
  }

  /** The CA brand; throws a plain Error for an unknown id (a programming fault, never user input). */
  brand(id: string): CaBrand {
    const brand = this.#brands.get(id);
    if (brand === undefined) throw new Error(`unknown CA brand '${id}'`);
    return brand;
  }

  /** The brand of a product; throws like `product()`. */
  brandOf(code: string): CaBrand {
    return this.brand(this.product(code).brand);
  }

  /** The subscriber agreement of the product's brand (GET /UserAgreement); throws like `product()`. */
  userAgreement(code: string): string {
    return this.brandOf(code).userAgreement;
  }

  /** Supported account currencies: the keys of `exchangeRates`. */
  currencies(): string[] {
    return Object.keys(this.catalog.exchangeRates);
  }

  /**
   * EUR minor units → minor units of `currency` at the catalog rate, rounded half up.
   * Throws a plain Error for a currency without a rate.
   */
  convertFromEur(minorEur: number, currency: string): number {
    const rate = this.catalog.exchangeRates[currency];
    if (rate === undefined) throw new Error(`currency ${currency} is not supported by the catalog`);
    // Exact integer arithmetic: rates carry at most 6 decimals (checked at load).
    const numerator = BigInt(minorEur) * BigInt(Math.round(rate * 1e6)) * 10n ** BigInt(currencyDecimals(currency));
    const denominator = 10n ** BigInt(currencyDecimals('EUR')) * 1_000_000n;
    return Number((numerator * 2n + denominator) / (2n * denominator));
  }

  /**
   * The product's prices in `currency`: as listed, else each member converted from EUR.
   * Throws like `product()`, and a plain Error for an unsupported currency.
   */
  prices(code: string, currency: string): ProductPrice {
    return this.pricesOf(this.product(code), currency);
  }

  /**
   * The prices of `product` in `currency`, whether or not the catalog still lists it (a voucher's
   * product as it was sold). Throws a plain Error for an unsupported currency.
   */
  pricesOf(product: Product, currency: string): ProductPrice {
    if (this.catalog.exchangeRates[currency] === undefined) throw new Error(`currency ${currency} is not supported by the catalog`);
    const listed = product.prices[currency];
    if (listed !== undefined) return listed;
    const eur = product.prices['EUR'];
    if (eur === undefined) throw new Error(`product ${product.code} has no EUR price`);
    return Object.fromEntries(
      Object.entries(eur).map(([key, minor]: [string, number]) => [key, this.convertFromEur(minor, currency)]),
    ) as unknown as ProductPrice;
  }

  /** An extra charge (InstallationService, ExpediteIssuance) in `currency` minor units. */
  extra(kind: 'installation' | 'expedite', currency: string): number {
    return this.convertFromEur(this.catalog.extras[kind], currency);
  }

  /**
   * The spec 2.3 ProductDetails of `code` in `currency`. Price is the 12-month price (the
   * 365-day price for the days product). SANPackage* appear only on package products and
   * SANWildcardPrice only where wildcard SANs are sold. Throws like `prices()`.
   */
  productDetails(code: string, currency: string): ProductDetails {
    const product = this.product(code);
    const price = this.prices(code, currency);
    const money = (minor: number) => fromMinor(minor, currency);
    const details: ProductDetails = {
      CA: this.brand(product.brand).name,
      Currency: currency,
      Features: [...product.features],
      Licenses: product.licenses,
      MaxValidityPeriod: product.maxValidityMonths,
      Price: money(price.perYear),
      ProductCode: product.code,
      ProductName: product.name,
      ProductType: product.type,
      RefundPeriod: product.refundPeriodDays,
      RenewPeriod: product.renewPeriodDays,
      DVAuthMethods: [...product.dvAuthMethods],
    };
    const san = product.san;
    if (san === undefined) return details;
    details.SANFeatures = [...san.features];
    if (san.packageSize > 0) {
      details.SANPackagePrice = money(price.sanPackage ?? 0);
      details.SANPackageSize = san.packageSize;
    }
    details.SANMaxHosts = san.maxHosts;
    details.SANHostPrice = money(price.sanHost ?? 0);
    if (price.sanWildcard !== undefined) details.SANWildcardPrice = money(price.sanWildcard);
    return details;
  }
}
