import { createHash } from 'node:crypto';
import { CertdeskError, waitingFor, type Clock, type CustomerId, type OrderDcvMethod, type Principal } from '../core/index.js';
import type { AuditRepo, DcvValuesRepo, JobsRepo, NewOrderName, OrderFilter, OrderNameRow, OrderRow, OrdersRepo } from '../storage/index.js';
import { isUniqueViolation } from '../storage/index.js';
import { DEFAULT_BLOCKED_NAMES } from '../validation/index.js';
import type { CatalogService } from './catalog.js';
import { dcvExpectations, type DnsAuthDetails, type FileAuthDetails } from './dcv-details.js';
import type { EmailApprovals } from './email-approval.js';
import type { OrderFlow } from './order-flow.js';
import { actorName, type Actor } from './actor.js';
import { checkOrder, text, type CheckedOrder, type OrderInput } from './order-rules.js';
import { randomString } from './secrets.js';

export type { AddressInput, ContactInput, OrderInput } from './order-rules.js';
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
    const checked = checkOrder(input, principal.account.currency, this.deps.catalog, this.blockList);
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

/** JSON with sorted keys: the same request gives the same hash whatever order its members came in. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
