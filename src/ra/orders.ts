import { createHash } from 'node:crypto';
import {
  CertdeskError, ORDER_DCV_METHODS, SIGNATURE_HASH_ALGORITHMS, waitingFor,
  type CaBrand, type Clock, type CustomerId, type FieldFault, type OrderDcvMethod, type Principal, type Product, type SignatureHashAlgorithm,
} from '../core/index.js';
import { checkCsr } from '../ca/index.js';
import type { AuditRepo, DcvValuesRepo, JobsRepo, NewOrderName, OrderFilter, OrderNameRow, OrderRow, OrdersRepo } from '../storage/index.js';
import { isUniqueViolation } from '../storage/index.js';
import { DEFAULT_BLOCKED_NAMES, baseDomain, checkDnsName, constructedApprovers, isBlockedName, parseCsr, type CsrInfo } from '../validation/index.js';
import type { CatalogService } from './catalog.js';
import { dcvExpectations, type DnsAuthDetails, type FileAuthDetails } from './dcv-details.js';
import type { EmailApprovals } from './email-approval.js';
import type { OrderFlow } from './order-flow.js';
import { actorName, type Actor } from './actor.js';
import { quotePrice } from './pricing.js';
import { randomString } from './secrets.js';

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

export type { Actor } from './actor.js';

export interface PlacedOrder {
  readonly order: OrderRow;
  readonly names: OrderNameRow[];
  /** True when this was a retry of an order placed before (nothing new was stored or charged). */
  readonly replayed: boolean;
  readonly dns?: DnsAuthDetails;
  readonly file?: FileAuthDetails;
  /** Issued inline (the proof was in place when the order came). */
  readonly certificate?: OrderCertificate;
}

export interface OrderRepos {
  readonly orders: OrdersRepo;
  readonly audit: Pick<AuditRepo, 'append'>;
  readonly jobs: Pick<JobsRepo, 'enqueueInTransaction'>;
}

/** What a reader sees of an issued certificate (Fulfillment, StartDate/EndDate). */
export interface OrderCertificate {
  readonly certificate: string;
  readonly intermediate: string;
  readonly pkcs7: string;
  readonly notBefore: number;
  readonly notAfter: number;
}

export interface OrderView {
  readonly order: OrderRow;
  readonly names: OrderNameRow[];
  /** The current certificate of a completed order (with includeFulfillment). */
  readonly certificate?: OrderCertificate;
  /** StartDate and EndDate of the current certificate. */
  readonly dates?: { readonly notBefore: number; readonly notAfter: number };
  /** The current certificate chains to a distrusted CA (DESIGN §5.8): the phase dates. */
  readonly distrust?: { phase1: number | null; phase2: number | null };
}

export interface OrdersDeps extends OrderRepos {
  /** The order flow: proofs checked and certificates issued inline when the proof is already in place. */
  readonly flow: Pick<OrderFlow, 'checkProof' | 'caaProblem' | 'issue'>;
  /** Sends the approval mails of an EMAIL order once it is stored. */
  readonly approvals: Pick<EmailApprovals, 'sendForNewOrder'>;
  /** Rebuilds a stored certificate's chain and bundle (the CA's `fulfillment`). */
  readonly certificates: {
    fulfillment(serial: string): Promise<OrderCertificate | undefined>;
    /** CA certificates marked distrusted, with the phase dates (`ca distrust`). */
    distrustMarks(): Map<string, { phase1: number | null; phase2: number | null }>;
  };
  readonly catalog: CatalogService;
  readonly dcvValues: Pick<DcvValuesRepo, 'getOrCreate'>;
  readonly clock: Clock;
  readonly blockedNames: readonly string[];
  readonly transact: <T>(fn: (repos: OrderRepos) => Promise<T>) => Promise<T>;
}

