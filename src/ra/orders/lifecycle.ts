import { X509Certificate } from 'node:crypto';
import {
  CertdeskError,
  formatTimestamp,
  orderId as toOrderId,
  type Clock,
  type Order,
  type OrderId,
} from '../../core/index.js';
import { revocationReasonName, type Issuer, type RevocationResult } from '../../ca/index.js';
import {
  type AuditRepo,
  type JobsRepo,
  type MailRepo,
  type OrderCertificatesRepo,
  type OrderNamesRepo,
  type OrdersRepo,
} from '../../storage/index.js';
import type { CatalogService } from '../catalog/catalog.js';
import type { Notifier } from '../mail/notify.js';
import { actorName, type Actor } from '../accounts/actor.js';

const DAY = 86_400;
/** Spec §8: cancelling is free before issuance and up to 30 days after it; later it is charged. */
export const CANCEL_REFUND_DAYS = 30;
/** When the job that finishes a cancel's revocations runs: after the cancel itself has done them, normally. */
const REVOKE_AFTER_CANCEL_SECONDS = 60;
/** Idempotency-Key of DELETE /Order: an opaque client token (a UUID is 36), bounded so it stays cheap to store and compare. */
export const MAX_IDEMPOTENCY_KEY = 255;

export interface LifecycleRepos {
  readonly orders: OrdersRepo;
  readonly orderCertificates: Pick<OrderCertificatesRepo, 'latestCertificate' | 'certificates'>;
  readonly orderNames: Pick<OrderNamesRepo, 'names' | 'setApproval'>;
  readonly audit: Pick<AuditRepo, 'append'>;
  readonly jobs: Pick<JobsRepo, 'rescheduleInTransaction' | 'enqueueInTransaction'>;
  /** Notices written with the change they report (Notifier.orderEvent). */
  readonly mail: Pick<MailRepo, 'insertInTransaction' | 'withdraw'>;
}

export type { ReissueInput } from './order-rules.js';

/**
 * RFC 5280 reason from the free text clients send (spec §4.17: "English if possible"). Known
 * reason names in any spelling and common phrases map to their code; anything else is
 * `unspecified`.
 */
export function revocationReason(
  text: string,
):
  | 'unspecified'
  | 'keyCompromise'
  | 'affiliationChanged'
  | 'superseded'
  | 'cessationOfOperation'
  | 'privilegeWithdrawn' {
  const t = text.toLowerCase().replace(/[^a-z]/g, '');
  if (/keycompromise|compromis|stolen|leak/.test(t)) return 'keyCompromise';
  if (/affiliationchanged|affiliation|namechange/.test(t)) return 'affiliationChanged';
  if (/superseded|replaced|reissue|newcertificate|renewed/.test(t)) return 'superseded';
  if (/cessationofoperation|cessation|nolongerneeded|notneeded|decommission|shutdown|closed|cancel/.test(t))
    return 'cessationOfOperation';
  if (/privilegewithdrawn|withdrawn/.test(t)) return 'privilegeWithdrawn';
  return 'unspecified';
}

/** The serial (upper-case hex, as the CA records it) of the certificate in a PEM text. */
export function serialOfPem(pem: string): string | undefined {
  try {
    return new X509Certificate(pem).serialNumber.toUpperCase().replace(/^(00)+(?=.)/, '');
  } catch {
    return undefined;
  }
}

/**
 * Cancel and revoke (spec §3.1, §4.15, §4.17; DESIGN §5.4–§5.5). Every change is a guarded
 * transition from the state that was read, so a cancel racing an issuance ends in one state;
 * refunds go through the ledger's one-refund-per-order constraint, so there is never a second one.
 */
export class Lifecycle {
  constructor(
    private readonly deps: LifecycleRepos & {
      catalog: CatalogService;
      clock: Clock;
      ca: Pick<Issuer, 'revoke'>;
      notify?: Pick<Notifier, 'orderEvent'>;
      transact: <T>(fn: (repos: LifecycleRepos) => Promise<T>) => Promise<T>;
    },
  ) {}

