import {
  CertdeskError,
  parseBoolish,
  isAutomatedProduct,
  type CaBrand,
  type Contact,
  type FieldFault,
  type Order,
  type OrderContacts,
  type OrderDcvMethod,
  type OrderParameters,
  type OrganizationInfo,
  type Product,
  type SignatureHashAlgorithm,
  type VoucherTerms,
} from '../../core/index.js';
import type { CheckedCsr } from '../../ca/index.js';
import { DEFAULT_BLOCKED_NAMES, type CsrInfo } from '../../validation/index.js';
import type { CatalogService } from '../catalog/catalog.js';
import { assignApprovers } from './domain-approvers.js';
import { checkContacts, type ContactsInput } from './order-contacts.js';
import { orderNames } from './order-names.js';
import { quotePrice } from '../catalog/pricing.js';
import {
  checkChain,
  checkedCsrOf,
  checkMethod,
  partnerOrderIdProblem,
  withinVoucher,
  type Bad,
} from './order-checks.js';

// The one rule set of an order (spec §4.9, §4.16, §4.29): placing one, reissuing one and
// redeeming a voucher run these checks. Pure: every fault is reported at once and nothing is
// decided about storage.

export type { AddressInput, ContactInput } from './order-contacts.js';

/** The body of POST /Order as sent: every member is checked here, so types are not trusted. */
export interface OrderInput extends ContactsInput {
  readonly OrderParameters?: Record<string, unknown>;
}
/** POST /Reissue's body (spec §4.16) beside ServiceOrderID; members are checked here. */
export interface ReissueInput {
  readonly OrderParameters?: Record<string, unknown>;
  readonly ReissueEmail?: unknown;
}

export const text = (v: unknown): string | undefined =>
  typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined;
const flag = (v: unknown): boolean => parseBoolish(v) === true;

/** How an order is checked beside its body. */
export interface OrderCheckOptions {
  /** The account's own contact, for the contacts a free automated DV order leaves out. */
  readonly accountContact?: Contact;
  /**
   * A voucher being redeemed: its product (as sold, even if the catalog dropped it) is the only one
   * allowed, names, servers and validity stay within what it paid for, extras it did not pay for
   * are refused, and the price is the one it reserved.
   */
  readonly voucher?: VoucherTerms;
}

/**
 * The rules of every way an order is made, over the catalog and the block list (the built-in
 * reserved names and the operator's, merged once here). Each check throws one error carrying
 * every fault (invalidInput, invalidCsr, invalidName, unknownProduct, … with its field), or returns
 * the facts the RA stores.
 */
export class OrderRules {
  private readonly blockList: readonly string[];

  constructor(
    private readonly catalog: CatalogService,
    blockedNames: readonly string[],
  ) {
    this.blockList = [...DEFAULT_BLOCKED_NAMES, ...blockedNames];
  }

