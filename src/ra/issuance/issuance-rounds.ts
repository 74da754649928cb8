// An order's issuance round (DESIGN §2): the claim that lets one actor sign it, the signature, and
// the completion, at most once per round. OrderFlow moves orders here once every name is shown;
// POST /Order comes here directly with a round claimed in the order's own transaction.
import { randomBytes } from 'node:crypto';
import {
  holderIsGone,
  TransactionBatch,
  type Clock,
  type FailedMinorStatus,
  type MinorStatus,
  type Order,
  type Transact,
} from '../../core/index.js';
import { checkCsr, IssuanceClaimLost, type CheckedCsr, type IssuedCertificate, type Issuer } from '../../ca/index.js';
import type {
  AuditRepo,
  JobsRepo,
  MailRepo,
  OrderCertificatesRepo,
  OrderNamesRepo,
  OrdersRepo,
} from '../../storage/index.js';
import { DEFAULT_BLOCKED_NAMES, isBlockedName } from '../../validation/index.js';
import type { CatalogService } from '../catalog/catalog.js';
import type { Notifier } from '../mail/notify.js';
import { termEnd, vettedSubject } from './certificate-terms.js';
import type { ProofChecks } from './proof-checks.js';

const DAY = 86_400;
/**
 * How long an issuance claim lasts if its holder disappears without a trace on another host (a
 * dead process on this host is taken over at once). Signing takes milliseconds; the margin covers
 * a stalled event loop or a slow database, and the CA's record-time check covers the rest.
 */
export const ISSUANCE_CLAIM_SECONDS = 120;
/** What a caller that has just checked the order may spare `issue` from doing again. */
export interface IssueOptions {
  readonly caaChecked?: boolean;
  readonly csr?: CheckedCsr;
}

/** An issuance round completed by its claim's holder: the order as completed, and the certificate when signed in this round now. */
export interface Completed {
  readonly order: Order;
  readonly certificate?: IssuedCertificate;
}

export interface FlowRepos {
  readonly orders: OrdersRepo;
  readonly orderCertificates: Pick<OrderCertificatesRepo, 'adoptableCertificate' | 'markDelivered' | 'isDelivered'>;
  readonly audit: Pick<AuditRepo, 'append'>;
  readonly jobs: Pick<JobsRepo, 'rescheduleInTransaction' | 'enqueueInTransaction'>;
  /** The issued / reissued notice, written with the completion. */
  readonly mail: Pick<MailRepo, 'insertInTransaction' | 'withdraw'>;
}

export interface RoundsDeps extends Omit<FlowRepos, 'audit' | 'jobs' | 'mail'> {
  readonly orderNames: Pick<OrderNamesRepo, 'names'>;
  readonly catalog: CatalogService;
  readonly clock: Clock;
  readonly ca: Pick<Issuer, 'issue' | 'revoke'>;
  /** Seconds after each issuance until the configuration scan behind ConfigurationAssessment (default 4 days). */
  readonly configurationScanDelay?: number;
  /** Mail to the order's contacts when a certificate is issued or reissued, in the completion's transaction. */
  readonly notify?: Pick<Notifier, 'orderEvent'>;
  /** Where a failure left to the order's job is noted (`OrderFlow.advanceForPerson`). */
  readonly logger?: { warn(obj: object, msg?: string): void };
  /** Names the service does not certify, beside the built-in ones (`CERTDESK_BLOCKED_NAMES`): checked again before signing. */
  readonly blockedNames?: readonly string[];
  readonly transact: Transact<FlowRepos>;
}

export class IssuanceRounds {
  /**
   * The completions (step 3 of `issue`), group committed: under load many orders' completions
   * share one transaction (TransactionBatch). On the inline POST /Order path a completion was a
   * transaction of its own per order, its commit ~240 µs of SQLite's time and on PostgreSQL two
   * more round trips.
   */
  private readonly completions: TransactionBatch<FlowRepos>;
  private readonly blockList: readonly string[];

