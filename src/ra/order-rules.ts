import {
  CertdeskError, ORDER_DCV_METHODS, SIGNATURE_HASH_ALGORITHMS,
  type CaBrand, type FieldFault, type OrderDcvMethod, type Product, type SignatureHashAlgorithm,
} from '../core/index.js';
import { checkCsr } from '../ca/index.js';
import { baseDomain, checkDnsName, constructedApprovers, isBlockedName, parseCsr, type CsrInfo } from '../validation/index.js';
import type { CatalogService } from './catalog.js';
import { quotePrice } from './pricing.js';

// The rules of POST /Order (spec §4.9) and of the names of an order or a reissue: pure checks
// that report every fault at once and decide nothing about storage.

/** spec 2.7 address. */
export interface AddressInput {
  readonly AddressLine1?: unknown; readonly PostalCode?: unknown; readonly City?: unknown; readonly Region?: unknown;
  readonly Country?: unknown; readonly Phone?: unknown; readonly Fax?: unknown;
}
/** spec 2.7 contact. */
export interface ContactInput {
  readonly Title?: unknown; readonly FirstName?: unknown; readonly LastName?: unknown; readonly Phone?: unknown; readonly Fax?: unknown;
  readonly Email?: unknown; readonly OrganizationName?: unknown; readonly OrganizationAddress?: AddressInput;
}
/** The body of POST /Order as sent: every member is checked here, so types are not trusted. */
export interface OrderInput {
  readonly OrderParameters?: Record<string, unknown>;
  readonly AdminContact?: ContactInput;
  readonly TechContact?: ContactInput;
  readonly OrganizationInfo?: { readonly OrganizationName?: unknown; readonly OrganizationAddress?: AddressInput };
}

