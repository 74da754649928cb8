import {
  CertdeskError,
  amountOf,
  money,
  waitingFor,
  type Clock,
  type CustomerId,
  type Money,
  type Order,
  type OrderDcvMethod,
  type OrderId,
  type OrderName,
  type OrderParameters,
  type Principal,
  type Voucher,
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
  VouchersRepo,
} from '../../storage/index.js';
import { isUniqueViolation } from '../../storage/index.js';
import type { CatalogService } from '../catalog/catalog.js';
import { dcvDetailsFor, dcvExpectations, type DnsAuthDetails, type FileAuthDetails } from '../dcv/dcv-details.js';
import type { EmailApprovals } from '../dcv/email-approval.js';
import { HELD_RECHECK_SECONDS, type OrderFlow } from '../issuance/order-flow.js';
import { actorName, type Actor } from '../accounts/actor.js';
import { accountContact, contactLeftOut } from './order-contacts.js';
import {
  lostRedemption,
  partnerOrderIdOfVoucher,
  partnerOrderIdReused,
  redemptionHashOf,
  requestHashOf,
} from './order-idempotency.js';
import type { OrderCertificate, OrderReads } from './order-reads.js';
import { newPartnerOrderId } from './order-checks.js';
import { OrderRules, text, type CheckedOrder, type OrderInput } from './order-rules.js';

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
  readonly vouchers: Pick<VouchersRepo, 'markRedeemed' | 'partnerOrderIdTaken'>;
  readonly customers: Pick<CustomersRepo, 'lock'>;
}