  constructor(
    private readonly deps: RoundsDeps,
    /** This process as the holder of issuance claims. */
    private readonly holder: string,
    private readonly proofs: Pick<ProofChecks, 'caaProblem'>,
  ) {
    this.completions = new TransactionBatch(deps.transact);
    this.blockList = [...DEFAULT_BLOCKED_NAMES, ...(deps.blockedNames ?? [])];
  }

  /**
   * Signs the order's current issuance round and completes the order, at most once per round.
   * Returns `done` when the round is over (issued now, or by someone else before), `held` when
   * another actor holds the round's claim and is still at work: the caller waits for its result or
   * looks again later. Throws on a transient failure (a CAA lookup, the CA not ready) after giving
   * the claim back, so a retry starts afresh. `caaChecked`: CAA was checked a moment ago (POST
   * /Order issuing inline), not again; `csr`: the order's CSR as the CA checked it a moment ago.
   *
   * The invariant (Boulder's `FinalizeOrder`): no round is ever signed twice, and no signature is
   * made that is not recorded against its order before anyone sees it.
   * - Step 1: before any key is touched, the caller wins the round's claim with one guarded UPDATE
   *   (`claimIssuance`). Every other actor — the inline POST /Order, the worker's job, a second
   *   worker, a retry, a process restarted after a crash — finds it claimed and leaves the order
   *   to the holder, unless the holder is certainly gone (its process dead on this host) or its
   *   claim has lapsed (ISSUANCE_CLAIM_SECONDS), when it takes the claim over.
   * - Step 2: the holder adopts the certificate a previous holder recorded for this round (the
   *   crash-recovery path) and signs only when there is none. The CA records the certificate in
   *   the same transaction that checks the claim is still held: a holder that stalled past its
   *   claim gets its certificate recorded revoked, and delivers nothing.
   * - Step 3: the order is completed by the claim's holder only (`markIssued`) and the certificate
   *   marked delivered, which is what the reconciliation (`Reconciliation`) checks. Once the claim
   *   is won every ending goes through `markIssued`, `fail` or `releaseIssuance`.
   */
  async issue(order: Order, options: IssueOptions = {}): Promise<'done' | 'held'> {
    const major = order.majorStatus;
    const claim = `${this.holder}/${randomBytes(6).toString('hex')}`;
    const now = this.deps.clock.nowSeconds();
    // Step 1: the claim.
    if (!(await this.deps.orders.claimIssuance(order.id, major, claim, now, now + ISSUANCE_CLAIM_SECONDS))) {
      const current = await this.deps.orders.byId(order.id);
      if (current === undefined || current.majorStatus !== major || current.minorStatus !== 'WF_ISSUANCE')
        return 'done';
      const held = current.issuanceClaim;
      if (held === null || !holderIsGone(held.split('/')[0]!)) return 'held';
      if (!(await this.deps.orders.takeOverIssuance(order.id, held, claim, now + ISSUANCE_CLAIM_SECONDS)))
        return 'held';
    }
    const current = await this.deps.orders.byId(order.id);
    if (current === undefined || current.issuanceClaim !== claim) return 'held';
    const names = await this.deps.orderNames.names([order.id]);
    // Only names shown are signed, whatever moved the order here: names a reissue put in place
    // after the claim (the claim then ended with the round) are left for their own round.
    const unshown = names.filter((n) => n.status !== 'VALIDATED').map((n) => n.name);
    if (unshown.length > 0) {
      await this.deps.orders.releaseIssuance(order.id, claim);
      if ((await this.deps.orders.byId(order.id))?.minorStatus !== 'WF_ISSUANCE') return 'done';
      throw new Error(`order ${order.id} awaits issuance with names not shown (${unshown.join(', ')}): not signed`);
    }
    await this.holding(current, claim, () =>
      this.signAndComplete(
        current,
        names.map((n) => n.name),
        claim,
        options,
        true,
      ),
    );
    return 'done';
  }

