import { createHash } from 'node:crypto';
import {
  CertdeskError,
  amountOf,
  money,
  waitingFor,
  type Clock,
  type Contact,
  type CustomerId,
  type Money,
  type Order,
  type OrderDcvMethod,
  type OrderId,
  type OrderName,
  type OrderParameters,
  type Principal,
} from '../../core/index.js';
import type {
  AuditRepo,
  CustomersRepo,
  DcvValuesRepo,
  JobsRepo,
  NewOrder,
  NewOrderName,
  OrderNamesRepo,
  OrdersRepo,
  UsersRepo,
} from '../../storage/index.js';
import { isUniqueViolation } from '../../storage/index.js';
import type { CatalogService } from '../catalog/catalog.js';
import { dcvDetailsFor, dcvExpectations, type DnsAuthDetails, type FileAuthDetails } from '../dcv/dcv-details.js';
import type { EmailApprovals } from '../dcv/email-approval.js';
import type { OrderFlow } from '../issuance/order-flow.js';
import { actorName, type Actor } from '../accounts/actor.js';
import { contactLeftOut } from './order-contacts.js';
import type { OrderCertificate, OrderReads } from './order-reads.js';
import { OrderRules, text, type CheckedOrder, type OrderInput } from './order-rules.js';
import { randomString } from '../accounts/secrets.js';

export type { AddressInput, ContactInput, OrderInput } from './order-rules.js';
export type { Actor } from '../accounts/actor.js';

export interface PlacedOrder {
  readonly order: Order;
  readonly names: OrderName[];
  /** True when this was a retry of an order placed before (nothing new was stored or charged). */
  readonly replayed: boolean;
  readonly dns?: DnsAuthDetails;
  readonly file?: FileAuthDetails;
  /** Issued inline (the proof was in place when the order came). */
  readonly certificate?: OrderCertificate;
}

/** What POST /TestOrder answers: the order POST /Order would place, never stored. */
export interface TestedOrder {
  readonly at: number;
  readonly parameters: OrderParameters;
  readonly dns?: DnsAuthDetails;
  readonly file?: FileAuthDetails;
}

export interface OrderRepos {
  readonly orders: OrdersRepo;
  readonly orderNames: Pick<OrderNamesRepo, 'insertNames' | 'names'>;
  readonly audit: Pick<AuditRepo, 'append'>;
  readonly jobs: Pick<JobsRepo, 'enqueueInTransaction'>;
}

export interface OrdersDeps extends OrderRepos {
  /** The order flow: proofs checked and certificates issued inline when the proof is already in place. */
  readonly flow: Pick<OrderFlow, 'checkProof' | 'caaProblem' | 'issue' | 'awaitIssuance'>;
  /** Sends the approval mails of an EMAIL order once it is stored. */
  readonly approvals: Pick<EmailApprovals, 'sendForNewOrder'>;
  /** The view of an order issued inline, as readers see it. */
  readonly reads: Pick<OrderReads, 'views'>;
  readonly catalog: CatalogService;
  readonly dcvValues: Pick<DcvValuesRepo, 'getOrCreate' | 'live'>;
  /** The account's credit and own contact data (the free automated product's default contacts). */
  readonly customers: Pick<CustomersRepo, 'byId'>;
  readonly users: Pick<UsersRepo, 'listByCustomer'>;
  readonly clock: Clock;
  readonly blockedNames: readonly string[];
  readonly transact: <T>(fn: (repos: OrderRepos) => Promise<T>) => Promise<T>;
}

/** How long POST /Order waits for an inline issuance another actor holds before answering PENDING. */
const INLINE_ISSUANCE_WAIT_MS = 10_000;
/**
 * Placing and reading orders (spec §4.9, §4.12–4.14; DESIGN §5.4–§5.6). Every rule of POST /Order
 * is checked before anything is written, and every fault is reported at once; then the price is
 * reserved against the credit limit, the order, its names and the charge are stored in one
 * transaction.
 */
export class Orders {
  private readonly rules: OrderRules;

  constructor(private readonly deps: OrdersDeps) {
    this.rules = new OrderRules(deps.catalog, deps.blockedNames);
  }

