import type { Principal } from '../../core/index.js';
import { CertdeskError, fromMinor } from '../../core/index.js';
import type { CatalogService, ProductDetails } from './catalog.js';
import { quotePrice, type QuoteInput } from './pricing.js';

export interface QuoteResult {
  readonly currency: string;
  /** Total in the account currency, rendered with its decimals. */
  readonly price: number;
  /** The ServerCount priced (an absent one stands for 1). */
  readonly serverCount: number;
}

/**
 * The catalog as a customer sees it: product codes, details and prices in the account's
 * currency, and the subscriber agreement. Read-only.
 */
export class Shop {
  constructor(private readonly deps: { catalog: CatalogService }) {}

  productCodes(): string[] {
    return this.deps.catalog.productCodes();
  }

  /** Spec 2.3 details of a product in the caller's currency. Throws unknownProduct. */
  async productDetails(principal: Principal, code: string): Promise<ProductDetails> {
    const currency = await this.currencyOf(principal);
    return this.deps.catalog.productDetails(code, currency);
  }

  /**
   * The exact price an order with these parameters would be charged (the one price function
   * that POST /Order reuses). Throws unknownProduct or invalidInput with the offending field.
   */
  async quote(principal: Principal, input: QuoteInput): Promise<QuoteResult> {
    const currency = await this.currencyOf(principal);
    const quote = quotePrice(this.deps.catalog, input, currency);
    return { currency, price: fromMinor(quote.totalMinor, currency), serverCount: quote.serverCount };
  }

  /** The CA's subscriber agreement for a product. Throws unknownProduct. */
  userAgreement(code: string): string {
    this.deps.catalog.product(code);
    return this.deps.catalog.userAgreement(code);
  }

  private async currencyOf(principal: Principal): Promise<string> {
    const { currency } = principal.account;
    if (!this.deps.catalog.currencies().includes(currency)) {
      throw new CertdeskError('conflict', `The catalog has no prices in the account currency ${currency}; ask the operator.`);
    }
    return currency;
  }
}
