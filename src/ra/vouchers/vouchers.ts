import {
  CertdeskError,
  amountOf,
  money,
  type Clock,
  type CustomerId,
  type Principal,
  type Voucher,
  type VoucherTerms,
} from '../../core/index.js';
import type { SecretSealer } from '../../ca/index.js';
import {
  isUniqueViolation,
  type AuditRepo,
  type CustomersRepo,
  type OrdersRepo,
  type StoredVoucher,
  type VouchersRepo,
} from '../../storage/index.js';
import { actorName, type Actor } from '../accounts/actor.js';
import type { CatalogService } from '../catalog/catalog.js';
import { quotePrice } from '../catalog/pricing.js';
import type { OrderReads, OrderView } from '../orders/order-reads.js';
import { newPartnerOrderId, partnerOrderIdProblem } from '../orders/order-checks.js';
import { text, type OrderInput } from '../orders/order-rules.js';
import { LostRedemption, redemptionHashOf } from '../orders/order-idempotency.js';
import type { Orders, PlacedOrder } from '../orders/orders.js';
import type { CodeGuessing } from './code-guessing.js';
import { newVoucherCode, normalizeVoucherCode, voucherCodeHash } from './voucher-codes.js';

// Vouchers (spec §2.13, §3.2, §4.28–4.34; DESIGN §5.8). A voucher reserves its price against its
// owner's credit when made; voiding it gives the credit back, redeeming it turns the reservation
// into the order's charge. Redemption places the order by the one rule set (Orders.redeem) and is
// exactly-once: the voucher leaves `active` by a guarded update in the order's transaction.
// Everything anonymous answers an unknown, voided or redeemed code alike, counts it as a guess
// (CodeGuessing) and never shows whose voucher it is.

/** POST /Voucher's body as sent: every member is checked here. */
export interface VoucherInput {
  readonly OrderParameters?: {
    readonly ProductCode?: unknown;
    readonly ServerCount?: unknown;
    readonly SubjectAltNameCount?: unknown;
    readonly ValidityPeriod?: unknown;
    readonly PartnerOrderID?: unknown;
  };
}

/** POST /Redeem's body: POST /Order's plus the code. */
export interface RedeemInput extends OrderInput {
  readonly VoucherCode?: unknown;
}

/** A voucher as its owner sees it, with its code. */
export interface OwnedVoucher {
  readonly voucher: Voucher;
  readonly code: string;
}

/** The repositories a voucher change writes through, in one transaction. */
export interface VoucherRepos {
  readonly vouchers: Pick<VouchersRepo, 'insert' | 'markVoided'>;
  readonly orders: Pick<OrdersRepo, 'reserveCredit' | 'releaseCredit' | 'byPartnerOrderId'>;
  readonly customers: Pick<CustomersRepo, 'lock'>;
  readonly audit: Pick<AuditRepo, 'append'>;
}

export interface VouchersDeps {
  readonly vouchers: Pick<VouchersRepo, 'byCodeHash' | 'list' | 'byPartnerOrderId'>;
  readonly orders: Pick<OrdersRepo, 'byPartnerOrderId' | 'get'>;
  readonly placing: Pick<Orders, 'redeem' | 'redeemedAgain'>;
  readonly reads: Pick<OrderReads, 'views'>;
  readonly catalog: CatalogService;
  readonly guessing: Pick<CodeGuessing, 'admit' | 'found'>;
  /** Seals codes for their owner's listings (the database holds only their hash and the sealed form). */
  readonly sealer: SecretSealer;
  readonly clock: Clock;
  readonly transact: <T>(fn: (repos: VoucherRepos) => Promise<T>) => Promise<T>;
}

const invalidVoucher = () =>
  new CertdeskError('invalidVoucher', 'The voucher token is invalid.', { field: 'VoucherCode' });
const deleteRefused = () =>
  new CertdeskError('voucherDeleteRefused', 'The voucher does not exist or has already been redeemed.', {
    field: 'VoucherCode',
  });

export class Vouchers {
  constructor(private readonly deps: VouchersDeps) {}