  /**
   * Every rule of spec §4.9 for POST /Order (and §4.29 for POST /Redeem, with `options.voucher`),
   * priced in `currency` by the /Quote function. `options.accountContact`: the account's own
   * contact, for the contacts a free automated DV order leaves out (its clients send none); other
   * products require both contacts.
   */
  checkOrder(input: OrderInput, currency: string, options: OrderCheckOptions = {}): CheckedOrder {
    const { accountContact, voucher } = options;
    const faults: FieldFault[] = [];
    const bad: Bad = (field, message, kind = 'invalidInput') => faults.push({ kind, field, message });
    const p = input.OrderParameters;
    if (typeof p !== 'object' || p === null || Array.isArray(p))
      throw CertdeskError.ofFaults([
        { kind: 'invalidInput', field: 'OrderParameters', message: 'OrderParameters is required.' },
      ]);

    // The product.
    const code = text(p.ProductCode);
    let product: Product | undefined;
    if (code === undefined) bad('ProductCode', 'ProductCode is required.');
    else if (voucher !== undefined) {
      // Spec §3.2: the voucher's product and no other; checked further as it was sold.
      product = voucher.product;
      if (code !== voucher.product.code)
        bad('ProductCode', `The voucher is for ${voucher.product.code}; ProductCode must be that.`);
    } else {
      try {
        product = this.catalog.product(code);
      } catch {
        bad('ProductCode', `Unknown product ${code}.`, 'unknownProduct');
      }
    }
    if (product !== undefined && product.type !== 'SSL')
      bad('ProductCode', `${product.code} is a ${product.type} product: POST /Order takes TLS (SSL) products.`);
    const brand = product === undefined ? undefined : this.brandOf(product, bad);
    if (brand === undefined) product = undefined;
    const level = product?.validationLevel ?? 'DV';

    // The CSR, then the names: its common name first, then SubjectAltNames (array or comma string).
    const csrPem = typeof p.CSR === 'string' ? p.CSR : undefined;
    const read =
      csrPem === undefined || csrPem.trim() === ''
        ? void bad('CSR', 'CSR is required: a PEM PKCS#10 request.', 'invalidCsr')
        : checkedCsrOf(csrPem, bad);
    const csr = read?.info;
    const { names, sanHosts } = orderNames(product, csr, p.SubjectAltNames ?? p.SubjectAltName, this.blockList, bad);
    const wildcardSans = sanHosts.filter((n) => n.startsWith('*.')).length;

    // Price: the /Quote function checks ValidityPeriod, ServerCount, SANs and extras.
    // A voucher's own terms stand in for what its redeemer leaves out.
    const validityPeriod =
      typeof p.ValidityPeriod === 'number'
        ? p.ValidityPeriod
        : Number(text(p.ValidityPeriod) ?? voucher?.validityPeriod ?? NaN);
    if (!Number.isFinite(validityPeriod))
      bad('ValidityPeriod', 'ValidityPeriod is required: months (12 or 24), or days on the free automated DV product.');
    const serverCountRaw =
      p.ServerCount === undefined || p.ServerCount === null || p.ServerCount === ''
        ? (voucher?.serverCount ?? 0)
        : Number(p.ServerCount);
    let priceMinor = 0;
    let serverCount = 1;
    if (product !== undefined && Number.isFinite(validityPeriod)) {
      try {
        const quote = quotePrice(
          voucher === undefined
            ? this.catalog
            : {
                product: () => voucher.product,
                brand: (id) => this.catalog.brand(id),
                prices: (_code, cur) => this.catalog.pricesOf(voucher.product, cur),
                extra: (kind, cur) => this.catalog.extra(kind, cur),
              },
          {
            productCode: product.code,
            validityPeriod,
            serverCount: serverCountRaw,
            subjectAltNameCount: sanHosts.length - wildcardSans,
            wildcardSanCount: wildcardSans,
            installationService: flag(p.InstallationService),
            expediteIssuance: flag(p.ExpediteIssuance),
          },
          currency,
        );
        priceMinor = quote.totalMinor;
        serverCount = quote.serverCount;
      } catch (e) {
        if (!(e instanceof CertdeskError)) throw e;
        if (e.faults.length > 0) faults.push(...e.faults);
        else bad(e.field ?? 'ProductCode', e.message, e.kind);
      }
    }
    if (voucher !== undefined) {
      withinVoucher(
        voucher,
        { validityPeriod, serverCount, sanHosts: sanHosts.length - wildcardSans, wildcardSans },
        bad,
      );
      if (flag(p.InstallationService)) bad('InstallationService', 'The voucher does not pay for InstallationService.');
      if (flag(p.ExpediteIssuance)) bad('ExpediteIssuance', 'The voucher does not pay for ExpediteIssuance.');
      priceMinor = voucher.price.minor;
    }

    // IsRenewal, IsCompetitiveUpgrade, IsUpsell (spec 2.8).
    if (flag(p.IsCompetitiveUpgrade) && product?.validity.unit === 'months' && validityPeriod > 12)
      bad('ValidityPeriod', 'IsCompetitiveUpgrade orders run at most 12 months (up to 12 remaining months are added).');
    if (flag(p.IsUpsell) && product?.validity.unit === 'days')
      bad('IsUpsell', 'IsUpsell upgrades from the free automated DV product to another product, not to itself.');
    if (flag(p.IsRenewal) && flag(p.IsCompetitiveUpgrade))
      bad('IsCompetitiveUpgrade', 'An order is either a renewal or a competitive upgrade, not both.');

    const sha = checkChain(text(p.SignatureHashAlgorithm) ?? 'SHA256-FULL-CHAIN', brand, csr, bad);

    // DCV method and approvers (spec §4.9 rules 1-3).
    const method = checkMethod(text(p.DVAuthMethod) ?? 'EMAIL', product, names, bad);
    let approvers = new Map<string, string>();
    if (method === 'EMAIL' && brand !== undefined) {
      const given = p.DomainApprovers !== undefined && p.DomainApprovers !== null;
      if (given && !brand.supportsDomainApprovers)
        bad('DomainApprovers', `${brand.name} does not support DomainApprovers: give ApproverEmail.`);
      else
        approvers = assignApprovers(
          names,
          p.DomainApprovers,
          { email: text(p.ApproverEmail)?.toLowerCase(), field: 'ApproverEmail' },
          bad,
        );
    }

    // A voucher's order takes the voucher's PartnerOrderID: the redeemer's own, if any, is not used.
    const partnerProblem = voucher === undefined ? partnerOrderIdProblem(p.PartnerOrderID) : undefined;
    if (partnerProblem !== undefined) bad('PartnerOrderID', partnerProblem);

    // Contacts and organization.
    const contacts =
      brand === undefined
        ? undefined
        : checkContacts(
            input,
            level === 'OV' || level === 'EV',
            brand,
            bad,
            product !== undefined && isAutomatedProduct(product) ? accountContact : undefined,
          );

    if (faults.length > 0) throw CertdeskError.ofFaults(faults);
    return {
      product: product!,
      brand: brand!,
      csr: csr!,
      checkedCsr: read!.checked,
      csrPem: csrPem!,
      names,
      method: method!,
      approvers,
      priceMinor,
      currency: voucher?.price.currency ?? currency,
      serverCount,
      validityPeriod,
      signatureHashAlgorithm: sha!,
      contacts: contacts!.contacts,
      organization: contacts!.organization,
      params: {
        ProductCode: product!.code,
        ValidityPeriod: validityPeriod,
        ServerCount: serverCount,
        SubjectAltNames: sanHosts,
        SubjectAltNameCount: sanHosts.length,
        DVAuthMethod: method!,
        SignatureHashAlgorithm: sha!,
        InstallationService: flag(p.InstallationService),
        ExpediteIssuance: flag(p.ExpediteIssuance),
        IsRenewal: flag(p.IsRenewal),
        IsCompetitiveUpgrade: flag(p.IsCompetitiveUpgrade),
        IsUpsell: flag(p.IsUpsell),
        ...(approvers.size > 0
          ? {
              DomainApprovers: [...approvers].map(([Domain, a]) => ({ Domain, Approvers: [a] })),
              ApproverEmail: approvers.get(names[0]!),
            }
          : {}),
      },
    };
  }