  /**
   * DELETE /Order/{id}: pending or reissue-pending → CANCELLED and refunded; issued up to 30 days
   * ago → CANCELLED, refunded and the certificate revoked; issued earlier → CANCELLED and charged,
   * the certificate revoked. Cancelling a cancelled, failed or revoked order is refused
   * (invalidOrderState) — except a retry carrying the Idempotency-Key of the request that
   * cancelled it: that gets the first answer again (`replayed`), with no new audit event, refund
   * or mail. Throws invalidInput (Idempotency-Key) for an empty key or one over 255 characters.
   */
  async cancel(
    actor: Actor,
    orderId: number,
    options: { idempotencyKey?: string } = {},
  ): Promise<{ refunded: boolean; replayed: boolean }> {
    const key = options.idempotencyKey;
    if (key !== undefined && (key.length === 0 || key.length > MAX_IDEMPOTENCY_KEY)) {
      throw new CertdeskError('invalidInput', `Idempotency-Key must be 1 to ${MAX_IDEMPOTENCY_KEY} characters.`, {
        field: 'Idempotency-Key',
      });
    }
    const order = await this.owned(actor, orderId);
    const major = order.majorStatus;
    if (major === 'CANCELLED' || major === 'FAILED' || major === 'REVOKED') return this.replayCancel(actor, order, key);
    const now = this.deps.clock.nowSeconds();
    const refund = order.issuedAt === null || now - order.issuedAt <= CANCEL_REFUND_DAYS * DAY;
    const done = await this.deps.transact(async (tx) => {
      if (!(await tx.orders.markCancelled(order.id, { major, minor: order.minorStatus }, refund, now))) return false;
      if (refund) await this.refund(tx, order, now);
      // The revocation below, made durable: should this process die before it, the job does it.
      await this.queueRevokeAll(tx, order.id, now);
      // The key commits with the cancel: a retry sees both or neither.
      if (key !== undefined) await tx.orders.recordCancelKey(order.id, key, refund);
      await tx.audit.append({
        at: now,
        customerId: actor.principal.customerId,
        actor: actorName(actor.principal),
        clientAddress: actor.clientAddress,
        action: 'order.cancelled',
        subject: String(order.id),
        details: { refunded: refund, from: major, ...(key === undefined ? {} : { idempotencyKey: key }) },
      });
      // The notice commits with the cancel (and its unsent approval requests are withdrawn with it).
      await this.deps.notify?.orderEvent(
        { ...order, majorStatus: 'CANCELLED' },
        'cancelled',
        refund ? 'The order was refunded.' : 'Cancelled more than 30 days after issuance: the order stays charged.',
        tx,
      );
      return true;
    });
    if (!done) {
      // Another request moved the order first. If it cancelled with this key, this is a retry that
      // overtook the first answer (or raced it): answer as it does.
      const latest = await this.deps.orders.get(actor.principal.customerId, order.id);
      if (latest !== undefined && latest.majorStatus === 'CANCELLED') return this.replayCancel(actor, latest, key);
      throw new CertdeskError('conflict', `Order ${orderId} changed while it was being cancelled: read it again.`, {
        field: 'ServiceOrderID',
      });
    }
    // A cancelled order's certificates must not outlive it.
    await this.revokeAll(order.id, 'cessationOfOperation', actorName(actor.principal));
    return { refunded: refund, replayed: false };
  }

  /**
   * The answer to a cancel of an order that is no longer cancellable: the recorded one when the
   * order was cancelled with this Idempotency-Key, else invalidOrderState (spec §3.1: cancelling
   * twice is refused). A replay also revokes any certificate the first request had not revoked yet
   * (it may have been cut off after committing the cancel); that writes nothing when all are.
   */
  private async replayCancel(
    actor: Actor,
    order: Order,
    key: string | undefined,
  ): Promise<{ refunded: boolean; replayed: boolean }> {
    if (key === undefined || order.majorStatus !== 'CANCELLED' || order.cancelKey !== key) {
      throw new CertdeskError(
        'invalidOrderState',
        `Order ${order.id} is ${order.majorStatus} and cannot be cancelled.`,
        { field: 'ServiceOrderID' },
      );
    }
    await this.revokeAll(order.id, 'cessationOfOperation', actorName(actor.principal));
    return { refunded: order.cancelRefunded === true, replayed: true };
  }