  /**
   * POST /Voucher (spec §4.28): the terms checked like a quote and priced by it; the price reserved
   * against the credit limit (a guarded update: concurrent creations never pass the limit); nothing
   * charged. A retry with the PartnerOrderID of an active voucher with the same terms returns that
   * voucher (nothing reserved twice); other reuse of a PartnerOrderID is refused.
   */
  async create(actor: Actor, input: VoucherInput): Promise<OwnedVoucher> {
    const { principal } = actor;
    const customerId = principal.customerId;
    const terms = this.checkTerms(input, principal.account.currency);
    const p = input.OrderParameters ?? {};
    const given = text(p.PartnerOrderID);
    if (given !== undefined) {
      const replay = await this.replayCreate(customerId, given, terms);
      if (replay !== undefined) return replay;
      if ((await this.deps.orders.byPartnerOrderId(customerId, given)) !== undefined) throw partnerOrderIdTaken();
    }
    const partnerOrderId = given ?? newPartnerOrderId();
    const code = newVoucherCode();
    const codeHash = voucherCodeHash(code);
    const now = this.deps.clock.nowSeconds();
    try {
      await this.deps.transact(async (tx) => {
        // A PartnerOrderID of the caller's is checked against the orders under the customer's lock,
        // which POST /Order takes too: one of the two sees the other.
        if (given !== undefined) {
          await tx.customers.lock(customerId, now);
          if ((await tx.orders.byPartnerOrderId(customerId, given)) !== undefined) throw partnerOrderIdTaken();
        }
        if (terms.price.minor > 0 && !(await tx.orders.reserveCredit(customerId, terms.price.minor)))
          throw new CertdeskError(
            'creditLimitExceeded',
            `The voucher costs ${amountOf(terms.price)} ${terms.price.currency}, more than the credit left on the account.`,
          );
        const voucherId = await tx.vouchers.insert({
          customerId,
          codeHash,
          codeSealed: this.deps.sealer.seal(codeHash, code),
          partnerOrderId,
          product: terms.product,
          serverCount: terms.serverCount,
          subjectAltNameCount: terms.subjectAltNameCount,
          validityPeriod: terms.validityPeriod,
          priceMinor: terms.price.minor,
          currency: terms.price.currency,
          createdAt: now,
          createdBy: actorName(principal),
        });
        await tx.audit.append({
          at: now,
          customerId,
          actor: actorName(principal),
          clientAddress: actor.clientAddress,
          action: 'voucher.created',
          subject: String(voucherId),
          details: {
            product: terms.product.code,
            serverCount: terms.serverCount,
            subjectAltNameCount: terms.subjectAltNameCount,
            validityPeriod: terms.validityPeriod,
            priceMinor: terms.price.minor,
            partnerOrderId,
          },
        });
        return voucherId;
      });
      return (await this.ownedByHash(customerId, codeHash))!;
    } catch (e) {
      // Two identical creations raced on one PartnerOrderID: the loser answers with the winner's voucher.
      if (given !== undefined && isUniqueViolation(e)) {
        const replay = await this.replayCreate(customerId, given, terms);
        if (replay !== undefined) return replay;
        throw partnerOrderIdTaken();
      }
      throw e;
    }
  }

  /** GET /Vouchers (spec §4.30): the account's vouchers, newest first; voided ones are gone. */
  async list(principal: Principal): Promise<OwnedVoucher[]> {
    return (await this.deps.vouchers.list(principal.customerId)).map((s) => this.owned(s));
  }

  /** GET /Voucher/{code} (spec §4.31): one voucher of the account; any other code is invalid (404, -2011). */
  async get(principal: Principal, codeText: string): Promise<OwnedVoucher> {
    const code = normalizeVoucherCode(codeText);
    const found = code === undefined ? undefined : await this.ownedByHash(principal.customerId, voucherCodeHash(code));
    if (found === undefined || found.voucher.status === 'voided') throw invalidVoucher();
    return found;
  }

  /**
   * DELETE /Voucher/{code} (spec §4.32, §3.2): an active voucher of the account voided and its
   * reservation released, in one transaction; a redeemed, voided, unknown or another account's code
   * is refused (ErrorId 403) and nothing changes.
   */
  async void(actor: Actor, codeText: string): Promise<void> {
    const customerId = actor.principal.customerId;
    const code = normalizeVoucherCode(codeText);
    const found = code === undefined ? undefined : await this.ownedByHash(customerId, voucherCodeHash(code));
    if (found === undefined || found.voucher.status !== 'active') throw deleteRefused();
    const { voucher } = found;
    const now = this.deps.clock.nowSeconds();
    await this.deps.transact(async (tx) => {
      // Guarded: a redemption or void that got there first leaves this one changing nothing.
      if (!(await tx.vouchers.markVoided(customerId, voucher.id, now))) throw deleteRefused();
      if (voucher.price.minor > 0) await tx.orders.releaseCredit(customerId, voucher.price.minor);
      await tx.audit.append({
        at: now,
        customerId,
        actor: actorName(actor.principal),
        clientAddress: actor.clientAddress,
        action: 'voucher.voided',
        subject: String(voucher.id),
        details: { priceMinor: voucher.price.minor, partnerOrderId: voucher.partnerOrderId },
      });
    });
  }