  async placeOrder(actor: Actor, input: OrderInput): Promise<PlacedOrder> {
    const { principal } = actor;
    const customerId = principal.customerId;
    const checked = await this.check(principal, input);
    const p = input.OrderParameters ?? {};

    // Idempotency (DESIGN §5.5): the same PartnerOrderID and body return the original order.
    const requestHash = requestHashOf(input);
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
    if (caa?.forbidden !== undefined)
      throw CertdeskError.ofFaults([{ kind: 'invalidName', field: 'CommonName', message: caa.forbidden }]);

    // DV by DNS or FILE with the proof already in place: validated now and issued inline (DESIGN §2).
    // The free automated product's clients expect exactly that: for it a missing proof refuses the order.
    let inline = false;
    if ((method === 'DNS' || method === 'FILE') && checked.product.validationLevel === 'DV') {
      const facts = { caBrand: checked.brand.id, dcvValue: dcv.value, csrPem: checked.csrPem, hashes: checked.csr };
      const results = await Promise.all(checked.names.map((n) => this.deps.flow.checkProof(facts, n, method)));
      const failed = results
        .map((r, i) => (r.ok ? undefined : `${checked.names[i]!}: ${r.problem}`))
        .filter((x): x is string => x !== undefined);
      inline = failed.length === 0 && caa === undefined;
      if (failed.length > 0 && checked.product.validity.unit === 'days') {
        throw new CertdeskError(
          'dcvFailed',
          `The ${method === 'DNS' ? 'DNS record' : 'file'} was not found or is wrong: ${failed.join('; ')}`,
          { field: method === 'DNS' ? 'failed_dns' : 'failed_file' },
        );
      }
    }
    const price = money(checked.priceMinor, principal.account.currency);
    const order: NewOrder = {
      customerId,
      partnerOrderId,
      requestHash,
      productCode: checked.product.code,
      productType: checked.product.type,
      caBrand: checked.brand.id,
      validationLevel: checked.product.validationLevel,
      commonName: checked.names[0]!,
      sanNames: checked.names.slice(1),
      minorStatus: inline ? 'WF_ISSUANCE' : waitingFor(method),
      dvAuthMethod: method,
      signatureHashAlgorithm: checked.signatureHashAlgorithm,
      validityPeriod: checked.validityPeriod,
      serverCount: checked.serverCount,
      parameters: { ...checked.params, PartnerOrderID: partnerOrderId },
      contacts: checked.contacts,
      organization: checked.organization,
      csrPem: checked.csrPem,
      csrSha256: checked.csr.hashSha256,
      price,
      dcvValue: dcv.value,
      orderDate: now,
    };
    const names: NewOrderName[] = checked.names.map((name) => ({
      name,
      method,
      status: inline ? 'VALIDATED' : 'PENDING',
      approverEmail: checked.approvers.get(name) ?? null,
      ...(inline ? { validatedAt: now, lastCheckedAt: now } : {}),
    }));

    let id: OrderId;
    try {
      id = await this.deps.transact(async (tx) => {
        // A free order reserves nothing (and does not lock the customer row).
        if (checked.priceMinor > 0 && !(await tx.orders.reserveCredit(customerId, checked.priceMinor))) {
          throw creditExceeded(price);
        }
        const orderId = await tx.orders.insertOrder(order);
        await tx.orderNames.insertNames(orderId, names);
        await tx.orders.insertLedger(customerId, orderId, 'charge', checked.priceMinor, now);
        // The first DCV check is queued with the order: an accepted order always has its job.
        await tx.jobs.enqueueInTransaction(
          { name: 'order.validate', payload: { orderId }, uniqueKey: `order:${orderId}`, runAt: now },
          now,
        );
        await tx.audit.append({
          at: now,
          customerId,
          actor: actorName(principal),
          clientAddress: actor.clientAddress,
          action: 'order.placed',
          subject: String(orderId),
          details: {
            product: checked.product.code,
            names: checked.names,
            method,
            priceMinor: checked.priceMinor,
            partnerOrderId,
          },
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
    let placed = (await this.deps.orders.get(customerId, id))!;
    // After the commit: a mail is never sent for an order that was not stored (a lost one is re-sent by POST /ApproverEmail).
    if (method === 'EMAIL') await this.deps.approvals.sendForNewOrder(id);
    if (inline) {
      // Should this fail half-way (a crash), the order's queued job completes it. Should the job
      // have claimed the issuance first, its result is awaited a while so that the answer carries it.
      if ((await this.deps.flow.issue(placed, { caaChecked: true, csr: checked.checkedCsr })) === 'held')
        await this.deps.flow.awaitIssuance(id, INLINE_ISSUANCE_WAIT_MS);
      placed = (await this.deps.orders.get(customerId, id))!;
      const view = (await this.deps.reads.views([placed], true))[0]!;
      return { ...view, replayed: false, ...this.details(method, dcv) };
    }
    return {
      order: placed,
      names: await this.deps.orderNames.names([id]),
      replayed: false,
      ...this.details(method, dcv),
    };
  }

  /**
   * POST /TestOrder: every check of POST /Order — the rules, CAA at order time, the credit left, a
   * PartnerOrderID used before with another body — and the answer POST /Order would give, with
   * order id 0. Nothing is stored, charged, mailed or validated: DCV details are shown only when the
   * CSR's DCV value exists already (POST /DNSData or /FileData made it), since making one is a write.
   * Throws the same errors as `placeOrder`.
   */
  async testOrder(principal: Principal, input: OrderInput): Promise<TestedOrder> {
    const customerId = principal.customerId;
    const checked = await this.check(principal, input);
    const p = input.OrderParameters ?? {};
    const given = text(p.PartnerOrderID);
    if (given !== undefined) {
      const existing = await this.deps.orders.byPartnerOrderId(customerId, given);
      if (existing !== undefined && existing.requestHash !== requestHashOf(input)) throw partnerOrderIdReused();
    }
    const caa = await this.deps.flow.caaProblem(checked.brand.id, checked.names);
    if (caa?.forbidden !== undefined)
      throw CertdeskError.ofFaults([{ kind: 'invalidName', field: 'CommonName', message: caa.forbidden }]);
    const customer = await this.deps.customers.byId(customerId);
    const price = money(checked.priceMinor, principal.account.currency);
    if (customer !== undefined && checked.priceMinor > customer.creditLimitMinor - customer.usedMinor)
      throw creditExceeded(price);
    const now = this.deps.clock.nowSeconds();
    const value = await this.deps.dcvValues.live(
      { customerId, caBrand: checked.brand.id, csrSha256: checked.csr.hashSha256 },
      now,
    );
    const dcv = value === undefined ? undefined : dcvDetailsFor(checked.brand, checked.csr, checked.names, value);
    return {
      at: now,
      parameters: { ...checked.params, PartnerOrderID: given ?? '' },
      ...(dcv === undefined ? {} : this.details(checked.method, dcv)),
    };
  }

  /** The order rules over `input`, with the account's own contact for a free automated order that leaves its contacts out. */
  private async check(principal: Principal, input: OrderInput): Promise<CheckedOrder> {
    const leftOut = contactLeftOut(input.AdminContact) || contactLeftOut(input.TechContact);
    const own = leftOut ? await this.accountContact(principal.customerId) : undefined;
    return this.rules.checkOrder(input, principal.account.currency, own);
  }

  /**
   * The account's own contact (the free automated DV product's default): its first active ADMIN
   * user's name, e-mail and mobile number, with the customer's name as the organization.
   */
  private async accountContact(customerId: CustomerId): Promise<Contact | undefined> {
    const customer = await this.deps.customers.byId(customerId);
    if (customer === undefined) return undefined;
    const admin = (await this.deps.users.listByCustomer(customerId))
      .filter((u) => u.active && u.roles.includes('ADMIN'))
      .sort((a, b) => a.id - b.id)[0];
    const fullName = (admin?.fullName ?? customer.name).trim();
    const cut = fullName.lastIndexOf(' ');
    return {
      FirstName: cut > 0 ? fullName.slice(0, cut) : fullName,
      ...(cut > 0 ? { LastName: fullName.slice(cut + 1) } : {}),
      Email: admin?.email ?? customer.email,
      ...(admin?.mobile === null || admin?.mobile === undefined ? {} : { Phone: admin.mobile }),
      OrganizationName: customer.name,
    };
  }

  private details(
    method: OrderDcvMethod,
    dcv: { dns: DnsAuthDetails; file: FileAuthDetails },
  ): { dns?: DnsAuthDetails; file?: FileAuthDetails } {
    return method === 'DNS' ? { dns: dcv.dns } : method === 'FILE' ? { file: dcv.file } : {};
  }

  private async replay(
    customerId: CustomerId,
    existing: { id: OrderId; requestHash: string },
    requestHash: string,
    checked: CheckedOrder,
  ): Promise<PlacedOrder> {
    if (existing.requestHash !== requestHash) throw partnerOrderIdReused();
    const order = (await this.deps.orders.get(customerId, existing.id))!;
    const dcv = await dcvExpectations(this.deps, customerId, checked.brand, checked.csr, checked.names);
    return {
      order,
      names: await this.deps.orderNames.names([existing.id]),
      replayed: true,
      ...this.details(checked.method, dcv),
    };
  }
}

/** What identifies a request body for PartnerOrderID idempotency: the same members, in any order, hash alike. */
function requestHashOf(input: OrderInput): string {
  return createHash('sha256').update(canonicalJson(input)).digest('hex');
}

const partnerOrderIdReused = () =>
  new CertdeskError(
    'conflict',
    'PartnerOrderID was used before with a different order: use a new PartnerOrderID for a new order.',
    { field: 'PartnerOrderID' },
  );

const creditExceeded = (price: Money) =>
  new CertdeskError(
    'creditLimitExceeded',
    `The order costs ${amountOf(price)} ${price.currency}, more than the credit left on the account.`,
  );

/** JSON with sorted keys: the same request gives the same hash whatever order its members came in. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
