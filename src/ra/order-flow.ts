import { createHash } from 'node:crypto';
import type { Clock, CustomerId, JobId, MajorStatus, MinorStatus, SignatureHashAlgorithm } from '../core/index.js';
import { customerId as toCustomerId } from '../core/index.js';
import { checkCsr, type IssuedCertificate, type Issuer, type OrganizationSubject } from '../ca/index.js';
import type { AuditRepo, JobsRepo, OrderRow, OrdersRepo } from '../storage/index.js';
import { checkCaa, checkDnsCname, checkDnsTxt, checkFile, type DcvResolver, type FileCheckOptions } from '../validation/index.js';
import type { CatalogService } from './catalog.js';
import { dnsRecordName, expectedProofs, type CsrHashes } from './dcv-details.js';
import type { Notifier } from './notify.js';

const DAY = 86_400;
/** DESIGN §5.4: an order whose names are not validated within 30 days FAILs with DCV_EXPIRED. */
export const DCV_DEADLINE = 30 * DAY;

export interface FlowRepos {
  readonly orders: OrdersRepo;
  readonly audit: Pick<AuditRepo, 'append'>;
}

export interface OrderFlowDeps extends FlowRepos {
  readonly catalog: CatalogService;
  readonly clock: Clock;
  readonly ca: Pick<Issuer, 'issue' | 'revoke'>;
  readonly resolver: DcvResolver;
  readonly file: Omit<FileCheckOptions, 'resolve'>;
  readonly jobs: Pick<JobsRepo, 'enqueue'>;
  /** Mail to the order's contacts when a certificate is issued or reissued. */
  readonly notify?: Pick<Notifier, 'orderEvent'>;
  readonly transact: <T>(fn: (repos: FlowRepos) => Promise<T>) => Promise<T>;
}

/** When to look again: soon after the order, then less and less often (the proof may take a while to appear). */
export function nextCheckDelay(ageSeconds: number): number {
  if (ageSeconds < 600) return 60;
  if (ageSeconds < 3600) return 300;
  if (ageSeconds < DAY) return 1800;
  return 6 * 3600;
}

/**
 * What happens to an order after it is placed (DESIGN §2 flow): the worker's `order.validate`
 * checks each pending name (DNS or FILE; EMAIL waits for the approver), records the results,
 * and when every name is shown moves the order on: OV/EV to the operator's vetting, DV to
 * issuance, which re-checks CAA, signs through the Issuer and completes the order. Every step is
 * a guarded transition, so a job run twice (a crash, a lost lease) changes nothing twice.
 */
export class OrderFlow {
  constructor(private readonly deps: OrderFlowDeps) {}

  /** Job `order.validate`. */
  async validate(payload: { readonly orderId: number }, ctx: { readonly id: JobId }): Promise<void> {
    const order = await this.deps.orders.byId(payload.orderId);
    if (order === undefined || (order.major_status !== 'PENDING' && order.major_status !== 'REISSUE')) return;
    const now = this.deps.clock.nowSeconds();
    const minor = order.minor_status as MinorStatus;
    if (minor === 'WF_DNS_AUTH' || minor === 'WF_FILE_AUTH' || minor === 'WF_EMAIL_AUTH') {
      const names = await this.deps.orders.names([order.id]);
      for (const n of names) {
        if (n.status !== 'PENDING' || n.method === 'EMAIL') continue;
        const result = await this.checkProof(order, n.name, n.method as 'DNS' | 'FILE');
        await this.deps.orders.recordCheck(n.id, { validated: result.ok, at: now, problem: result.ok ? null : result.problem });
        await this.deps.audit.append({
          at: now, customerId: toCustomerId(order.customer_id), actor: 'system', clientAddress: null, action: result.ok ? 'dcv.validated' : 'dcv.checked',
          subject: String(order.id), details: { name: n.name, method: n.method, ...(result.ok ? {} : { problem: result.problem }) },
        });
      }
      const pending = (await this.deps.orders.names([order.id])).filter((n) => n.status !== 'VALIDATED');
      if (pending.length > 0) {
        const since = order.reissued_at ?? order.order_date;
        if (now - since >= DCV_DEADLINE) return this.fail(order, minor, 'DCV_EXPIRED', `not validated within 30 days: ${pending.map((n) => n.name).join(', ')}`);
        await this.deps.jobs.enqueue({ name: 'order.validate', payload, uniqueKey: `order:${order.id}`, runAt: now + nextCheckDelay(now - since), takeKeyFrom: ctx.id }, now);
        return;
      }
      return this.advance(order);
    }
    if (minor === 'WF_ISSUANCE') return this.issue(order);
  }