/** Largest page of GET /Orders (documented in docs/orders.md). */
export const MAX_ITEMS_PER_PAGE = 1000;
export const DEFAULT_ITEMS_PER_PAGE = 100;
const EMAIL = /^[a-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@[a-z0-9-]+(\.[a-z0-9-]+)+$/i;

const text = (v: unknown): string | undefined => (typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined);
const flag = (v: unknown): boolean => v === true || v === 1 || (typeof v === 'string' && /^(true|1|yes)$/i.test(v.trim()));

/**
 * Placing and reading orders (spec §4.9, §4.12–4.14; DESIGN §5.4–§5.6). Every rule of POST /Order
 * is checked before anything is written, and every fault is reported at once; then the price is
 * reserved against the credit limit, the order, its names and the charge are stored in one
 * transaction.
 */
export class Orders {
  private readonly blockList: readonly string[];

  constructor(private readonly deps: OrdersDeps) {
    this.blockList = [...DEFAULT_BLOCKED_NAMES, ...deps.blockedNames];
  }

  async placeOrder(actor: Actor, input: OrderInput): Promise<PlacedOrder> {
    const { principal } = actor;
    const customerId = principal.customerId;
    const checked = this.check(input, principal.account.currency);
    const p = input.OrderParameters ?? {};

    // Idempotency (DESIGN §5.5): the same PartnerOrderID and body return the original order.
    const requestHash = createHash('sha256').update(canonicalJson(input)).digest('hex');
    const given = text(p.PartnerOrderID);
    if (given !== undefined) {
      const existing = await this.deps.orders.byPartnerOrderId(customerId, given);
      if (existing !== undefined) return this.replay(customerId, existing, requestHash, checked);
    }
    const partnerOrderId = given ?? `cd-${randomString('abcdefghijklmnopqrstuvwxyz0123456789', 20)}`;

    const now = this.deps.clock.nowSeconds();
    const dcv = await dcvExpectations(this.deps, customerId, checked.brand, checked.csr, checked.names);
    const method = checked.method;

    // CAA at order time (and again right before signing); a lookup that cannot be answered now is left to that second check.
    const caa = await this.deps.flow.caaProblem(checked.brand.id, checked.names);
    if (caa?.forbidden !== undefined) throw CertdeskError.ofFaults([{ kind: 'invalidName', field: 'CommonName', message: caa.forbidden }]);

    // DV by DNS or FILE with the proof already in place: validated now and issued inline (DESIGN §2).
    // The free automated product's clients expect exactly that: for it a missing proof refuses the order.
    let inline = false;
    if ((method === 'DNS' || method === 'FILE') && checked.product.validationLevel === 'DV') {
      const facts = { ca_brand: checked.brand.id, dcv_value: dcv.value, csr_pem: checked.csrPem, hashes: checked.csr };
      const results = await Promise.all(checked.names.map((n) => this.deps.flow.checkProof(facts, n, method)));
      const failed = results.map((r, i) => (r.ok ? undefined : `${checked.names[i]!}: ${r.problem}`)).filter((x): x is string => x !== undefined);
      inline = failed.length === 0 && caa === undefined;
      if (failed.length > 0 && checked.product.validity.unit === 'days') {
        throw new CertdeskError('dcvFailed', `The ${method === 'DNS' ? 'DNS record' : 'file'} was not found or is wrong: ${failed.join('; ')}`, { field: method === 'DNS' ? 'failed_dns' : 'failed_file' });
      }
    }
    const row = {
      customer_id: customerId, partner_order_id: partnerOrderId, request_hash: requestHash,
      product_code: checked.product.code, product_type: checked.product.type, ca_brand: checked.brand.id,
      validation_level: checked.product.validationLevel, common_name: checked.names[0]!,
      major_status: 'PENDING', minor_status: inline ? 'WF_ISSUANCE' : waitingFor(method), dv_auth_method: method,
      signature_hash_algorithm: checked.signatureHashAlgorithm, validity_period: checked.validityPeriod, server_count: checked.serverCount,
      san_names: JSON.stringify(checked.names.slice(1)),
      params_json: JSON.stringify({ ...checked.params, PartnerOrderID: partnerOrderId }),
      contacts_json: JSON.stringify({ AdminContact: input.AdminContact, TechContact: input.TechContact }),
      organization_json: input.OrganizationInfo === undefined ? null : JSON.stringify(input.OrganizationInfo),
      csr_pem: checked.csrPem, csr_sha256: checked.csr.hashSha256, price_minor: checked.priceMinor, currency: principal.account.currency,
      billing_status: 'uncleared', order_date: now, update_date: now, issued_at: null, term_end: null, failure_reason: null, dcv_value: dcv.value,
    };
    const names: NewOrderName[] = checked.names.map((name) => ({
      name, method, status: inline ? 'VALIDATED' : 'PENDING', approver_email: checked.approvers.get(name) ?? null, ...(inline ? { validated_at: now, last_checked_at: now } : {}),
    }));

    let id: number;
    try {
      id = await this.deps.transact(async (tx) => {
        // A free order reserves nothing (and does not lock the customer row).
        if (checked.priceMinor > 0 && !(await tx.orders.reserveCredit(customerId, checked.priceMinor))) {
          throw new CertdeskError('creditLimitExceeded', `The order costs ${checked.priceMinor / 100} ${principal.account.currency}, more than the credit left on the account.`);
        }
        const orderId = await tx.orders.insertOrder(row);
        await tx.orders.insertNames(orderId, names);
        await tx.orders.insertLedger(customerId, orderId, 'charge', checked.priceMinor, now);
        // The first DCV check is queued with the order: an accepted order always has its job.
        await tx.jobs.enqueueInTransaction({ name: 'order.validate', payload: { orderId }, uniqueKey: `order:${orderId}`, runAt: now }, now);
        await tx.audit.append({
          at: now, customerId, actor: actorName(principal), clientAddress: actor.clientAddress, action: 'order.placed', subject: String(orderId),
          details: { product: checked.product.code, names: checked.names, method, priceMinor: checked.priceMinor, partnerOrderId },
        });
        return orderId;
      });
    } catch (e) {
      // Two identical retries raced: the loser finds the winner's order (its reservation rolled back).
      if (given !== undefined && isUniqueViolation(e)) {
        const existing = await this.deps.orders.byPartnerOrderId(customerId, given);
        if (existing !== undefined) return this.replay(customerId, existing, requestHash, checked);
      }
      throw e;
    }
    let order = (await this.deps.orders.get(customerId, id))!;
    // After the commit: a mail is never sent for an order that was not stored (a lost one is re-sent by POST /ApproverEmail).
    if (method === 'EMAIL') await this.deps.approvals.sendForNewOrder(id);
    if (inline) {
      // Should this fail half-way (a crash), the order's queued job completes it.
      await this.deps.flow.issue(order, { caaChecked: true });
      order = (await this.deps.orders.get(customerId, id))!;
      const view = (await this.views([order], true))[0]!;
      return { ...view, replayed: false, ...this.details(method, dcv) };
    }
    return { order, names: await this.deps.orders.names([id]), replayed: false, ...this.details(method, dcv) };
  }

  private details(method: OrderDcvMethod, dcv: { dns: DnsAuthDetails; file: FileAuthDetails }): { dns?: DnsAuthDetails; file?: FileAuthDetails } {
    return method === 'DNS' ? { dns: dcv.dns } : method === 'FILE' ? { file: dcv.file } : {};
  }

  private async replay(customerId: CustomerId, existing: { id: number; requestHash: string }, requestHash: string, checked: CheckedOrder): Promise<PlacedOrder> {
    if (existing.requestHash !== requestHash) {
      throw new CertdeskError('conflict', 'PartnerOrderID was used before with a different order: use a new PartnerOrderID for a new order.', { field: 'PartnerOrderID' });
    }
    const order = (await this.deps.orders.get(customerId, existing.id))!;
    const dcv = await dcvExpectations(this.deps, customerId, checked.brand, checked.csr, checked.names);
    return { order, names: await this.deps.orders.names([existing.id]), replayed: true, ...this.details(checked.method, dcv) };
  }

  /** Every rule of spec §4.9; throws one error carrying every fault, or returns the order's facts. */
  private check(input: OrderInput, currency: string): CheckedOrder {
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
        product = this.deps.catalog.product(code);
      } catch {
        bad('ProductCode', `Unknown product ${code}.`, 'unknownProduct');
      }
    }
    if (product !== undefined && product.type !== 'SSL') bad('ProductCode', `${product.code} is a ${product.type} product: POST /Order takes TLS (SSL) products.`);
    const brand = product === undefined ? undefined : this.deps.catalog.brand(product.brand);
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
    const { names, sanHosts } = orderNames(product, csr, p.SubjectAltNames ?? p.SubjectAltName, this.blockList, bad);
    const wildcardSans = sanHosts.filter((n) => n.startsWith('*.')).length;

    // Price: the /Quote function checks ValidityPeriod, ServerCount, SANs and extras.
    const validityPeriod = typeof p.ValidityPeriod === 'number' ? p.ValidityPeriod : Number(text(p.ValidityPeriod) ?? NaN);
    if (!Number.isFinite(validityPeriod)) bad('ValidityPeriod', 'ValidityPeriod is required: months (12 or 24), or days on the free automated DV product.');
    const serverCountRaw = p.ServerCount === undefined || p.ServerCount === null || p.ServerCount === '' ? 0 : Number(p.ServerCount);
    let priceMinor = 0;
    let serverCount = 1;
    if (product !== undefined && Number.isFinite(validityPeriod)) {
      try {
        const quote = quotePrice(this.deps.catalog, {
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
    if (method === 'EMAIL' && brand !== undefined) this.checkApprovers(p, brand, names, approvers, bad);

    const partnerOrderId = text(p.PartnerOrderID);
    if (partnerOrderId !== undefined && !/^[\x21-\x7e]{1,64}$/.test(partnerOrderId)) bad('PartnerOrderID', 'PartnerOrderID is 1 to 64 printable ASCII characters without spaces.');
    if (p.PartnerOrderID !== undefined && p.PartnerOrderID !== null && typeof p.PartnerOrderID !== 'string') bad('PartnerOrderID', 'PartnerOrderID is a string.');

    // Contacts and organization.
    if (brand !== undefined) this.checkContacts(input, level, brand, bad);

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
  private checkApprovers(p: Record<string, unknown>, brand: CaBrand, names: string[], out: Map<string, string>, bad: (f: string, m: string) => void): void {
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

  private checkContacts(input: OrderInput, level: string, brand: CaBrand, bad: (f: string, m: string) => void): void {
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

  // Reads ------------------------------------------------------------------------------------

  /** One order of the caller's account; another account's order is not found (404). */
  async getOrder(principal: Principal, id: number, withCertificate = true): Promise<OrderView> {
    const order = await this.deps.orders.get(principal.customerId, id);
    if (order === undefined) throw new CertdeskError('orderNotFound', `Invalid order id ${id}: no such order.`, { field: 'ServiceOrderID' });
    return (await this.views([order], withCertificate))[0]!;
  }

  async listOrders(principal: Principal, filter: OrderFilter, withCertificates = false, scheduledToReplace = false): Promise<{ orders: OrderView[]; total: number }> {
    const scoped = scheduledToReplace ? { ...filter, ids: await this.deps.orders.chainingTo(principal.customerId, [...this.deps.certificates.distrustMarks().keys()]) } : filter;
    const { rows, total } = await this.deps.orders.list(principal.customerId, scoped);
    return { orders: await this.views(rows, withCertificates), total };
  }

  async modifiedOrders(principal: Principal, from: number, to: number, withCertificates = false): Promise<OrderView[]> {
    if (to < from) throw new CertdeskError('invalidInput', 'ToDate lies before FromDate.', { field: 'ToDate' });
    return this.views(await this.deps.orders.modified(principal.customerId, from, to, 10_000), withCertificates);
  }

  private async views(rows: OrderRow[], withCertificates: boolean): Promise<OrderView[]> {
    const names = await this.deps.orders.names(rows.map((r) => r.id));
    const marks = this.deps.certificates.distrustMarks();
    const now = this.deps.clock.nowSeconds();
    return Promise.all(rows.map(async (stored) => {
      // Derived, not stored: a COMPLETE order past its last certificate's EndDate is EXPIRED.
      const order = stored.major_status === 'COMPLETE' && stored.cert_not_after !== null && stored.cert_not_after < now ? { ...stored, minor_status: 'EXPIRED' } : stored;
      const own = names.filter((n) => n.order_id === order.id);
      if (order.issued_at === null) return { order, names: own };
      const latest = await this.deps.orders.latestCertificate(order.id);
      if (latest === undefined) return { order, names: own };
      const mark = latest.chainIds.map((id) => marks.get(id)).find((m) => m !== undefined);
      // The chain and the PKCS#7 bundle are built only when Fulfillment is asked for.
      const full = withCertificates ? await this.deps.certificates.fulfillment(latest.serial) : undefined;
      const dates = { notBefore: latest.notBefore, notAfter: latest.notAfter };
      return { order, names: own, dates, ...(full === undefined ? {} : { certificate: full }), ...(mark === undefined ? {} : { distrust: mark }) };
    }));
  }
}

interface CheckedOrder {
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

/** JSON with sorted keys: the same request gives the same hash whatever order its members came in. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
