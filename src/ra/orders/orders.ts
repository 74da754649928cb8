import {
  CertdeskError,
  amountOf,
  money,
  type CustomerId,
  type Money,
  type Order,
  type OrderId,
  type OrderParameters,
  type Principal,
  type Voucher,
} from '../../core/index.js';
import type { CustomersRepo, DcvValuesRepo, UsersRepo } from '../../storage/index.js';
import { isUniqueViolation } from '../../storage/index.js';
import type { CatalogService } from '../catalog/catalog.js';
import { dcvDetailsFor, dcvExpectations, type DnsAuthDetails, type FileAuthDetails } from '../dcv/dcv-details.js';
import { actorName, type Actor } from '../accounts/actor.js';
import { accountContact, contactLeftOut } from './order-contacts.js';
import {
  lostRedemption,
  partnerOrderIdOfVoucher,
  partnerOrderIdReused,
  redemptionHashOf,
  requestHashOf,
} from './order-idempotency.js';
import { newPartnerOrderId } from './order-checks.js';
import { OrderRules, text, type CheckedOrder, type OrderInput } from './order-rules.js';
import {
  OrderPlacement,
  orderDetails,
  type OrderRepos,
  type PlacedOrder,
  type PlacementDeps,
} from './order-placement.js';

export type { AddressInput, ContactInput, OrderInput } from './order-rules.js';
export type { Actor } from '../accounts/actor.js';
export type { OrderRepos, PlacedOrder } from './order-placement.js';

/** What POST /TestOrder answers: the order POST /Order would place, never stored. */
export interface TestedOrder {
  readonly at: number;
  readonly parameters: OrderParameters;
  readonly dns?: DnsAuthDetails;
  readonly file?: FileAuthDetails;
}

export interface OrdersDeps extends OrderRepos, Omit<PlacementDeps, keyof OrderRepos> {
  readonly catalog: CatalogService;
  readonly dcvValues: Pick<DcvValuesRepo, 'getOrCreate' | 'live'>;
  /** The account's credit and own contact data (the free automated product's default contacts). */
  readonly customers: Pick<CustomersRepo, 'byId' | 'lock'>;
  readonly users: Pick<UsersRepo, 'listByCustomer'>;
  readonly blockedNames: readonly string[];
}

/**
 * Placing and reading orders (spec §4.9, §4.12–4.14; DESIGN §5.4–§5.6). Every rule of POST /Order
 * is checked before anything is written, and every fault is reported at once; then the price is
 * reserved against the credit limit, the order, its names and the charge are stored in one
 * transaction.
 */
export class Orders {
  private readonly rules: OrderRules;
  private readonly placement: OrderPlacement;

  constructor(private readonly deps: OrdersDeps) {
    this.rules = new OrderRules(deps.catalog, deps.blockedNames);
    this.placement = new OrderPlacement(deps);
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
      return await this.placement.place(checked, {
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
    return this.placement.place(checked, {
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
    return { ...view, replayed: true, ...orderDetails(checked.method, dcv) };
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
      ...(dcv === undefined ? {} : orderDetails(checked.method, dcv)),
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
      ...orderDetails(checked.method, dcv),
    };
  }
}

const creditExceeded = (price: Money) =>
  new CertdeskError(
    'creditLimitExceeded',
    `The order costs ${amountOf(price)} ${price.currency}, more than the credit left on the account.`,
  );