  /**
   * Every name shown: OV/EV on to the operator's vetting, DV on to issuance (done here). Called by
   * the worker and by an approver's click; the guarded transition lets only one of them proceed.
   */
  async advance(order: OrderRow): Promise<void> {
    const minor = order.minor_status as MinorStatus;
    const major = order.major_status as MajorStatus;
    const names = await this.deps.orders.names([order.id]);
    if ((major !== 'PENDING' && major !== 'REISSUE') || names.some((n) => n.status !== 'VALIDATED')) return;
    // A reissue keeps the organization vetted for the order: only a new order waits for vetting.
    const next: MinorStatus = major === 'PENDING' && (order.validation_level === 'OV' || order.validation_level === 'EV') ? 'WF_ORG_VALIDATION' : 'WF_ISSUANCE';
    if (!(await this.deps.orders.transition(order.id, { major, minor }, { major, minor: next }, this.deps.clock.nowSeconds()))) return;
    if (next === 'WF_ISSUANCE') await this.issue({ ...order, minor_status: next });
  }

  /** Whether the DNS record or file for one name of an order (or an order about to be placed) is in place. */
  async checkProof(
    order: Pick<OrderRow, 'ca_brand' | 'dcv_value' | 'csr_pem'> & { hashes?: CsrHashes }, name: string, method: 'DNS' | 'FILE',
  ): Promise<{ ok: true } | { ok: false; problem: string; transient?: boolean }> {
    const brand = this.deps.catalog.brand(order.ca_brand);
    const value = order.dcv_value ?? '';
    // Only the hash-style brand needs the CSR's hashes; the caller may have them already.
    const hashes = brand.dcvConvention === 'hash' ? order.hashes ?? this.csrHashes(order) : { hashMd5: '', hashSha256: '' };
    const { file, cname } = expectedProofs(brand, hashes, value);
    if (method === 'DNS') {
      if (cname === undefined) return checkDnsTxt(this.deps.resolver, dnsRecordName(name), value);
      return checkDnsCname(this.deps.resolver, name.replace(/^\*\./, ''), cname.label.slice(1), cname.target);
    }
    return checkFile(name, file.name, file.contents, { ...this.deps.file, resolve: (host) => this.deps.resolver.addresses(host) });
  }

  /** HashMD5 and HashSHA256 of the order's CSR (DER), upper-case hex as /ValidateCSR shows them. */
  private csrHashes(order: Pick<OrderRow, 'csr_pem'>): CsrHashes {
    const der = checkCsr(order.csr_pem ?? '').der;
    const hash = (alg: string) => createHash(alg).update(der).digest('hex').toUpperCase();
    return { hashMd5: hash('md5'), hashSha256: hash('sha256') };
  }

  /**
   * Re-checks CAA for every name, signs (or, after a crash between signing and completing, finds
   * the certificate already signed for the order), and completes the order with its charge cleared.
   */
  /**
   * CAA for every name (RFC 8659): undefined when all permit; `forbidden` names the record that
   * does not; `transient` when a lookup could not be answered.
   */
  async caaProblem(brandId: string, names: readonly string[]): Promise<{ forbidden?: string; transient?: string } | undefined> {
    const brand = this.deps.catalog.brand(brandId);
    for (const name of names) {
      const caa = await checkCaa(this.deps.resolver, name, [brand.caDomain]);
      if (caa.permitted) continue;
      if ('transient' in caa) return { transient: `CAA lookup for ${name} failed: ${caa.problem}` };
      return { forbidden: `CAA at ${caa.relevant} forbids ${brand.name} to issue for ${name}: ${caa.problem}` };
    }
    return undefined;
  }

