// Storing a checked order (one transaction: the order, its names, its charge, its job, its audit
// row) and what follows the commit: the approval mails of an EMAIL order, or the inline issuance
// of an order whose proof is already in place (DESIGN §2, §5.4).
import {
  CertdeskError,
  money,
  TransactionBatch,
  waitingFor,
  type Clock,
  type CustomerId,
  type Order,
  type OrderDcvMethod,
  type OrderId,
  type OrderNameState,
  type Transact,
} from '../../core/index.js';
import type {
  AuditRepo,
  CustomersRepo,
  DcvValuesRepo,
  JobsRepo,
  MailRepo,
  NewOrder,
  NewOrderName,
  OrderNamesRepo,
  OrdersRepo,
  VouchersRepo,
} from '../../storage/index.js';
import { dcvExpectations, type DnsAuthDetails, type FileAuthDetails } from '../dcv/dcv-details.js';
import type { EmailApprovals } from '../dcv/email-approval.js';
import { HELD_RECHECK_SECONDS, type OrderFlow } from '../issuance/order-flow.js';
import type { OrderCertificate, OrderReads } from './order-reads.js';
import type { CheckedOrder } from './order-rules.js';

export interface PlacedOrder {
  readonly order: Order;
  readonly names: readonly OrderNameState[];
  /** True when this was a retry of an order placed before (nothing new was stored or charged). */
  readonly replayed: boolean;
  readonly dns?: DnsAuthDetails;
  readonly file?: FileAuthDetails;
  /** Issued inline (the proof was in place when the order came). */
  readonly certificate?: OrderCertificate;
}

/** The repositories of an order's transaction. */
export interface OrderRepos {
  readonly orders: OrdersRepo;
  readonly orderNames: Pick<OrderNamesRepo, 'insertNames' | 'names' | 'setApproval'>;
  readonly audit: Pick<AuditRepo, 'append'>;
  readonly jobs: Pick<JobsRepo, 'enqueueInTransaction'>;
  /** The approval mails of an EMAIL order, written with it. */
  readonly mail: Pick<MailRepo, 'insertInTransaction' | 'withdraw'>;
  readonly vouchers: Pick<VouchersRepo, 'markRedeemed' | 'partnerOrderIdTaken'>;
  readonly customers: Pick<CustomersRepo, 'lock'>;
}

export interface PlacementDeps {
  readonly orders: Pick<OrdersRepo, 'get'>;
  readonly orderNames: Pick<OrderNamesRepo, 'names'>;
  /** The order flow: proofs checked and certificates issued inline when the proof is already in place. */
  readonly flow: Pick<OrderFlow, 'proofs' | 'newClaim' | 'issueClaimed'>;
  /** Writes the approval mails of an EMAIL order in its transaction. */
  readonly approvals: Pick<EmailApprovals, 'mailPendingIn'>;
  /** The view of an order issued inline, as readers see it. */
  readonly reads: Pick<OrderReads, 'views' | 'issuedView'>;
  readonly dcvValues: Pick<DcvValuesRepo, 'getOrCreate'>;
  readonly clock: Clock;
  readonly transact: Transact<OrderRepos>;
  /** Where a failure after an order's commit is reported (the client is answered with the order). */
  readonly logger?: { warn(obj: object, msg?: string): void };
}

/** How `place` stores an order: for whom, under which reference, and how it is paid for. */
export interface Placement {
  readonly customerId: CustomerId;
  readonly partnerOrderId: string;
  readonly requestHash: string;
  /** The audit log's name of who placed it. */
  readonly actor: string;
  readonly clientAddress: string | null;
  /** Pays in the order's transaction (credit reserved, or a voucher redeemed); throws to refuse the order. */
  readonly pay: (tx: OrderRepos, orderId: OrderId, at: number) => Promise<void>;
}

/** The DCV details an order of `method` is answered with. */
export function orderDetails(
  method: OrderDcvMethod,
  dcv: { dns: DnsAuthDetails; file: FileAuthDetails },
): { dns?: DnsAuthDetails; file?: FileAuthDetails } {
  return method === 'DNS' ? { dns: dcv.dns } : method === 'FILE' ? { file: dcv.file } : {};
}