  /**
   * DELETE /Revoke/{id}: the supplied certificate must be one of the order's (old or new). Its
   * revocation is recorded at once in the CRL and OCSP; the order becomes REVOKED when its current
   * certificate is revoked, and is refunded when that happens within the product's RefundPeriod
   * (its other certificates, such as one a reissue left valid, then revoked too). A revoked certificate may be revoked again only to raise its reason to keyCompromise
   * (`escalatedFrom` names the reason it replaced; the revocation date stays the first). Any other
   * repeat throws invalidOrderState on Certificate and changes nothing: no audit event, no mail.
   */
  async revoke(
    actor: Actor,
    orderId: number,
    certificatePem: string,
    reasonText: string,
  ): Promise<{ serial: string; reason: string; refunded: boolean; revokedAt: number; escalatedFrom?: string }> {
    const order = await this.owned(actor, orderId);
    const serial = serialOfPem(certificatePem);
    if (serial === undefined)
      throw new CertdeskError('invalidInput', 'Certificate is not a PEM certificate.', { field: 'Certificate' });
    const certs = await this.deps.orderCertificates.certificates(order.id);
    const cert = certs.find((c) => c.serial === serial);
    if (cert === undefined)
      throw new CertdeskError('invalidInput', 'The certificate does not belong to this order.', {
        field: 'Certificate',
      });
    const reason = revocationReason(reasonText);
    const now = this.deps.clock.nowSeconds();
    let refunded = false;
    // What the RA records of the revocation (the order revoked and refunded when it was the current
    // certificate, the audit event, the notice) commits in the CA's own transaction: no revocation
    // without its record, and no record without the revocation.
    const result = await this.deps.ca.revoke(serial, reason, {
      actor: actorName(actor.principal),
      // The order's row before the certificate's, as an issuance completion takes them. Each run
      // of the transaction starts here (a deadlock's victim runs again): nothing refunded yet.
      lock: (tx) => {
        refunded = false;
        return tx.orders.hold(order.id);
      },
      record: async (change, tx) => {
        refunded = await this.recordRevocation(tx, actor, order, { change, serial, reason, now });
      },
    });
    if (result.change === 'none') {
      const recorded = revocationReasonName(result.reason);
      const since = formatTimestamp(result.revokedAt) ?? 'earlier';
      throw new CertdeskError(
        'invalidOrderState',
        recorded === 'keyCompromise'
          ? `Certificate ${serial} is already revoked for keyCompromise (since ${since}); nothing was changed.`
          : `Certificate ${serial} is already revoked (${recorded}, since ${since}); its reason can only be changed to keyCompromise, so nothing was changed.`,
        { field: 'Certificate' },
      );
    }
    // A refunded order's other certificates must not outlive it.
    if (refunded) await this.revokeAll(order.id, 'cessationOfOperation', actorName(actor.principal));
    const escalatedFrom =
      result.change === 'escalated' ? revocationReasonName(result.previousReason ?? null) : undefined;
    return {
      serial,
      reason,
      refunded,
      revokedAt: result.revokedAt,
      ...(escalatedFrom === undefined ? {} : { escalatedFrom }),
    };
  }