  /** GET /Voucher/*\/{code} (spec §4.33): what an active voucher pays for, nothing about whose it is. */
  async terms(codeText: string, clientAddress: string | null): Promise<VoucherTerms> {
    const found = await this.anonymousLookUp(codeText, clientAddress);
    if (found?.voucher.status !== 'active') throw invalidVoucher();
    return found.voucher;
  }

  /**
   * POST /Redeem (spec §4.29): the order placed for the voucher's owner (Orders.redeem). A retry of
   * a redemption that succeeded (the same body) answers with its order; any other use of a redeemed
   * code is an invalid code. A refused redemption (a rule, a missing DCV record) leaves the voucher
   * redeemable.
   */
  async redeem(input: RedeemInput, clientAddress: string | null): Promise<PlacedOrder> {
    if (input.VoucherCode === undefined || input.VoucherCode === null || input.VoucherCode === '')
      throw new CertdeskError('invalidInput', 'VoucherCode is required.', { field: 'VoucherCode' });
    const found = await this.anonymousLookUp(input.VoucherCode, clientAddress);
    if (found?.voucher.status === 'active') {
      try {
        return await this.deps.placing.redeem(found.voucher, input, clientAddress);
      } catch (e) {
        // Lost to a concurrent redemption: its guarded update, or its order holding the voucher's
        // PartnerOrderID first. A retry of the winner's body gets its order; any other an invalid code.
        if (!(e instanceof LostRedemption) && !isUniqueViolation(e)) throw e;
        const again = await this.lookUp(input.VoucherCode);
        if (again?.voucher.status === 'active')
          // Still active: the owner placed an order under the voucher's PartnerOrderID meanwhile.
          throw new CertdeskError('conflict', 'The voucher cannot be redeemed now: ask its seller.', {
            field: 'VoucherCode',
          });
        const replay = again === undefined ? undefined : await this.replayRedemption(again.voucher, input);
        if (replay !== undefined) return replay;
        throw invalidVoucher();
      }
    }
    const replay = found === undefined ? undefined : await this.replayRedemption(found.voucher, input);
    if (replay !== undefined) return replay;
    throw invalidVoucher();
  }

  /** GET /Order/*\/{code} (spec §4.34): the order a voucher's redemption created, with its certificate once issued. */
  async redeemedOrder(codeText: string, clientAddress: string | null): Promise<OrderView> {
    const voucher = (await this.anonymousLookUp(codeText, clientAddress))?.voucher;
    if (voucher === undefined || voucher.status === 'voided') throw invalidVoucher();
    // A live code that is not redeemed yet is no guess: it has no order to show.
    if (voucher.status === 'active' || voucher.orderId === null)
      throw new CertdeskError('invalidVoucher', 'The voucher has not been redeemed yet: POST /Redeem first.', {
        field: 'VoucherCode',
      });
    const order = await this.deps.orders.get(voucher.customerId, voucher.orderId);
    if (order === undefined) throw invalidVoucher();
    return (await this.deps.reads.views([order], true))[0]!;
  }

  /** Every voucher of a customer, voided ones too (the operator's `certdesk voucher list`). */
  async listForOperator(customerId: CustomerId): Promise<OwnedVoucher[]> {
    return (await this.deps.vouchers.list(customerId, true)).map((s) => this.owned(s));
  }

  /**
   * The voucher of a code an anonymous caller sent, counted as a guess of its address first (429
   * while the address is blocked) and forgiven when the code exists, whatever its state.
   */
  private async anonymousLookUp(codeText: unknown, clientAddress: string | null): Promise<StoredVoucher | undefined> {
    await this.deps.guessing.admit(clientAddress);
    const found = await this.lookUp(codeText);
    if (found !== undefined) await this.deps.guessing.found(clientAddress);
    return found;
  }