  /** `caaChecked`: CAA was checked a moment ago (POST /Order issuing inline), not again. */
  async issue(order: OrderRow, options: { caaChecked?: boolean } = {}): Promise<void> {
    const now = this.deps.clock.nowSeconds();
    const names = (await this.deps.orders.names([order.id])).map((n) => n.name);
    const major = order.major_status as MajorStatus;
    // A certificate signed in this round (a run after a crash finds it); a reissue looks past the old ones.
    let cert: { serial: string; notBefore: number; notAfter: number } | undefined = await this.deps.orders.latestCertificate(order.id, major === 'REISSUE' ? order.reissue_base_cert : null);
    if (cert === undefined) {
      const caa = options.caaChecked === true ? undefined : await this.caaProblem(order.ca_brand, names);
      // A lookup that could not be answered is retried by the worker; a record that forbids fails the order.
      if (caa?.transient !== undefined) throw new Error(caa.transient);
      if (caa?.forbidden !== undefined) return this.fail(order, 'WF_ISSUANCE', 'CAA_FORBIDDEN', caa.forbidden);
      const product = this.deps.catalog.product(order.product_code);
      let issued: IssuedCertificate;
      try {
        issued = await this.deps.ca.issue({
          csr: checkCsr(order.csr_pem ?? ''), product: { code: product.code, brand: product.brand, type: product.type, validationLevel: product.validationLevel },
          signatureHashAlgorithm: order.signature_hash_algorithm as SignatureHashAlgorithm, dnsNames: names, commonName: order.common_name,
          orderId: order.id, customerId: toCustomerId(order.customer_id), actor: 'system', notAfter: order.term_end ?? termEnd(order, now, product.validity.unit),
          ...(order.validation_level === 'OV' || order.validation_level === 'EV' ? { organization: vettedSubject(order) } : {}),
        });
      } catch (e) {
        const message = (e as Error).message;
        if ((e as { kind?: string }).kind !== undefined && (e as { kind?: string }).kind !== 'internal' && (e as { kind?: string }).kind !== 'notReady') {
          return this.fail(order, 'WF_ISSUANCE', 'ISSUANCE_ERROR', message);
        }
        throw e;
      }
      cert = { serial: issued.serial, notBefore: issued.notBefore, notAfter: issued.notAfter };
    }
    const serial = cert.serial;
    const completed = await this.deps.transact(async (tx) => {
      // issued_at stays the first issuance's: the cancel and refund windows count from it.
      const extra = major === 'PENDING' ? { issued_at: now, billing_status: 'cleared', term_end: termEnd(order, now, this.deps.catalog.product(order.product_code).validity.unit), cert_not_after: cert!.notAfter } : { cert_not_after: cert!.notAfter };
      if (!(await tx.orders.transition(order.id, { major, minor: 'WF_ISSUANCE' }, { major: 'COMPLETE', minor: 'COMPLETED' }, now, extra))) return false;
      await tx.audit.append({ at: now, customerId: toCustomerId(order.customer_id), actor: 'system', clientAddress: null, action: major === 'PENDING' ? 'order.issued' : 'order.reissued', subject: String(order.id), details: { serial } });
      return true;
    });
    // The order was cancelled while it was being signed: its certificate must not outlive it.
    if (!completed && (await this.deps.orders.byId(order.id))?.major_status === 'CANCELLED') {
      await this.deps.ca.revoke(serial, 'cessationOfOperation', { actor: 'system' });
    }
    if (completed) await this.deps.notify?.orderEvent((await this.deps.orders.byId(order.id))!, major === 'PENDING' ? 'issued' : 'reissued', `Serial ${serial}, valid until ${new Date(cert.notAfter * 1000).toISOString()}.`);
  }