const EMAIL = /^[a-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@[a-z0-9-]+(\.[a-z0-9-]+)+$/i;

export const text = (v: unknown): string | undefined => (typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined);
const flag = (v: unknown): boolean => v === true || v === 1 || (typeof v === 'string' && /^(true|1|yes)$/i.test(v.trim()));

/** Every rule of spec §4.9 for POST /Order; throws one error carrying every fault, or returns the order's facts. */
export function checkOrder(input: OrderInput, currency: string, catalog: CatalogService, blockList: readonly string[]): CheckedOrder {
  const faults: FieldFault[] = [];
  const bad = (field: string, message: string, kind: FieldFault['kind'] = 'invalidInput') => faults.push({ kind, field, message });
  const p = input.OrderParameters;
  if (typeof p !== 'object' || p === null || Array.isArray(p)) throw CertdeskError.ofFaults([{ kind: 'invalidInput', field: 'OrderParameters', message: 'OrderParameters is required.' }]);

  // The product.
  const code = text(p.ProductCode);
  let product: Product | undefined;
  if (code === undefined) bad('ProductCode', 'ProductCode is required.');
  else {
    try {
      product = catalog.product(code);
    } catch {
      bad('ProductCode', `Unknown product ${code}.`, 'unknownProduct');
    }
  }
  if (product !== undefined && product.type !== 'SSL') bad('ProductCode', `${product.code} is a ${product.type} product: POST /Order takes TLS (SSL) products.`);
  const brand = product === undefined ? undefined : catalog.brand(product.brand);
  const level = product?.validationLevel ?? 'DV';

  // The CSR: parsed, signature verified, key strong enough.
  let csr: CsrInfo | undefined;
  const csrPem = typeof p.CSR === 'string' ? p.CSR : undefined;
  if (csrPem === undefined || csrPem.trim() === '') bad('CSR', 'CSR is required: a PEM PKCS#10 request.', 'invalidCsr');
  else {
    try {
      csr = parseCsr(csrPem);
      checkCsr(csr.der);
    } catch (e) {
      if (e instanceof CertdeskError) bad('CSR', e.message, e.kind);
      else throw e;
      csr = undefined;
    }
  }

  // The names: the CSR's common name first, then SubjectAltNames (array or comma string).
  const { names, sanHosts } = orderNames(product, csr, p.SubjectAltNames ?? p.SubjectAltName, blockList, bad);
  const wildcardSans = sanHosts.filter((n) => n.startsWith('*.')).length;

  // Price: the /Quote function checks ValidityPeriod, ServerCount, SANs and extras.
  const validityPeriod = typeof p.ValidityPeriod === 'number' ? p.ValidityPeriod : Number(text(p.ValidityPeriod) ?? NaN);
  if (!Number.isFinite(validityPeriod)) bad('ValidityPeriod', 'ValidityPeriod is required: months (12 or 24), or days on the free automated DV product.');
  const serverCountRaw = p.ServerCount === undefined || p.ServerCount === null || p.ServerCount === '' ? 0 : Number(p.ServerCount);
  let priceMinor = 0;
  let serverCount = 1;
  if (product !== undefined && Number.isFinite(validityPeriod)) {
    try {
      const quote = quotePrice(catalog, {
        productCode: product.code, validityPeriod, serverCount: serverCountRaw, subjectAltNameCount: sanHosts.length - wildcardSans, wildcardSanCount: wildcardSans,
        installationService: flag(p.InstallationService), expediteIssuance: flag(p.ExpediteIssuance),
      }, currency);
      priceMinor = quote.totalMinor;
      serverCount = quote.serverCount;
    } catch (e) {
      if (!(e instanceof CertdeskError)) throw e;
      if (e.faults.length > 0) faults.push(...e.faults);
      else bad(e.field ?? 'ProductCode', e.message, e.kind);
    }
  }

  // IsRenewal, IsCompetitiveUpgrade, IsUpsell (spec 2.8).
  if (flag(p.IsCompetitiveUpgrade) && product?.validity.unit === 'months' && validityPeriod > 12) bad('ValidityPeriod', 'IsCompetitiveUpgrade orders run at most 12 months (up to 12 remaining months are added).');
  if (flag(p.IsUpsell) && product?.validity.unit === 'days') bad('IsUpsell', 'IsUpsell upgrades from the free automated DV product to another product, not to itself.');
  if (flag(p.IsRenewal) && flag(p.IsCompetitiveUpgrade)) bad('IsCompetitiveUpgrade', 'An order is either a renewal or a competitive upgrade, not both.');

  // Chain.
  const sha = text(p.SignatureHashAlgorithm) ?? 'SHA256-FULL-CHAIN';
  if (!(SIGNATURE_HASH_ALGORITHMS as readonly string[]).includes(sha)) bad('SignatureHashAlgorithm', `SignatureHashAlgorithm must be one of ${SIGNATURE_HASH_ALGORITHMS.join(', ')}.`);
  else if (brand !== undefined && !brand.signatureHashAlgorithms.includes(sha as SignatureHashAlgorithm)) bad('SignatureHashAlgorithm', `${sha} is not offered by ${brand.name} (offered: ${brand.signatureHashAlgorithms.join(', ')}).`);
  else if ((sha === 'SHA256-ECC-HYBRID' || sha === 'SHA256-ECC-FULL') && csr !== undefined && csr.keyAlgorithm !== 'ECC') bad('SignatureHashAlgorithm', `${sha} is for ECC keys; the CSR holds an ${csr.keyAlgorithm} key.`);

  // DCV method and approvers (spec §4.9 rules 1-3).
  const methodText = (text(p.DVAuthMethod) ?? 'EMAIL').toUpperCase();
  const method = (ORDER_DCV_METHODS as readonly string[]).includes(methodText) ? (methodText as OrderDcvMethod) : undefined;
  if (method === undefined) bad('DVAuthMethod', `DVAuthMethod must be EMAIL, DNS or FILE, not ${methodText}.`);
  else if (product !== undefined && !product.dvAuthMethods.includes(method)) bad('DVAuthMethod', `${product.code} does not offer ${method} validation (offered: ${product.dvAuthMethods.filter((m) => m !== 'META').join(', ')}).`);
  if (method === 'FILE' && names.some((n) => n.startsWith('*.'))) bad('DVAuthMethod', 'FILE validation cannot show control of a wildcard name: use DNS or EMAIL.');
  const approvers = new Map<string, string>();
  if (method === 'EMAIL' && brand !== undefined) checkApprovers(p, brand, names, approvers, bad);

  const partnerOrderId = text(p.PartnerOrderID);
  if (partnerOrderId !== undefined && !/^[\x21-\x7e]{1,64}$/.test(partnerOrderId)) bad('PartnerOrderID', 'PartnerOrderID is 1 to 64 printable ASCII characters without spaces.');
  if (p.PartnerOrderID !== undefined && p.PartnerOrderID !== null && typeof p.PartnerOrderID !== 'string') bad('PartnerOrderID', 'PartnerOrderID is a string.');

  // Contacts and organization.
  if (brand !== undefined) checkContacts(input, level, brand, bad);

  if (faults.length > 0) throw CertdeskError.ofFaults(faults);
  return {
    product: product!, brand: brand!, csr: csr!, csrPem: csrPem!, names, method: method!, approvers, priceMinor, serverCount, validityPeriod,
    signatureHashAlgorithm: sha as SignatureHashAlgorithm,
    params: {
      ProductCode: product!.code, ValidityPeriod: validityPeriod, ServerCount: serverCount, SubjectAltNames: sanHosts, SubjectAltNameCount: sanHosts.length,
      DVAuthMethod: method!, SignatureHashAlgorithm: sha, InstallationService: flag(p.InstallationService), ExpediteIssuance: flag(p.ExpediteIssuance),
      IsRenewal: flag(p.IsRenewal), IsCompetitiveUpgrade: flag(p.IsCompetitiveUpgrade), IsUpsell: flag(p.IsUpsell),
      ...(approvers.size > 0 ? { DomainApprovers: [...approvers].map(([Domain, a]) => ({ Domain, Approvers: [a] })), ApproverEmail: approvers.get(names[0]!) } : {}),
    },
  };
}

/** DomainApprovers (one approver per name) or the deprecated ApproverEmail; each must be a valid approver of its name. */
function checkApprovers(p: Record<string, unknown>, brand: CaBrand, names: string[], out: Map<string, string>, bad: (f: string, m: string) => void): void {
  const domainApprovers = p.DomainApprovers;
  const single = text(p.ApproverEmail)?.toLowerCase();
  if (domainApprovers !== undefined && domainApprovers !== null) {
    if (!brand.supportsDomainApprovers) return bad('DomainApprovers', `${brand.name} does not support DomainApprovers: give ApproverEmail.`);
    const list = Array.isArray(domainApprovers) ? domainApprovers : (domainApprovers as { DomainApprover?: unknown }).DomainApprover;
    if (!Array.isArray(list)) return bad('DomainApprovers', 'DomainApprovers is an array of {Domain, Approvers}.');
    for (const item of list) {
      const domain = text((item as { Domain?: unknown } | null)?.Domain)?.toLowerCase();
      const raw = (item as { Approvers?: unknown } | null)?.Approvers;
      const first = Array.isArray(raw) ? raw.map((a) => (typeof a === 'string' ? a : (a as { ApproverEmail?: unknown } | null)?.ApproverEmail)).find((a) => typeof a === 'string') : typeof raw === 'string' ? raw.split(',')[0] : undefined;
      if (domain === undefined || typeof first !== 'string') { bad('DomainApprovers', 'Each DomainApprovers item needs a Domain and at least one approver address.'); continue; }
      if (!names.includes(domain)) { bad('DomainApprovers', `DomainApprovers names ${domain}, which the order does not.`); continue; }
      out.set(domain, first.trim().toLowerCase());
    }
    for (const n of names) if (!out.has(n) && single !== undefined) out.set(n, single);
    const missing = names.filter((n) => !out.has(n));
    if (missing.length > 0) bad('DomainApprovers', `No approver for ${missing.join(', ')}.`);
  } else if (single !== undefined) {
    for (const n of names) out.set(n, single);
  } else {
    return bad('ApproverEmail', 'EMAIL validation needs ApproverEmail or DomainApprovers (see GET /ApproverList).');
  }
  for (const [name, email] of out) {
    if (!EMAIL.test(email) || !constructedApprovers(name).includes(email)) bad(p.DomainApprovers !== undefined ? 'DomainApprovers' : 'ApproverEmail', `${email} is not an approver of ${name} (see GET /ApproverList).`);
  }
}

function checkContacts(input: OrderInput, level: string, brand: CaBrand, bad: (f: string, m: string) => void): void {
  const orgLevel = level === 'OV' || level === 'EV';
  for (const which of ['AdminContact', 'TechContact'] as const) {
    const c = input[which];
    if (typeof c !== 'object' || c === null) { bad(which, `${which} is required.`); continue; }
    const need = ['FirstName', 'LastName', 'Phone', 'Email', ...(orgLevel ? ['Title', 'Fax'] : []), ...(brand.contactOrganizationRequired ? ['OrganizationName'] : [])] as const;
    for (const f of need) if (text(c[f as keyof ContactInput]) === undefined) bad(`${which}.${f}`, `${which}.${f} is required.`);
    const email = text(c.Email);
    if (email !== undefined && !EMAIL.test(email)) bad(`${which}.Email`, `${which}.Email is not an e-mail address.`);
    if (orgLevel || brand.contactOrganizationRequired) checkAddress(c.OrganizationAddress, `${which}.OrganizationAddress`, false, bad);
  }
  if (orgLevel) {
    const o = input.OrganizationInfo;
    if (typeof o !== 'object' || o === null) bad('OrganizationInfo', 'OrganizationInfo is required for OV and EV orders.');
    else {
      if (text(o.OrganizationName) === undefined) bad('OrganizationInfo.OrganizationName', 'OrganizationInfo.OrganizationName is required.');
      checkAddress(o.OrganizationAddress, 'OrganizationInfo.OrganizationAddress', true, bad);
    }
  }
}

export interface CheckedOrder {
  readonly product: Product;
  readonly brand: CaBrand;
  readonly csr: CsrInfo;
  readonly csrPem: string;
  /** Common name first, then the SANs, normalized and de-duplicated. */
  readonly names: string[];
  readonly method: OrderDcvMethod;
  readonly approvers: Map<string, string>;
  readonly priceMinor: number;
  readonly serverCount: number;
  readonly validityPeriod: number;
  readonly signatureHashAlgorithm: SignatureHashAlgorithm;
  readonly params: Record<string, unknown>;
}

/**
 * The names of an order (or a reissue): the CSR's common name first, then SubjectAltNames (an
 * array or a comma-separated string), each a public, unblocked host name, wildcards only where
 * the product allows them; the common name's www./bare twin comes free; every name the CSR asks
 * for must be among them. Faults go to `bad`. `sanHosts` are the SANs that count for the price.
 */
export function orderNames(
  product: Product | undefined, csr: CsrInfo | undefined, sanInput: unknown, blockList: readonly string[],
  bad: (field: string, message: string, kind?: FieldFault['kind']) => void,
): { names: string[]; sanHosts: string[] } {
  let sans: string[] = [];
  if (Array.isArray(sanInput)) sans = sanInput.map((s) => (typeof s === 'string' ? s : '\u0000'));
  else if (typeof sanInput === 'string') sans = sanInput.split(',');
  else if (sanInput !== undefined && sanInput !== null) bad('SubjectAltNames', 'SubjectAltNames is an array of host names or a comma-separated string.');
  sans = sans.map((s) => s.trim()).filter((s) => s !== '');
  const names: string[] = [];
  const wildcardAllowed = (isCn: boolean) => (isCn ? product?.features.includes('WC') === true : product?.san?.features.includes('wildcard') === true);
  const addName = (raw: string, isCn: boolean) => {
    const field = isCn ? 'CSR' : 'SubjectAltNames';
    const checkedName = checkDnsName(raw, { allowWildcard: true });
    if (!checkedName.ok) return bad(field, checkedName.problem, 'invalidName');
    const n = checkedName.name;
    if (n.startsWith('*.') && product !== undefined && !wildcardAllowed(isCn)) return bad(field, `${product.code} does not allow the wildcard name ${n}.`, 'invalidName');
    if (isBlockedName(n, blockList)) return bad(field, `${n} may not be certified (blocked name).`, 'invalidName');
    if (!names.includes(n)) names.push(n);
  };
  if (csr !== undefined) {
    const cn = csr.commonName !== '' ? csr.commonName : csr.dnsNames[0];
    if (cn === undefined || cn === '') bad('CSR', 'The CSR names no host: give a commonName or a dNSName.', 'invalidCsr');
    else addName(cn, true);
  }
  for (const s of sans) addName(s, false);
  // The common name's www./bare twin comes free with it (as at every CA); any other CSR name must be ordered.
  const twin = names[0] === undefined ? undefined : wwwTwin(names[0]);
  if (csr !== undefined) {
    if (twin !== undefined && csr.dnsNames.includes(twin) && !names.includes(twin)) names.push(twin);
    const outside = csr.dnsNames.filter((n) => !names.includes(n));
    if (outside.length > 0) bad('SubjectAltNames', `The CSR asks for ${outside.join(', ')}, which the order does not name: add them to SubjectAltNames or leave them out of the CSR.`, 'invalidName');
  }
  return { names, sanHosts: names.slice(1).filter((n) => n !== twin) };
}

/** `www.example.com` ↔ `example.com`; undefined for wildcards and names with no registrable parent. */
export function wwwTwin(name: string): string | undefined {
  if (name.startsWith('*.')) return undefined;
  if (name.startsWith('www.')) return baseDomain(name.slice(4)) === undefined ? undefined : name.slice(4);
  return baseDomain(name)?.domain === name ? `www.${name}` : undefined;
}

function checkAddress(a: AddressInput | undefined, field: string, withPhone: boolean, bad: (f: string, m: string) => void): void {
  if (typeof a !== 'object' || a === null) return bad(field, `${field} is required.`);
  for (const f of ['AddressLine1', 'PostalCode', 'City', 'Region', 'Country', ...(withPhone ? ['Phone'] : [])] as const) {
    if (text(a[f as keyof AddressInput]) === undefined) bad(`${field}.${f}`, `${field}.${f} is required.`);
  }
  const country = text(a.Country);
  if (country !== undefined && !/^[A-Za-z]{2}$/.test(country)) bad(`${field}.Country`, `${field}.Country is a two-letter ISO 3166 code.`);
}

