import { X509Certificate } from 'node:crypto';
import {
  CertdeskError, ORDER_DCV_METHODS, customerId as toCustomerId, dcvReuseSeconds, waitingFor,
  type Clock, type FieldFault, type JobId, type MajorStatus, type MinorStatus, type OrderDcvMethod, type SignatureHashAlgorithm,
} from '../core/index.js';
import { checkCsr, type Issuer } from '../ca/index.js';
import { ensureRecurring, type AuditRepo, type DcvValuesRepo, type JobsRepo, type NewOrderName, type OrderRow, type OrdersRepo } from '../storage/index.js';
import { DEFAULT_BLOCKED_NAMES, constructedApprovers, parseCsr, type CsrInfo } from '../validation/index.js';
import type { CatalogService } from './catalog.js';
import { dcvExpectations } from './dcv-details.js';
import type { EmailApprovals } from './email-approval.js';
import type { Mailer } from './mail.js';
import { contactAddresses, type Notifier } from './notify.js';
import type { OrderFlow } from './order-flow.js';
import { actorName, type Actor } from './actor.js';
import { orderNames } from './order-rules.js';

const DAY = 86_400;
/** Spec §8: cancelling is free before issuance and up to 30 days after it; later it is charged. */
export const CANCEL_REFUND_DAYS = 30;

export interface LifecycleRepos {
  readonly orders: OrdersRepo;
  readonly audit: Pick<AuditRepo, 'append'>;
  readonly jobs: Pick<JobsRepo, 'rescheduleInTransaction'>;
}

/** POST /Reissue's body (spec §4.16); members are checked here. */
export interface ReissueInput {
  readonly OrderParameters?: Record<string, unknown>;
  readonly ReissueEmail?: unknown;
}

/**
 * RFC 5280 reason from the free text clients send (spec §4.17: "English if possible"). Known
 * reason names in any spelling and common phrases map to their code; anything else is
 * `unspecified`.
 */