  private async lookUp(codeText: unknown): Promise<StoredVoucher | undefined> {
    const code = normalizeVoucherCode(codeText);
    return code === undefined ? undefined : this.deps.vouchers.byCodeHash(voucherCodeHash(code));
  }

  private async ownedByHash(customerId: CustomerId, codeHash: string): Promise<OwnedVoucher | undefined> {
    const found = await this.deps.vouchers.byCodeHash(codeHash);
    return found === undefined || found.voucher.customerId !== customerId ? undefined : this.owned(found);
  }

  private owned(s: StoredVoucher): OwnedVoucher {
    return { voucher: s.voucher, code: this.deps.sealer.open(s.codeHash, s.codeSealed) };
  }

  /** The redemption's order when `input` repeats the body that redeemed `voucher`. */
  private async replayRedemption(voucher: Voucher, input: RedeemInput): Promise<PlacedOrder | undefined> {
    if (voucher.status !== 'redeemed' || voucher.orderId === null) return undefined;
    const placed = await this.deps.orders.byPartnerOrderId(voucher.customerId, voucher.partnerOrderId);
    if (placed?.id !== voucher.orderId || placed.requestHash !== redemptionHashOf(input)) return undefined;
    const order = await this.deps.orders.get(voucher.customerId, voucher.orderId);
    return order === undefined ? undefined : this.deps.placing.redeemedAgain(voucher, order, input);
  }

  private async replayCreate(
    customerId: CustomerId,
    partnerOrderId: string,
    terms: VoucherTerms,
  ): Promise<OwnedVoucher | undefined> {
    const mine = await this.deps.vouchers.byPartnerOrderId(customerId, partnerOrderId);
    if (mine === undefined) return undefined;
    const v = mine.voucher;
    const same =
      v !== undefined &&
      v.status === 'active' &&
      v.product.code === terms.product.code &&
      v.serverCount === terms.serverCount &&
      v.subjectAltNameCount === terms.subjectAltNameCount &&
      v.validityPeriod === terms.validityPeriod;
    if (!same) throw partnerOrderIdTaken();
    return this.owned(mine);
  }

  /** The terms of POST /Voucher, checked and priced by the /Quote function (all faults at once). */
  private checkTerms(input: VoucherInput, currency: string): VoucherTerms {
    const p = input.OrderParameters;
    if (typeof p !== 'object' || p === null || Array.isArray(p))
      throw new CertdeskError('invalidInput', 'OrderParameters is required.', { field: 'OrderParameters' });
    const code = text(p.ProductCode);
    if (code === undefined)
      throw new CertdeskError('invalidInput', 'ProductCode is required.', { field: 'ProductCode' });
    const product = this.deps.catalog.product(code);
    if (product.type !== 'SSL')
      throw new CertdeskError(
        'invalidInput',
        `${product.code} is a ${product.type} product: vouchers are redeemed as TLS (SSL) orders.`,
        { field: 'ProductCode' },
      );
    const partnerProblem = partnerOrderIdProblem(p.PartnerOrderID);
    if (partnerProblem !== undefined)
      throw new CertdeskError('invalidInput', partnerProblem, { field: 'PartnerOrderID' });
    const number = (v: unknown, fallback: number) =>
      v === undefined || v === null || v === '' ? fallback : typeof v === 'number' ? v : Number(v);
    const validityPeriod = number(p.ValidityPeriod, NaN);
    if (!Number.isFinite(validityPeriod))
      throw new CertdeskError(
        'invalidInput',
        'ValidityPeriod is required: months (12 or 24), or days on the free automated DV product.',
        { field: 'ValidityPeriod' },
      );
    const subjectAltNameCount = number(p.SubjectAltNameCount, 0);
    const quote = quotePrice(
      this.deps.catalog,
      { productCode: product.code, validityPeriod, serverCount: number(p.ServerCount, 0), subjectAltNameCount },
      currency,
    );
    return {
      product,
      serverCount: quote.serverCount,
      subjectAltNameCount,
      validityPeriod,
      price: money(quote.totalMinor, currency),
    };
  }
}

const partnerOrderIdTaken = () =>
  new CertdeskError(
    'conflict',
    'PartnerOrderID was used before by another order or voucher of the account: use a new PartnerOrderID.',
    { field: 'PartnerOrderID' },
  );