  /**
   * The rules of spec §4.16 for a reissue of `order` (POST /Reissue, a subscription's renewal): a
   * new CSR or the original one, names within the product's rules and what was paid for (no more
   * SAN hosts, no more wildcards), the chain, and the DCV method — EMAIL when ReissueEmail is given,
   * whose address (else the administrative contact's) approves the names DomainApprovers leaves out.
   */
  checkReissue(order: Order, input: ReissueInput): CheckedReissue {
    const faults: FieldFault[] = [];
    const bad: Bad = (field, message, kind = 'invalidInput') => faults.push({ kind, field, message });
    const p = input.OrderParameters ?? {};
    const product = this.catalog.productOf(order);
    const brand = this.catalog.brand(product.brand);

    // The CSR: a new one, or the original (mass replacement).
    const csrPem = typeof p.CSR === 'string' && p.CSR.trim() !== '' ? p.CSR : (order.csrPem ?? '');
    const csr = checkedCsrOf(csrPem, bad)?.info;
    const { names, sanHosts } = orderNames(
      product,
      csr,
      p.SubjectAltNames ?? p.SubjectAltName ?? order.sanNames,
      this.blockList,
      bad,
    );
    const paidSans = Number(order.parameters.SubjectAltNameCount ?? 0);
    const paidWildcards = (order.parameters.SubjectAltNames ?? []).filter((n) => n.startsWith('*.')).length;
    if (sanHosts.length > paidSans)
      bad('SubjectAltNames', `The order paid for ${paidSans} SAN host(s); the reissue asks for ${sanHosts.length}.`);
    if (sanHosts.filter((n) => n.startsWith('*.')).length > paidWildcards)
      bad('SubjectAltNames', `The order paid for ${paidWildcards} wildcard SAN(s).`);

    const sha = checkChain(text(p.SignatureHashAlgorithm) ?? order.signatureHashAlgorithm, brand, csr, bad);

    // Validation method: DVAuthMethod, or EMAIL to ReissueEmail (else the administrative contact).
    const reissueEmail = text(input.ReissueEmail)?.toLowerCase();
    const method = checkMethod(
      reissueEmail !== undefined ? 'EMAIL' : (text(p.DVAuthMethod) ?? order.dvAuthMethod ?? 'EMAIL'),
      product,
      names,
      bad,
    );
    const adminEmail = order.contacts.AdminContact?.Email;
    const approvers =
      method === 'EMAIL'
        ? assignApprovers(
            names,
            p.DomainApprovers,
            {
              email: reissueEmail ?? (typeof adminEmail === 'string' ? adminEmail.toLowerCase() : undefined),
              field: 'ReissueEmail',
            },
            bad,
          )
        : new Map<string, string>();

    if (faults.length > 0) throw CertdeskError.ofFaults(faults);
    return { brand, csr: csr!, csrPem, names, sanHosts, method: method!, approvers, signatureHashAlgorithm: sha! };
  }