export class OrderPlacement {
  /**
   * The orders' transactions, group committed (TransactionBatch): under load the orders placed
   * while its transactions in flight are being written share the next, one commit for many. An order
   * refused in it (credit, a lost voucher redemption, a PartnerOrderID taken) rolls the shared one
   * back, and each order is stored again on its own: the refusal is that order's alone.
   */
  private readonly stores: TransactionBatch<OrderRepos>;

  constructor(private readonly deps: PlacementDeps) {
    this.stores = new TransactionBatch(deps.transact);
  }

  /**
   * Stores a checked order and, when its proof is already in place, issues it inline. `how.pay`
   * runs in the order's transaction, after the order row exists: it reserves credit or redeems a
   * voucher, and throws to refuse the order (nothing is stored).
   */
  async place(checked: CheckedOrder, how: Placement): Promise<PlacedOrder> {
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
      // Issued inline: the round is this request's from the order's commit on (IssuanceRounds.issueClaimed).
      ...(inline ? { issuanceClaim: this.deps.flow.newClaim() } : {}),
    };
    const names: NewOrderName[] = checked.names.map((name) => ({
      name,
      method,
      status: inline ? 'VALIDATED' : 'PENDING',
      approverEmail: checked.approvers.get(name) ?? null,
      ...(inline ? { validatedAt: now, lastCheckedAt: now } : {}),
    }));

    const stored = await this.stores.run(async (tx) => {
      const created = await tx.orders.insertOrder(order);
      const orderId = created.id;
      await how.pay(tx, orderId, now);
      // The charge, the job and the audit row read nothing back: on PostgreSQL they go to the
      // server with the names (storage `writeLater`).
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
      const storedNames = await tx.orderNames.insertNames(orderId, names);
      // The approval mails commit with the order: never an order without them, nor mail for none.
      if (method === 'EMAIL') await this.deps.approvals.mailPendingIn(tx, created);
      return { order: created, names: storedNames };
    });
    try {
      return await this.afterCommit(checked, order, stored, dcv);
    } catch (e) {
      // The order is stored and its job queued: the job issues it (once the claim is given back or
      // lapses). The client gets the order as it is, never an error it would retry into a second order.
      this.deps.logger?.warn({ err: e, orderId: stored.order.id }, 'order stored; a step after its commit failed');
      return this.asStored(customerId, stored, method, dcv);
    }
  }

  /** What follows an order's commit: its inline issuance, or the view of the order as stored. */
  private async afterCommit(
    checked: CheckedOrder,
    order: NewOrder,
    stored: { order: Order; names: readonly OrderNameState[] },
    dcv: { dns: DnsAuthDetails; file: FileAuthDetails },
  ): Promise<PlacedOrder> {
    const { method } = checked;
    const id = stored.order.id;
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
          ...orderDetails(method, dcv),
        };
      // Failed (the CA refused), or the round taken over: as it is now.
      return this.asStored(order.customerId, stored, method, dcv);
    }
    // Sending the approval mails records them with the names.
    const shown = method === 'EMAIL' ? await this.deps.orderNames.names([id]) : stored.names;
    return { order: stored.order, names: shown, replayed: false, ...orderDetails(method, dcv) };
  }

  /** A stored order as it is now; as it was stored when it cannot be read (the database is gone). */
  private async asStored(
    customerId: CustomerId,
    stored: { order: Order; names: readonly OrderNameState[] },
    method: OrderDcvMethod,
    dcv: { dns: DnsAuthDetails; file: FileAuthDetails },
  ): Promise<PlacedOrder> {
    const view = await this.deps.orders
      .get(customerId, stored.order.id)
      .then(async (current) => (current === undefined ? undefined : (await this.deps.reads.views([current], true))[0]))
      .catch(() => undefined);
    return { ...(view ?? stored), replayed: false, ...orderDetails(method, dcv) };
  }
}