  /**
   * A claim for `issueClaimed`, to be stored with a new order awaiting issuance
   * (`NewOrder.issuanceClaim`): from its commit on, every other actor finds the round held.
   */
  newClaim(): { claim: string; until: number } {
    return {
      claim: `${this.holder}/${randomBytes(6).toString('hex')}`,
      until: this.deps.clock.nowSeconds() + ISSUANCE_CLAIM_SECONDS,
    };
  }

  /**
   * `issue` for a new order stored with its claim (POST /Order issuing inline): `order` and its
   * `names` as just stored. Step 1 was the order's creation, and no earlier holder can have
   * recorded a certificate for the round, so nothing is read back before signing. Should the claim
   * lapse meanwhile, the CA's record-time check still stops a second delivery. Returns what was
   * completed, or undefined when the round ended otherwise (failed, or taken over).
   */
  async issueClaimed(
    order: Order,
    names: readonly string[],
    claim: string,
    options: IssueOptions = {},
  ): Promise<Completed | undefined> {
    return this.holding(order, claim, () => this.signAndComplete(order, names, claim, options, false));
  }

  /** Runs `work` as the holder of `claim`; a throw gives the claim back, so a retry starts afresh. */
  private async holding<T>(order: Order, claim: string, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (e) {
      await this.deps.orders.releaseIssuance(order.id, claim);
      throw e;
    }
  }

  /**
   * Steps 2 and 3 of `issue`, for the holder of `claim`. `adopt`: look for a certificate a previous
   * holder of this round recorded (false only for a round claimed at the order's creation).
   */
  private async signAndComplete(
    order: Order,
    names: readonly string[],
    claim: string,
    options: IssueOptions,
    adopt: boolean,
  ): Promise<Completed | undefined> {
    const now = this.deps.clock.nowSeconds();
    const major = order.majorStatus;
    // Step 2: a certificate a previous holder of this round recorded (a reissue looks past the old ones), else sign.
    let cert: { serial: string; notBefore: number; notAfter: number; issued?: IssuedCertificate } | undefined = adopt
      ? await this.deps.orderCertificates.adoptableCertificate(
          order.id,
          major === 'REISSUE' ? order.reissueBaseCert : null,
        )
      : undefined;
    if (cert === undefined) {
      // The block list as it is now: a name blocked after the order was placed is not signed.
      const blocked = names.filter((n) => isBlockedName(n, this.blockList));
      if (blocked.length > 0) {
        await this.fail(order, 'WF_ISSUANCE', 'REJECTED', `${blocked.join(', ')} may not be certified (blocked name).`);
        return undefined;
      }
      const caa = options.caaChecked === true ? undefined : await this.proofs.caaProblem(order.caBrand, names);
      // A lookup that could not be answered is retried by the worker; a record that forbids fails the order.
      if (caa?.transient !== undefined) throw new Error(caa.transient);
      if (caa?.forbidden !== undefined) {
        await this.fail(order, 'WF_ISSUANCE', 'CAA_FORBIDDEN', caa.forbidden);
        return undefined;
      }
      const product = this.deps.catalog.productOf(order);
      let issued: IssuedCertificate;
      try {
        issued = await this.deps.ca.issue({
          csr: options.csr ?? checkCsr(order.csrPem ?? ''),
          product: {
            code: product.code,
            brand: product.brand,
            type: product.type,
            validationLevel: product.validationLevel,
          },
          signatureHashAlgorithm: order.signatureHashAlgorithm,
          dnsNames: [...names],
          commonName: order.commonName,
          orderId: order.id,
          customerId: order.customerId,
          actor: 'system',
          notAfter: order.termEnd ?? termEnd(order, now, product.validity.unit),
          issuanceClaim: claim,
          ...(order.validationLevel === 'OV' || order.validationLevel === 'EV'
            ? { organization: vettedSubject(order) }
            : {}),
        });
      } catch (e) {
        // The claim was lost while signing: the certificate is recorded revoked, the new holder finishes.
        if (e instanceof IssuanceClaimLost) return undefined;
        const kind = (e as { kind?: string }).kind;
        if (kind !== undefined && kind !== 'internal' && kind !== 'notReady') {
          await this.fail(order, 'WF_ISSUANCE', 'ISSUANCE_ERROR', (e as Error).message);
          return undefined;
        }
        throw e;
      }
      cert = { serial: issued.serial, notBefore: issued.notBefore, notAfter: issued.notAfter, issued };
    }
    // Step 3: complete, as the claim's holder only.
    const { serial, notAfter } = cert;
    const completed = await this.completions.run(async (tx) => {
      // issued_at stays the first issuance's: the cancel and refund windows count from it.
      const first =
        major === 'PENDING'
          ? {
              first: {
                issuedAt: now,
                termEnd: termEnd(order, now, this.deps.catalog.productOf(order).validity.unit),
              },
            }
          : {};
      const done = await tx.orders.markIssued(order.id, major, claim, now, { certNotAfter: notAfter, ...first });
      if (done === undefined) return undefined;
      await tx.orderCertificates.markDelivered(serial, now);
      // The configuration scan of what was just issued, some days from now (after a reissue: moved on).
      await tx.jobs.rescheduleInTransaction(
        {
          name: 'scan.configuration',
          payload: { orderId: order.id },
          uniqueKey: `scan:configuration:${order.id}`,
          runAt: now + (this.deps.configurationScanDelay ?? 4 * DAY),
        },
        now,
      );
      await tx.audit.append({
        at: now,
        customerId: order.customerId,
        actor: 'system',
        clientAddress: null,
        action: major === 'PENDING' ? 'order.issued' : 'order.reissued',
        subject: String(order.id),
        details: { serial },
      });
      // The notice commits with the completion: never lost to a crash, never sent for a rollback.
      await this.deps.notify?.orderEvent(
        done,
        major === 'PENDING' ? 'issued' : 'reissued',
        `Serial ${serial}, valid until ${new Date(notAfter * 1000).toISOString()}.`,
        tx,
      );
      return done;
    });
    if (completed !== undefined) {
      return cert.issued === undefined ? { order: completed } : { order: completed, certificate: cert.issued };
    }
    // The round ended under us: cancelled, or replaced by a new reissue round. Its certificate must not
    // outlive it. (A holder that took the claim over in this same round delivers it instead; one that
    // took over after this holder recorded it, and stalled, has adopted and delivered this very certificate.)
    const after = await this.deps.orders.byId(order.id);
    const sameRound =
      after !== undefined &&
      after.minorStatus === 'WF_ISSUANCE' &&
      after.majorStatus === major &&
      after.reissuedAt === order.reissuedAt;
    if (!sameRound && !(await this.deps.orderCertificates.isDelivered(serial)))
      await this.deps.ca.revoke(serial, after?.majorStatus === 'CANCELLED' ? 'cessationOfOperation' : 'superseded', {
        actor: 'system',
      });
    return undefined;
  }