export function revocationReason(text: string): 'unspecified' | 'keyCompromise' | 'affiliationChanged' | 'superseded' | 'cessationOfOperation' | 'privilegeWithdrawn' {
  const t = text.toLowerCase().replace(/[^a-z]/g, '');
  if (/keycompromise|compromis|stolen|leak/.test(t)) return 'keyCompromise';
  if (/affiliationchanged|affiliation|namechange/.test(t)) return 'affiliationChanged';
  if (/superseded|replaced|reissue|newcertificate|renewed/.test(t)) return 'superseded';
  if (/cessationofoperation|cessation|nolongerneeded|notneeded|decommission|shutdown|closed|cancel/.test(t)) return 'cessationOfOperation';
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
  constructor(private readonly deps: LifecycleRepos & {
    catalog: CatalogService;
    clock: Clock;
    ca: Pick<Issuer, 'revoke'>;
    dcvValues: Pick<DcvValuesRepo, 'getOrCreate'>;
    flow: Pick<OrderFlow, 'advance'>;
    approvals: Pick<EmailApprovals, 'sendForNewOrder'>;
    blockedNames: readonly string[];
    mailer: Pick<Mailer, 'send'>;
    notify?: Pick<Notifier, 'orderEvent'>;
    /** The job queue outside any transaction (recurring jobs). */
    recurring: Pick<JobsRepo, 'enqueue'>;
    transact: <T>(fn: (repos: LifecycleRepos) => Promise<T>) => Promise<T>;
  }) {}

  /**
   * POST /Reissue (spec §4.16): COMPLETE and REISSUE orders only (else -2011 on ServiceOrderID).
   * A new CSR, or the original for mass replacement; names within the product's SAN rules and
   * what was paid for; validation by DVAuthMethod, or EMAIL when ReissueEmail is given. Names
   * validated within the reuse period of the Baseline Requirements are not validated again. The
   * order goes to REISSUE and keeps its certificate until the new one is issued; a reissue that
   * is still pending is replaced. Never charged.
   */
  async reissue(actor: Actor, orderId: number, input: ReissueInput): Promise<void> {
    const order = await this.owned(actor, orderId);
    await this.reissueOrder(order, input, { actor: actorName(actor.principal), clientAddress: actor.clientAddress });
  }

  /**
   * Subscriptions (DESIGN §5.7): an order whose term runs past its certificate gets a free reissue
   * of the same CSR before the certificate expires, until the term ends. Run daily by the worker.
   * Names still within the reuse period issue at once; the others need DCV again, and the order's
   * contacts are told by mail.
   */
  async renewDue(horizonSeconds = 30 * DAY): Promise<number[]> {
    const now = this.deps.clock.nowSeconds();
    const renewed: number[] = [];
    for (const order of await this.deps.orders.subscriptionsDue(now, horizonSeconds)) {
      try {
        await this.reissueOrder(order, {}, { actor: 'system', clientAddress: null });
        renewed.push(order.id);
      } catch (e) {
        // One order's problem must not stop the others; it is retried on the next run.
        if (!(e instanceof CertdeskError)) throw e;
      }
    }
    return renewed;
  }

  async scheduleRenewals(): Promise<void> {
    await ensureRecurring(this.deps.recurring, 'order.renew-subscriptions', {}, DAY, this.deps.clock.nowSeconds());
  }

  /** Job `order.renew-subscriptions`. */
  async renewJob(_payload: Record<string, never>, ctx: { readonly id: JobId }): Promise<void> {
    await this.renewDue();
    await ensureRecurring(this.deps.recurring, 'order.renew-subscriptions', {}, DAY, this.deps.clock.nowSeconds(), { after: ctx.id });
  }

  private async reissueOrder(order: OrderRow, input: ReissueInput, who: { actor: string; clientAddress: string | null }): Promise<void> {
    const orderId = order.id;
    const customer = toCustomerId(order.customer_id);
    const major = order.major_status as MajorStatus;
    if (major !== 'COMPLETE' && major !== 'REISSUE') {
      throw new CertdeskError('invalidOrderState', `Order ${orderId} is ${major}: only issued orders (COMPLETE or REISSUE) can be reissued.`, { field: 'ServiceOrderID' });
    }
    const p = input.OrderParameters ?? {};
    const faults: FieldFault[] = [];
    const bad = (field: string, message: string, kind: FieldFault['kind'] = 'invalidInput') => faults.push({ kind, field, message });
    const product = this.deps.catalog.product(order.product_code);
    const brand = this.deps.catalog.brand(product.brand);
    const previousParams = JSON.parse(order.params_json) as Record<string, unknown>;

    // The CSR: a new one, or the original (mass replacement).
    const csrPem = typeof p.CSR === 'string' && p.CSR.trim() !== '' ? p.CSR : order.csr_pem ?? '';
    let csr: CsrInfo | undefined;
    try {
      csr = parseCsr(csrPem);
      checkCsr(csr.der);
    } catch (e) {
      if (!(e instanceof CertdeskError)) throw e;
      bad('CSR', e.message, e.kind);
    }
    const oldSans = JSON.parse(order.san_names) as string[];
    const { names, sanHosts } = orderNames(product, csr, p.SubjectAltNames ?? p.SubjectAltName ?? oldSans, [...DEFAULT_BLOCKED_NAMES, ...this.deps.blockedNames], bad);
    // What was paid for: no more SAN hosts, no more wildcards.
    const paidSans = Number(previousParams.SubjectAltNameCount ?? 0);
    const paidWildcards = (previousParams.SubjectAltNames as string[] | undefined ?? []).filter((n) => n.startsWith('*.')).length;
    if (sanHosts.length > paidSans) bad('SubjectAltNames', `The order paid for ${paidSans} SAN host(s); the reissue asks for ${sanHosts.length}.`);
    if (sanHosts.filter((n) => n.startsWith('*.')).length > paidWildcards) bad('SubjectAltNames', `The order paid for ${paidWildcards} wildcard SAN(s).`);

    const sha = typeof p.SignatureHashAlgorithm === 'string' && p.SignatureHashAlgorithm !== '' ? p.SignatureHashAlgorithm : order.signature_hash_algorithm;
    if (!brand.signatureHashAlgorithms.includes(sha as SignatureHashAlgorithm)) bad('SignatureHashAlgorithm', `${sha} is not offered by ${brand.name}.`);
    else if ((sha === 'SHA256-ECC-HYBRID' || sha === 'SHA256-ECC-FULL') && csr !== undefined && csr.keyAlgorithm !== 'ECC') bad('SignatureHashAlgorithm', `${sha} is for ECC keys; the CSR holds an ${csr.keyAlgorithm} key.`);

    // Validation method: DVAuthMethod, or EMAIL to ReissueEmail (else the administrative contact).
    const reissueEmail = typeof input.ReissueEmail === 'string' && input.ReissueEmail.trim() !== '' ? input.ReissueEmail.trim().toLowerCase() : undefined;
    const requested = typeof p.DVAuthMethod === 'string' && p.DVAuthMethod !== '' ? p.DVAuthMethod.toUpperCase() : undefined;
    const method = (reissueEmail !== undefined ? 'EMAIL' : requested ?? order.dv_auth_method ?? 'EMAIL') as OrderDcvMethod;
    if (!(ORDER_DCV_METHODS as readonly string[]).includes(method) || !product.dvAuthMethods.includes(method)) bad('DVAuthMethod', `${product.code} does not offer ${method} validation.`);
    if (method === 'FILE' && names.some((n) => n.startsWith('*.'))) bad('DVAuthMethod', 'FILE validation cannot show control of a wildcard name.');
    const approvers = new Map<string, string>();
    if (method === 'EMAIL') {
      const contacts = JSON.parse(order.contacts_json) as { AdminContact?: { Email?: string } };
      const fallback = reissueEmail ?? (typeof contacts.AdminContact?.Email === 'string' ? contacts.AdminContact.Email.toLowerCase() : undefined);
      const given = Array.isArray(p.DomainApprovers) ? (p.DomainApprovers as { Domain?: string; Approvers?: unknown[] }[]) : [];
      for (const n of names) {
        const item = given.find((d) => typeof d.Domain === 'string' && d.Domain.toLowerCase() === n);
        const email = (typeof item?.Approvers?.[0] === 'string' ? (item.Approvers[0] as string).toLowerCase() : undefined) ?? fallback;
        if (email === undefined || !constructedApprovers(n).includes(email)) bad(reissueEmail !== undefined ? 'ReissueEmail' : 'DomainApprovers', `${email ?? 'no address'} is not an approver of ${n} (see GET /ApproverList).`);
        else approvers.set(n, email);
      }
    }
    if (faults.length > 0) throw CertdeskError.ofFaults(faults);

    // Names shown recently enough count again (BR §4.2.1); the rest are validated anew.
    const now = this.deps.clock.nowSeconds();
    const reuse = dcvReuseSeconds(now);
    const previous = await this.deps.orders.names([order.id]);
    const newNames: NewOrderName[] = names.map((name) => {
      const old = previous.find((n) => n.name === name && n.status === 'VALIDATED' && n.validated_at !== null && now - n.validated_at <= reuse);
      return old === undefined
        ? { name, method, status: 'PENDING', approver_email: approvers.get(name) ?? null }
        : { name, method: old.method, status: 'VALIDATED', approver_email: old.approver_email, validated_at: old.validated_at, last_checked_at: old.last_checked_at };
    });
    const allShown = newNames.every((n) => n.status === 'VALIDATED');
    const dcv = await dcvExpectations(this.deps, customer, brand, csr!, names);
    const base = await this.deps.orders.latestCertificate(order.id);
    const params = { ...previousParams, SubjectAltNames: sanHosts, DVAuthMethod: method, SignatureHashAlgorithm: sha };
    const started = await this.deps.transact(async (tx) => {
      const ok = await tx.orders.startReissue(order.id, major, {
        minor_status: allShown ? 'WF_ISSUANCE' : waitingFor(method), csr_pem: csrPem, csr_sha256: csr!.hashSha256, common_name: names[0]!,
        san_names: JSON.stringify(names.slice(1)), signature_hash_algorithm: sha, dv_auth_method: method, dcv_value: dcv.value,
        params_json: JSON.stringify(params), reissued_at: now, reissue_base_cert: base?.id ?? null, update_date: now,
      }, newNames);
      if (!ok) return false;
      await tx.jobs.rescheduleInTransaction({ name: 'order.validate', payload: { orderId: order.id }, uniqueKey: `order:${order.id}`, runAt: now }, now);
      await tx.audit.append({
        at: now, customerId: customer, actor: who.actor, clientAddress: who.clientAddress, action: 'order.reissue', subject: String(order.id),
        details: { names, method, newCsr: csrPem !== order.csr_pem, reused: newNames.filter((n) => n.status === 'VALIDATED').map((n) => n.name), replacedPending: major === 'REISSUE' },
      });
      return true;
    });
    if (!started) throw new CertdeskError('conflict', `Order ${orderId} changed while the reissue was being started: read it again.`, { field: 'ServiceOrderID' });
    if (method === 'EMAIL' && !allShown) await this.deps.approvals.sendForNewOrder(order.id);
    if (who.actor === 'system' && !allShown) {
      // A renewal the customer must act on: the DCV proof has to be shown again.
      const to = contactAddresses(order);
      const how = method === 'DNS' ? `Publish the DNS record: ${dcv.dns.Example}` : method === 'FILE' ? `Publish ${dcv.file.FilePath}${dcv.file.FileName} containing:\n${dcv.file.FileContents}` : 'The approver has been sent a new approval mail.';
      for (const address of to) {
        await this.deps.mailer.send({
          to: address, kind: 'subscription.action-needed', customerId: order.customer_id, orderId: order.id,
          subject: `Action needed: renew the certificate of order ${order.id} (${names[0]!})`,
          text: `The certificate of order ${order.id} expires soon and its subscription continues. Control of ${pending(newNames)} must be shown again.\n\n${how}\n`,
        });
      }
    }
    if (allShown) await this.deps.flow.advance((await this.deps.orders.byId(order.id))!);
  }

  /**
   * DELETE /Order/{id}: pending or reissue-pending → CANCELLED and refunded; issued up to 30 days
   * ago → CANCELLED, refunded and the certificate revoked; issued earlier → CANCELLED and charged,
   * the certificate revoked. Cancelling a cancelled, failed or revoked order is refused.
   */
  async cancel(actor: Actor, orderId: number): Promise<{ refunded: boolean }> {
    const order = await this.owned(actor, orderId);
    const major = order.major_status as MajorStatus;
    if (major === 'CANCELLED' || major === 'FAILED' || major === 'REVOKED') {
      throw new CertdeskError('invalidOrderState', `Order ${orderId} is ${major} and cannot be cancelled.`, { field: 'ServiceOrderID' });
    }
    const now = this.deps.clock.nowSeconds();
    const refund = order.issued_at === null || now - order.issued_at <= CANCEL_REFUND_DAYS * DAY;
    const done = await this.deps.transact(async (tx) => {
      if (!(await tx.orders.transition(order.id, { major, minor: order.minor_status as MinorStatus }, { major: 'CANCELLED', minor: 'CANCELLED' }, now, refund ? { billing_status: 'refunded' } : { billing_status: 'cleared' }))) return false;
      if (refund) await this.refund(tx, order, now);
      await tx.audit.append({ at: now, customerId: actor.principal.customerId, actor: actorName(actor.principal), clientAddress: actor.clientAddress, action: 'order.cancelled', subject: String(order.id), details: { refunded: refund, from: major } });
      return true;
    });
    if (!done) throw new CertdeskError('conflict', `Order ${orderId} changed while it was being cancelled: read it again.`, { field: 'ServiceOrderID' });
    // A cancelled order's certificates must not outlive it.
    await this.revokeAll(order.id, 'cessationOfOperation', actorName(actor.principal));
    await this.deps.notify?.orderEvent((await this.deps.orders.byId(order.id))!, 'cancelled', refund ? 'The order was refunded.' : 'Cancelled more than 30 days after issuance: the order stays charged.');
    return { refunded: refund };
  }

  /**
   * DELETE /Revoke/{id}: the supplied certificate must be one of the order's (old or new). Its
   * revocation is recorded at once in the CRL and OCSP; the order becomes REVOKED when its current
   * certificate is revoked, and is refunded when that happens within the product's RefundPeriod.
   */
  async revoke(actor: Actor, orderId: number, certificatePem: string, reasonText: string): Promise<{ serial: string; reason: string; refunded: boolean }> {
    const order = await this.owned(actor, orderId);
    const serial = serialOfPem(certificatePem);
    if (serial === undefined) throw new CertdeskError('invalidInput', 'Certificate is not a PEM certificate.', { field: 'Certificate' });
    const certs = await this.deps.orders.certificates(order.id);
    const cert = certs.find((c) => c.serial === serial);
    if (cert === undefined) throw new CertdeskError('invalidInput', 'The certificate does not belong to this order.', { field: 'Certificate' });
    const reason = revocationReason(reasonText);
    const result = await this.deps.ca.revoke(serial, reason, { actor: actorName(actor.principal) });
    const now = this.deps.clock.nowSeconds();
    const current = certs[0]!.serial === serial;
    let refunded = false;
    if (current && (order.major_status === 'COMPLETE' || order.major_status === 'REISSUE')) {
      const product = this.deps.catalog.product(order.product_code);
      refunded = order.issued_at !== null && now - order.issued_at <= product.refundPeriodDays * DAY;
      await this.deps.transact(async (tx) => {
        if (!(await tx.orders.transition(order.id, { major: order.major_status as MajorStatus }, { major: 'REVOKED', minor: 'REVOKED' }, now, refunded ? { billing_status: 'refunded' } : {}))) {
          refunded = false;
          return;
        }
        if (refunded) await this.refund(tx, order, now);
      });
    }
    await this.deps.audit.append({
      at: now, customerId: actor.principal.customerId, actor: actorName(actor.principal), clientAddress: actor.clientAddress, action: 'order.revoked', subject: String(order.id),
      details: { serial, reason, alreadyRevoked: result.alreadyRevoked, refunded },
    });
    await this.deps.notify?.orderEvent((await this.deps.orders.byId(order.id))!, 'revoked', `Serial ${serial}, reason ${reason}.`);
    return { serial, reason, refunded };
  }

  /** Revokes every unrevoked certificate of an order (cancellation, a race lost to a cancel). */
  async revokeAll(orderId: number, reason: 'cessationOfOperation' | 'superseded', actor: string): Promise<void> {
    for (const c of await this.deps.orders.certificates(orderId)) {
      if (c.revokedAt === null) await this.deps.ca.revoke(c.serial, reason, { actor });
    }
  }

  private async refund(tx: LifecycleRepos, order: OrderRow, now: number): Promise<void> {
    if (order.price_minor === 0) return;
    await tx.orders.insertLedger(toCustomerId(order.customer_id), order.id, 'refund', order.price_minor, now);
    await tx.orders.releaseCredit(toCustomerId(order.customer_id), order.price_minor);
  }

  private async owned(actor: Actor, orderId: number): Promise<OrderRow> {
    const order = await this.deps.orders.get(actor.principal.customerId, orderId);
    if (order === undefined) throw new CertdeskError('orderNotFound', `Invalid order id ${orderId}: no such order.`, { field: 'ServiceOrderID' });
    return order;
  }
}


const pending = (names: readonly NewOrderName[]) => names.filter((n) => n.status !== 'VALIDATED').map((n) => n.name).join(', ');