  /** The product's CA brand; a fault when the catalog no longer has it (a voucher's product from an older catalog). */
  private brandOf(product: Product, bad: Bad): CaBrand | undefined {
    try {
      return this.catalog.brand(product.brand);
    } catch {
      bad('ProductCode', `${product.code} is no longer issued: its CA (${product.brand}) has left the catalog.`);
      return undefined;
    }
  }
}

export interface CheckedOrder {
  readonly product: Product;
  readonly brand: CaBrand;
  readonly csr: CsrInfo;
  /** The same CSR as the CA checked it: handed to the issuer when the order issues at once. */
  readonly checkedCsr: CheckedCsr;
  readonly csrPem: string;
  /** Common name first, then the SANs, normalized and de-duplicated. */
  readonly names: string[];
  readonly method: OrderDcvMethod;
  readonly approvers: Map<string, string>;
  readonly priceMinor: number;
  /** The currency of `priceMinor`: the account's. */
  readonly currency: string;
  readonly serverCount: number;
  readonly validityPeriod: number;
  readonly signatureHashAlgorithm: SignatureHashAlgorithm;
  readonly contacts: OrderContacts;
  readonly organization: OrganizationInfo | null;
  /** What the order echoes and stores as its OrderParameters (PartnerOrderID is added when stored). */
  readonly params: Omit<OrderParameters, 'PartnerOrderID'>;
}

export interface CheckedReissue {
  readonly brand: CaBrand;
  readonly csr: CsrInfo;
  readonly csrPem: string;
  /** Common name first, then the SANs, normalized and de-duplicated. */
  readonly names: string[];
  /** The SANs that count against what was paid for. */
  readonly sanHosts: string[];
  readonly method: OrderDcvMethod;
  /** The approver of each name, when validated by EMAIL. */
  readonly approvers: Map<string, string>;
  readonly signatureHashAlgorithm: SignatureHashAlgorithm;
}