export interface OrdersDeps extends OrderRepos {
  /** The order flow: proofs checked and certificates issued inline when the proof is already in place. */
  readonly flow: Pick<OrderFlow, 'proofs' | 'newClaim' | 'issueClaimed'>;
  /** Sends the approval mails of an EMAIL order once it is stored. */
  readonly approvals: Pick<EmailApprovals, 'sendForNewOrder'>;
  /** The view of an order issued inline, as readers see it. */
  readonly reads: Pick<OrderReads, 'views' | 'issuedView'>;
  readonly catalog: CatalogService;
  readonly dcvValues: Pick<DcvValuesRepo, 'getOrCreate' | 'live'>;
  /** The account's credit and own contact data (the free automated product's default contacts). */
  readonly customers: Pick<CustomersRepo, 'byId' | 'lock'>;
  readonly users: Pick<UsersRepo, 'listByCustomer'>;
  readonly clock: Clock;
  readonly blockedNames: readonly string[];
  readonly transact: <T>(fn: (repos: OrderRepos) => Promise<T>) => Promise<T>;
}

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
    const checked = await this.check(customerId, input, principal.account.currency);
    const p = input.OrderParameters ?? {};

    // Idempotency (DESIGN §5.5): the same PartnerOrderID and body return the original order.
    const requestHash = requestHashOf(input);
    const given = text(p.PartnerOrderID);
    if (given !== undefined) {
      const existing = await this.deps.orders.byPartnerOrderId(customerId, given);
      if (existing !== undefined) return this.replay(customerId, existing, requestHash, checked);
      if (await this.deps.vouchers.partnerOrderIdTaken(customerId, given)) throw partnerOrderIdOfVoucher();
    }
    try {
      return await this.place(checked, {
        customerId,
        partnerOrderId: given ?? newPartnerOrderId(),
        requestHash,
        actor: actorName(principal),
        clientAddress: actor.clientAddress,
        pay: async (tx) => {
          // A PartnerOrderID of the caller's is checked against the vouchers under the customer's
          // lock, which voucher creation takes too: one of the two sees the other.
          if (given !== undefined) {
            await tx.customers.lock(customerId, this.deps.clock.nowSeconds());
            if (await tx.vouchers.partnerOrderIdTaken(customerId, given)) throw partnerOrderIdOfVoucher();
          }
          // A free order reserves nothing (and does not lock the customer row).
          if (checked.priceMinor > 0 && !(await tx.orders.reserveCredit(customerId, checked.priceMinor)))
            throw creditExceeded(money(checked.priceMinor, principal.account.currency));
        },
      });
    } catch (e) {
      // Two identical retries raced: the loser finds the winner's order (its reservation rolled back).
      if (given !== undefined && isUniqueViolation(e)) {
        const existing = await this.deps.orders.byPartnerOrderId(customerId, given);
        if (existing !== undefined) return this.replay(customerId, existing, requestHash, checked);
      }
      throw e;
    }
  }

  /**
   * POST /Redeem (spec §4.29): the order of `input` placed for the voucher's owner by the one rule
   * set, within what the voucher paid for and at its reserved price. The voucher turns redeemed in
   * the order's own transaction, by a guarded update, and its reservation becomes the order's
   * charge (no second reservation): of concurrent redemptions one stores an order, the others roll
   * back and get `lostRedemption`. A refused redemption changes nothing.
   */
  async redeem(voucher: Voucher, input: OrderInput, clientAddress: string | null): Promise<PlacedOrder> {
    const checked = await this.check(voucher.customerId, input, voucher.price.currency, voucher);
    return this.place(checked, {
      customerId: voucher.customerId,
      partnerOrderId: voucher.partnerOrderId,
      requestHash: redemptionHashOf(input),
      actor: `voucher:${voucher.id}`,
      clientAddress,
      pay: async (tx, orderId, at) => {
        if (!(await tx.vouchers.markRedeemed(voucher.id, orderId, at))) throw lostRedemption();
        await tx.audit.append({
          at,
          customerId: voucher.customerId,
          actor: `voucher:${voucher.id}`,
          clientAddress,
          action: 'voucher.redeemed',
          subject: String(voucher.id),
          details: { orderId, priceMinor: voucher.price.minor, partnerOrderId: voucher.partnerOrderId },
        });
      },
    });
  }

  /**
   * A redemption answered again: a retry of the body that redeemed `voucher` gets its `order` as
   * placed (DCV details of its method), with the certificate once issued.
   */
  async redeemedAgain(voucher: Voucher, order: Order, input: OrderInput): Promise<PlacedOrder> {
    const checked = await this.check(voucher.customerId, input, voucher.price.currency, voucher);
    const dcv = await dcvExpectations(this.deps, voucher.customerId, checked.brand, checked.csr, checked.names);
    const view = (await this.deps.reads.views([order], true))[0]!;
    return { ...view, replayed: true, ...this.details(checked.method, dcv) };
  }

  /**
   * Stores a checked order and, when its proof is already in place, issues it inline. `how.pay`
   * runs in the order's transaction, after the order row exists: it reserves credit or redeems a
   * voucher, and throws to refuse the order (nothing is stored).
   */
  private async place(checked: CheckedOrder, how: Placement): Promise<PlacedOrder> {
    const { customerId, partnerOrderId, requestHash } = how;
    const now = this.deps.clock.nowSeconds();
    const dcv = await dcvExpectations(this.deps, customerId, checked.brand, checked.csr, checked.names);
    const method = checked.method;

    // CAA at order time (and again right before signing); a lookup that cannot be answered now is left to that second check.
    const lookups = this.deps.flow.proofs.lookupsForOneOrder();
    const caa = await this.deps.flow.proofs.caaProblem(checked.brand.id, checked.names, lookups);
    if (caa?.forbidden !== undefined)
      throw CertdeskError.ofFaults([{ kind: 'invalidName', field: 'CommonName', message: caa.forbidden }]);

    // DV by DNS or FILE with the proof already in place: validated now and issued inline (DESIGN §2).
    // The free automated product's clients expect exactly that: for it a missing proof refuses the order.
    let inline = false;
    if ((method === 'DNS' || method === 'FILE') && checked.product.validationLevel === 'DV') {
      const facts = { caBrand: checked.brand.id, dcvValue: dcv.value, csrPem: checked.csrPem, hashes: checked.csr };
      const results = await Promise.all(
        checked.names.map((n) => this.deps.flow.proofs.checkProof(facts, n, method, lookups)),
      );
      const failed = results
        .map((r, i) => (r.ok ? undefined : `${checked.names[i]!}: ${r.problem}`))
        .filter((x): x is string => x !== undefined);
      inline = failed.length === 0 && caa === undefined;
      if (failed.length > 0 && checked.product.validity.unit === 'days') {
        throw new CertdeskError(
          'dcvFailed',
          // What to publish, so that a caller without POST /DNSData or /FileData (a voucher's redeemer) can.
          `The ${method === 'DNS' ? 'DNS record' : 'file'} was not found or is wrong: ${failed.join('; ')}. ${
            method === 'DNS'
              ? `Publish: ${dcv.dns.Example}`
              : `Serve ${dcv.file.FilePath}${dcv.file.FileName} containing ${JSON.stringify(dcv.file.FileContents)}`
          }`,
          { field: method === 'DNS' ? 'failed_dns' : 'failed_file' },
        );
      }
    }
    const price = money(checked.priceMinor, checked.currency);
    const order: NewOrder = {
      customerId,
      partnerOrderId,
      requestHash,
      productCode: checked.product.code,
      soldProduct: checked.product,
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
      // Issued inline: the round is this request's from the order's commit on (OrderFlow.issueClaimed).
      ...(inline ? { issuanceClaim: this.deps.flow.newClaim() } : {}),
    };
    const names: NewOrderName[] = checked.names.map((name) => ({
      name,
      method,
      status: inline ? 'VALIDATED' : 'PENDING',
      approverEmail: checked.approvers.get(name) ?? null,
      ...(inline ? { validatedAt: now, lastCheckedAt: now } : {}),
    }));

    const stored = await this.deps.transact(async (tx) => {
      const created = await tx.orders.insertOrder(order);
      const orderId = created.id;
      await how.pay(tx, orderId, now);
      const storedNames = await tx.orderNames.insertNames(orderId, names);
      await tx.orders.insertLedger(customerId, orderId, 'charge', checked.priceMinor, now);
      // The first DCV check is queued with the order: an accepted order always has its job. One this
      // request issues inline is looked at once the request has had its time (the job finds it done, or
      // takes the round over from a request that died).
      const runAt = order.issuanceClaim === undefined ? now : now + HELD_RECHECK_SECONDS;
      await tx.jobs.enqueueInTransaction(
        { name: 'order.validate', payload: { orderId }, uniqueKey: `order:${orderId}`, runAt },
        now,
      );
      await tx.audit.append({
        at: now,
        customerId,
        actor: how.actor,
        clientAddress: how.clientAddress,
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
      return { order: created, names: storedNames };
    });
    const id = stored.order.id;
    // After the commit: a mail is never sent for an order that was not stored (a lost one is re-sent by POST /ApproverEmail).
    if (method === 'EMAIL') await this.deps.approvals.sendForNewOrder(id);
    if (order.issuanceClaim !== undefined) {
      // Should this fail half-way (a crash), the order's queued job completes it once the claim lapses.
      const done = await this.deps.flow.issueClaimed(stored.order, checked.names, order.issuanceClaim.claim, {
        caaChecked: true,
        csr: checked.checkedCsr,
      });
      if (done?.certificate !== undefined)
        return {
          ...this.deps.reads.issuedView(done.order, stored.names, done.certificate),
          replayed: false,
          ...this.details(method, dcv),
        };
      // Failed (the CA refused), or the round taken over: as it is now.
      const current = (await this.deps.orders.get(customerId, id))!;
      const view = (await this.deps.reads.views([current], true))[0]!;
      return { ...view, replayed: false, ...this.details(method, dcv) };
    }
    // Sending the approval mails records them with the names.
    const shown = method === 'EMAIL' ? await this.deps.orderNames.names([id]) : stored.names;
    return { order: stored.order, names: shown, replayed: false, ...this.details(method, dcv) };
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
    const checked = await this.check(customerId, input, principal.account.currency);
    const p = input.OrderParameters ?? {};
    const given = text(p.PartnerOrderID);
    if (given !== undefined) {
      const existing = await this.deps.orders.byPartnerOrderId(customerId, given);
      if (existing !== undefined && existing.requestHash !== requestHashOf(input)) throw partnerOrderIdReused();
      if (existing === undefined && (await this.deps.vouchers.partnerOrderIdTaken(customerId, given)))
        throw partnerOrderIdOfVoucher();
    }
    const caa = await this.deps.flow.proofs.caaProblem(checked.brand.id, checked.names);
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

  /**
   * The order rules over `input` for the account `customerId` (or the voucher it redeems), with the
   * account's own contact for a free automated order that leaves its contacts out.
   */
  private async check(
    customerId: CustomerId,
    input: OrderInput,
    currency: string,
    voucher?: Voucher,
  ): Promise<CheckedOrder> {
    const leftOut = contactLeftOut(input.AdminContact) || contactLeftOut(input.TechContact);
    const own = leftOut ? await accountContact(this.deps, customerId) : undefined;
    return this.rules.checkOrder(input, currency, {
      ...(own === undefined ? {} : { accountContact: own }),
      ...(voucher === undefined ? {} : { voucher }),
    });
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

/** How `place` stores an order: for whom, under which reference, and how it is paid for. */
interface Placement {
  readonly customerId: CustomerId;
  readonly partnerOrderId: string;
  readonly requestHash: string;
  /** The audit log's name of who placed it. */
  readonly actor: string;
  readonly clientAddress: string | null;
  /** Pays in the order's transaction (credit reserved, or a voucher redeemed); throws to refuse the order. */
  readonly pay: (tx: OrderRepos, orderId: OrderId, at: number) => Promise<void>;
}

const creditExceeded = (price: Money) =>
  new CertdeskError(
    'creditLimitExceeded',
    `The order costs ${amountOf(price)} ${price.currency}, more than the credit left on the account.`,
  );