  /** FAILED with a reason; the charge is refunded (the order never delivered). */
  async fail(order: Order, from: MinorStatus, minor: FailedMinorStatus, reason: string): Promise<void> {
    const now = this.deps.clock.nowSeconds();
    const customer = order.customerId;
    if (order.majorStatus === 'REISSUE') {
      // A reissue that cannot complete leaves the order with its current certificate, as it was.
      await this.deps.transact(async (tx) => {
        if (!(await tx.orders.markReissueAbandoned(order.id, from, `reissue abandoned (${minor}): ${reason}`, now)))
          return;
        await tx.audit.append({
          at: now,
          customerId: customer,
          actor: 'system',
          clientAddress: null,
          action: 'order.reissue-failed',
          subject: String(order.id),
          details: { minor, reason },
        });
      });
      return;
    }
    await this.deps.transact(async (tx) => {
      if (!(await tx.orders.markFailed(order.id, from, minor, reason, now))) return;
      await tx.orders.insertLedger(customer, order.id, 'refund', order.price.minor, now);
      await tx.orders.releaseCredit(customer, order.price.minor);
      await tx.audit.append({
        at: now,
        customerId: customer,
        actor: 'system',
        clientAddress: null,
        action: 'order.failed',
        subject: String(order.id),
        details: { minor, reason },
      });
    });
  }
}