  /** FAILED with a reason; the charge is refunded (the order never delivered). */
  async fail(order: OrderRow, from: MinorStatus, minor: MinorStatus, reason: string): Promise<void> {
    const now = this.deps.clock.nowSeconds();
    const customer: CustomerId = toCustomerId(order.customer_id);
    if (order.major_status === 'REISSUE') {
      // A reissue that cannot complete leaves the order with its current certificate, as it was.
      await this.deps.transact(async (tx) => {
        if (!(await tx.orders.transition(order.id, { major: 'REISSUE', minor: from }, { major: 'COMPLETE', minor: 'COMPLETED' }, now, { failure_reason: `reissue abandoned (${minor}): ${reason}` }))) return;
        await tx.audit.append({ at: now, customerId: customer, actor: 'system', clientAddress: null, action: 'order.reissue-failed', subject: String(order.id), details: { minor, reason } });
      });
      return;
    }
    await this.deps.transact(async (tx) => {
      if (!(await tx.orders.transition(order.id, { major: 'PENDING', minor: from }, { major: 'FAILED', minor }, now, { failure_reason: reason, billing_status: 'refunded' }))) return;
      await tx.orders.insertLedger(customer, order.id, 'refund', order.price_minor, now);
      await tx.orders.releaseCredit(customer, order.price_minor);
      await tx.audit.append({ at: now, customerId: customer, actor: 'system', clientAddress: null, action: 'order.failed', subject: String(order.id), details: { minor, reason } });
    });
  }
}

/** Vetted organization data of an OV/EV order: OrganizationInfo as ordered, plus what the operator's vetting added. */
export interface VettedData {
  readonly BusinessCategory?: string;
  readonly RegistrationNumber?: string;
  readonly JurisdictionCountry?: string;
  readonly JurisdictionState?: string;
  readonly JurisdictionLocality?: string;
}

/** The certificate subject of an OV/EV order (DESIGN §5.7: from vetted organization data). */
export function vettedSubject(order: Pick<OrderRow, 'organization_json'>): OrganizationSubject {
  const info = (order.organization_json === null ? {} : JSON.parse(order.organization_json)) as {
    OrganizationName?: string; OrganizationAddress?: Record<string, string | undefined>; Vetted?: VettedData;
  };
  const a = info.OrganizationAddress ?? {};
  const v = info.Vetted ?? {};
  const opt = <K extends string>(key: K, value: string | undefined) => (value === undefined || value === '' ? {} : { [key]: value } as Record<K, string>);
  return {
    organization: info.OrganizationName ?? '', country: (a.Country ?? '').toUpperCase(),
    ...opt('state', a.Region), ...opt('locality', a.City), ...opt('street', a.AddressLine1), ...opt('postalCode', a.PostalCode),
    ...opt('businessCategory', v.BusinessCategory), ...opt('registrationNumber', v.RegistrationNumber),
    ...opt('jurisdictionCountry', v.JurisdictionCountry?.toUpperCase()), ...opt('jurisdictionState', v.JurisdictionState), ...opt('jurisdictionLocality', v.JurisdictionLocality),
  };
}

/**
 * When an order's term ends if it starts at `start`: ValidityPeriod in calendar months, or in
 * days for the free automated product. Certificates are capped by this and by the lifetime the
 * Baseline Requirements allow; a longer term is a subscription covered by free reissues.
 */
export function termEnd(order: Pick<OrderRow, 'validity_period'>, start: number, unit: 'months' | 'days'): number {
  if (unit === 'days') return start + order.validity_period * DAY;
  const d = new Date(start * 1000);
  d.setUTCMonth(d.getUTCMonth() + order.validity_period);
  return Math.floor(d.getTime() / 1000);
}