  /**
   * DELETE /Revoke's record of a revocation the CA has just made (or raised to keyCompromise), in
   * the CA's transaction: the order REVOKED, and refunded within the product's RefundPeriod, when it
   * was the current certificate; the audit event; the notice. Returns whether it refunded.
   */
  private async recordRevocation(
    tx: LifecycleRepos,
    actor: Actor,
    order: Order,
    made: { change: RevocationResult; serial: string; reason: string; now: number },
  ): Promise<boolean> {
    const { change, serial, reason, now } = made;
    const escalatedFrom =
      change.change === 'escalated' ? revocationReasonName(change.previousReason ?? null) : undefined;
    // The order and its current certificate (the newest delivered) as they are now, in this
    // transaction (a reissue may have started or completed since the request read them).
    const latest = (await tx.orders.byId(order.id)) ?? order;
    const current = (await tx.orderCertificates.certificates(order.id)).find((c) => c.delivered)?.serial === serial;
    let refund = false;
    if (current && (latest.majorStatus === 'COMPLETE' || latest.majorStatus === 'REISSUE')) {
      const product = this.deps.catalog.productOf(latest);
      refund = latest.issuedAt !== null && now - latest.issuedAt <= product.refundPeriodDays * DAY;
      if (!(await tx.orders.markRevoked(order.id, latest.majorStatus, refund, now))) refund = false;
      else if (refund) {
        await this.refund(tx, latest, now);
        // Refunded, the order leaves no certificate valid: an earlier one a reissue left in place
        // is revoked too (below; made durable here, as a cancel does).
        await this.queueRevokeAll(tx, order.id, now);
      }
    }
    await tx.audit.append({
      at: now,
      customerId: actor.principal.customerId,
      actor: actorName(actor.principal),
      clientAddress: actor.clientAddress,
      action: escalatedFrom === undefined ? 'order.revoked' : 'order.revocation-escalated',
      subject: String(order.id),
      details: {
        serial,
        reason,
        revokedAt: change.revokedAt,
        refunded: refund,
        ...(escalatedFrom === undefined ? {} : { previousReason: escalatedFrom }),
      },
    });
    await this.deps.notify?.orderEvent(
      order,
      'revoked',
      escalatedFrom === undefined
        ? `Serial ${serial}, reason ${reason}.`
        : `Serial ${serial}: the revocation reason was changed from ${escalatedFrom} to ${reason}; it stays revoked since ${formatTimestamp(change.revokedAt)}.`,
      tx,
    );
    return refund;
  }

  /** Job `order.revoke-certificates`: what a cancel queued, in case it could not finish. Idempotent. */
  async revokeCertificatesJob(payload: {
    readonly orderId: number;
    readonly reason: 'cessationOfOperation';
  }): Promise<void> {
    await this.revokeAll(toOrderId(payload.orderId), payload.reason, 'system');
  }

  /** `revokeAll` made durable in the caller's transaction: the job does it should this process die first. */
  private async queueRevokeAll(tx: LifecycleRepos, orderId: OrderId, now: number): Promise<void> {
    await tx.jobs.enqueueInTransaction(
      {
        name: 'order.revoke-certificates',
        payload: { orderId, reason: 'cessationOfOperation' },
        uniqueKey: `revoke:${orderId}`,
        runAt: now + REVOKE_AFTER_CANCEL_SECONDS,
      },
      now,
    );
  }

  /** Revokes every unrevoked certificate of an order (cancellation, a race lost to a cancel). */
  async revokeAll(orderId: OrderId, reason: 'cessationOfOperation' | 'superseded', actor: string): Promise<void> {
    for (const c of await this.deps.orderCertificates.certificates(orderId)) {
      if (c.revokedAt === null) await this.deps.ca.revoke(c.serial, reason, { actor });
    }
  }

  private async refund(tx: LifecycleRepos, order: Order, now: number): Promise<void> {
    if (order.price.minor === 0) return;
    await tx.orders.insertLedger(order.customerId, order.id, 'refund', order.price.minor, now);
    await tx.orders.releaseCredit(order.customerId, order.price.minor);
  }

  private owned(actor: Actor, orderId: number): Promise<Order> {
    return ownedOrder(this.deps.orders, actor, orderId);
  }
}

/** The caller's order with this id; another customer's is not found (orderNotFound on ServiceOrderID). */
export async function ownedOrder(orders: Pick<OrdersRepo, 'get'>, actor: Actor, orderId: number): Promise<Order> {
  const order = await orders.get(actor.principal.customerId, toOrderId(orderId));
  if (order === undefined)
    throw new CertdeskError('orderNotFound', `Invalid order id ${orderId}: no such order.`, {
      field: 'ServiceOrderID',
    });
  return order;
}
