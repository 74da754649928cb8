import {
  CertdeskError,
  Limiter,
  orderId as toOrderId,
  type Clock,
  type JobId,
  type Order,
  type OrderId,
  type Principal,
} from '../../core/index.js';
import type { IssuerCapabilities } from '../../ca/index.js';
import {
  CRITERIA_VERSION,
  ENGINE,
  GRADES,
  type Finding,
  type Grade,
  type HostReport,
  type ScanTarget,
} from '../../scan/index.js';
import type {
  Assessment,
  AssessmentStatus,
  AuditRepo,
  JobsRepo,
  NotificationLevel,
  OrderCertificatesRepo,
  OrdersRepo,
  ScanKind,
  ScansRepo,
  StoredScanReport,
} from '../../storage/index.js';
import { actorName, type Actor } from '../accounts/actor.js';
import type { CatalogService } from '../catalog/catalog.js';
import type { Mailer } from '../mail/mail.js';
import { contactAddresses } from '../mail/notify.js';

// Scans of an order's site (spec §4.22–4.23, §2.11; DESIGN §5.8). The vulnerability assessment of
// WVS products runs weekly while Active, and on demand at most once an hour; the configuration
// scan behind ConfigurationAssessment runs some days after each issuance. The scanner (src/scan)
// only looks; this records the reports, mails per the customer's level and schedules the next run.

const HOUR = 3600;
const DAY = 86_400;
const WEEK = 7 * DAY;
/** Names scanned per order at most (the common name and SANs, wildcards by their base name). */
export const MAX_SCANNED_NAMES = 100;
/** Reports kept in the history summary of GET /VulnerabilityAssessment/{id}. */
const HISTORY = 20;

/** The body of POST /VulnerabilityAssessment as sent: every member is checked here. */
export interface AssessmentInput {
  readonly ServiceOrderID?: unknown;
  readonly ServiceStatus?: unknown;
  readonly EmailNotificationLevel?: unknown;
}

/** What is stored as a report: the order's grade (its worst name's) and each name's report. */
export interface ScanReport {
  readonly kind: ScanKind;
  readonly at: number;
  readonly engine: string;
  readonly criteriaVersion: string;
  /** null when no name could be scanned. */
  readonly grade: Grade | null;
  /** `<name>: <finding id>` of every critical finding. */
  readonly critical: readonly string[];
  readonly hosts: readonly HostReport[];
}

/** GET /VulnerabilityAssessment/{id}: the settings, the latest report and the history's summary. */
export interface AssessmentView {
  readonly assessment: Assessment | undefined;
  readonly latest: ScanReport | undefined;
  readonly history: readonly { at: number; grade: string | null; critical: number }[];
}

/** Scans one name; the RA gives it the order's certificate. Built over src/scan's scanHost in main.ts. */
export type Scanner = (target: ScanTarget) => Promise<HostReport>;

export interface AssessmentsDeps {
  readonly orders: Pick<OrdersRepo, 'get' | 'byId'>;
  readonly orderCertificates: Pick<OrderCertificatesRepo, 'currentCertificate'>;
  readonly certificates: Pick<IssuerCapabilities, 'fulfillment'>;
  readonly scans: ScansRepo;
  readonly jobs: Pick<JobsRepo, 'enqueue'>;
  readonly audit: Pick<AuditRepo, 'append'>;
  readonly mailer: Pick<Mailer, 'send'>;
  readonly catalog: CatalogService;
  readonly clock: Clock;
  readonly scanner: Scanner;
  /** Names this process scans at once. */
  readonly concurrency: number;
}

const STATUSES: readonly AssessmentStatus[] = ['Active', 'Inactive'];
const LEVELS: readonly NotificationLevel[] = ['NONE', 'NEW_REPORT', 'CRITICAL'];
const CLOSED = new Set(['CANCELLED', 'REVOKED', 'FAILED']);

export class Assessments {
  /** The names this process scans at once. */
  private readonly limiter: Limiter;

  constructor(private readonly deps: AssessmentsDeps) {
    this.limiter = new Limiter(deps.concurrency);
  }

  /**
   * POST /VulnerabilityAssessment (spec §4.22): switches an order's weekly assessment on or off and
   * sets its mail level. Only for products with WVS; the first scan of an Active one runs at once.
   */
  async configure(actor: Actor, input: AssessmentInput): Promise<string> {
    const faults: { field: string; message: string }[] = [];
    const id = orderIdOf(input.ServiceOrderID);
    if (id === undefined) faults.push({ field: 'ServiceOrderID', message: 'ServiceOrderID is required: an order id.' });
    const status = oneOf(STATUSES, input.ServiceStatus);
    if (status === undefined)
      faults.push({ field: 'ServiceStatus', message: 'ServiceStatus must be Active or Inactive.' });
    const level = oneOf(LEVELS, input.EmailNotificationLevel);
    if (level === undefined)
      faults.push({
        field: 'EmailNotificationLevel',
        message: 'EmailNotificationLevel must be NONE, NEW_REPORT or CRITICAL.',
      });
    if (faults.length > 0) throw CertdeskError.ofFaults(faults.map((f) => ({ kind: 'invalidInput', ...f })));
    const order = await this.assessable(actor.principal, id!);
    const now = this.deps.clock.nowSeconds();
    await this.deps.scans.saveAssessment({
      orderId: order.id,
      customerId: order.customerId,
      status: status!,
      level: level!,
      at: now,
    });
    if (status === 'Active')
      await this.deps.jobs.enqueue(
        { name: 'scan.vulnerability', payload: { orderId: order.id }, uniqueKey: weeklyKey(order.id), runAt: now },
        now,
      );
    await this.deps.audit.append({
      at: now,
      customerId: order.customerId,
      actor: actorName(actor.principal),
      clientAddress: actor.clientAddress,
      action: 'assessment.configured',
      subject: String(order.id),
      details: { status, level },
    });
    return status === 'Active'
      ? `The vulnerability assessment of order ${order.id} is active: the first scan runs now, then weekly.`
      : `The vulnerability assessment of order ${order.id} is inactive: no more weekly scans.`;
  }

  /**
   * GET /VulnerabilityAssessmentRescan/{id} (spec §4.23): a scan now, at most one per order an hour
   * (a guarded update, so concurrent requests queue one), for an order whose assessment is set up.
   */
  async rescan(actor: Actor, id: number): Promise<string> {
    const order = await this.assessable(actor.principal, id);
    const assessment = await this.deps.scans.assessment(order.id);
    if (assessment === undefined)
      throw new CertdeskError(
        'invalidOrderState',
        `Order ${order.id} has no vulnerability assessment yet: set it up with POST /VulnerabilityAssessment.`,
        { field: 'ServiceOrderID' },
      );
    const now = this.deps.clock.nowSeconds();
    if (!(await this.deps.scans.claimRescan(order.id, now, HOUR))) {
      const last = (await this.deps.scans.assessment(order.id))?.lastRescanAt ?? now;
      const wait = Math.max(1, last + HOUR - now);
      throw Object.assign(
        new CertdeskError(
          'rateLimited',
          `Order ${order.id} was rescanned less than an hour ago: the next rescan is possible in ${Math.ceil(wait / 60)} minute(s).`,
        ),
        { retryAfter: wait },
      );
    }
    await this.deps.jobs.enqueue(
      {
        name: 'scan.vulnerability',
        payload: { orderId: order.id, now: true },
        uniqueKey: rescanKey(order.id),
        runAt: now,
      },
      now,
    );
    await this.deps.audit.append({
      at: now,
      customerId: order.customerId,
      actor: actorName(actor.principal),
      clientAddress: actor.clientAddress,
      action: 'assessment.rescan',
      subject: String(order.id),
    });
    return `A scan of order ${order.id} is queued; its report follows in a few minutes.`;
  }

  /** GET /VulnerabilityAssessment/{id}: the caller's order's assessment, latest report and history. */
  async view(principal: Principal, id: number): Promise<AssessmentView> {
    const order = await this.ownOrder(principal, id);
    const reports = await this.deps.scans.reports(order.id, 'vulnerability', HISTORY);
    return {
      assessment: await this.deps.scans.assessment(order.id),
      latest: reports[0] === undefined ? undefined : (reports[0].report as ScanReport),
      history: reports.map((r) => ({ at: r.createdAt, grade: r.grade, critical: r.critical.length })),
    };
  }

  /** Job `scan.vulnerability`: the weekly (or on-demand) scan; a weekly run queues the next at the order's slot. */
  async runVulnerability(payload: { orderId: number; now?: boolean }, ctx: { readonly id: JobId }): Promise<void> {
    const orderId = toOrderId(payload.orderId);
    const assessment = await this.deps.scans.assessment(orderId);
    const order = await this.deps.orders.byId(orderId);
    if (order === undefined || assessment === undefined || CLOSED.has(order.majorStatus)) return;
    // Switched off since it was queued: the weekly chain ends here (an on-demand scan still runs).
    if (payload.now !== true && assessment.status !== 'Active') return;
    const previous = (await this.deps.scans.reports(orderId, 'vulnerability', 1))[0];
    const report = await this.scanOrder(order, 'vulnerability');
    await this.mail(order, assessment.level, report, previous);
    if (payload.now === true) return;
    const now = this.deps.clock.nowSeconds();
    await this.deps.jobs.enqueue(
      {
        name: 'scan.vulnerability',
        payload: { orderId },
        uniqueKey: weeklyKey(orderId),
        runAt: nextSlot(orderId, now),
        takeKeyFrom: ctx.id,
      },
      now,
    );
  }

  /** Job `scan.configuration`: the scan behind ConfigurationAssessment, of an order with a certificate. */
  async runConfiguration(payload: { orderId: number }): Promise<void> {
    const order = await this.deps.orders.byId(toOrderId(payload.orderId));
    if (order === undefined || order.issuedAt === null || CLOSED.has(order.majorStatus)) return;
    await this.scanOrder(order, 'configuration');
  }

  /** Scans every name of the order (a few at a time) and stores the report. */
  private async scanOrder(order: Order, kind: ScanKind): Promise<ScanReport> {
    const names = scannedNames(order);
    const latest = order.issuedAt === null ? undefined : await this.deps.orderCertificates.currentCertificate(order.id);
    const pem =
      latest === undefined ? undefined : (await this.deps.certificates.fulfillment?.(latest.serial))?.certificate;
    const at = this.deps.clock.nowSeconds();
    const hosts = await Promise.all(
      names.map((name) =>
        this.limiter.run(() => this.deps.scanner({ name, ...(pem === undefined ? {} : { orderCertificatePem: pem }) })),
      ),
    );
    const report: ScanReport = {
      kind,
      at,
      engine: ENGINE,
      criteriaVersion: CRITERIA_VERSION,
      grade: worstGrade(hosts),
      critical: hosts.flatMap((h) =>
        h.status === 'scanned' ? h.findings.filter(isCritical).map((f) => `${h.name}: ${f.id}`) : [],
      ),
      hosts,
    };
    await this.deps.scans.insertReport({
      orderId: order.id,
      customerId: order.customerId,
      kind,
      createdAt: at,
      engine: report.engine,
      criteriaVersion: report.criteriaVersion,
      grade: report.grade,
      critical: report.critical,
      report,
    });
    return report;
  }

  /** NEW_REPORT: every report; CRITICAL: a report with a critical finding the previous one did not have; NONE: never. */
  private async mail(
    order: Order,
    level: NotificationLevel,
    report: ScanReport,
    previous: StoredScanReport | undefined,
  ): Promise<void> {
    const known = new Set(previous?.critical ?? []);
    const fresh = report.critical.filter((c) => !known.has(c));
    const send = level === 'NEW_REPORT' || (level === 'CRITICAL' && fresh.length > 0);
    if (!send) return;
    const grade = report.grade ?? 'not rated (no name could be scanned)';
    const subject =
      level === 'CRITICAL'
        ? `Critical findings on ${order.commonName} (order ${order.id})`
        : `Vulnerability assessment of ${order.commonName} (order ${order.id}): ${grade}`;
    const lines = report.hosts.map((h) =>
      h.status === 'scanned'
        ? `${h.name}: ${h.rating.grade}${h.findings.length > 0 ? `\n${h.findings.map((f) => `  - [${f.severity}] ${f.title}`).join('\n')}` : ''}`
        : `${h.name}: could not scan (${h.problem})`,
    );
    for (const to of contactAddresses(order))
      await this.deps.mailer.send({
        to,
        kind: level === 'CRITICAL' ? 'scan.critical' : 'scan.report',
        customerId: order.customerId,
        orderId: order.id,
        subject,
        text: `${subject}\n\nGrade: ${grade}\n${fresh.length > 0 ? `New critical findings: ${fresh.join(', ')}\n` : ''}\n${lines.join('\n')}\n`,
      });
  }

  /** The caller's order, with WVS, in a state a scan makes sense for. */
  private async assessable(principal: Principal, id: number): Promise<Order> {
    const order = await this.ownOrder(principal, id);
    const product = this.deps.catalog.productOf(order);
    if (!product.features.includes('WVS'))
      throw new CertdeskError(
        'invalidInput',
        `${product.code} does not include the vulnerability assessment (feature WVS).`,
        { field: 'ServiceOrderID' },
      );
    if (CLOSED.has(order.majorStatus))
      throw new CertdeskError('invalidOrderState', `Order ${order.id} is ${order.majorStatus}: nothing to scan.`, {
        field: 'ServiceOrderID',
      });
    return order;
  }

  private async ownOrder(principal: Principal, id: number): Promise<Order> {
    const order =
      Number.isSafeInteger(id) && id > 0 ? await this.deps.orders.get(principal.customerId, toOrderId(id)) : undefined;
    if (order === undefined)
      throw new CertdeskError('orderNotFound', `Invalid order id ${id}: no such order.`, { field: 'ServiceOrderID' });
    return order;
  }
}

const weeklyKey = (id: OrderId) => `scan:weekly:${id}`;
const rescanKey = (id: OrderId) => `scan:rescan:${id}`;
const isCritical = (f: Finding) => f.severity === 'critical';

/**
 * The next weekly run: the order's own second of the week (spread by a multiplicative hash of its
 * id, so the scans of many orders do not bunch up), at least a day after `now`.
 */
export function nextSlot(id: OrderId, now: number): number {
  const slot = (id * 2_654_435_761) % WEEK;
  let at = now - (now % WEEK) + slot;
  while (at <= now + DAY) at += WEEK;
  return at;
}

/** The names a scan visits: the common name and SANs, a wildcard by its base name, each once. */
export function scannedNames(order: Pick<Order, 'commonName' | 'sanNames'>): string[] {
  const names = [order.commonName, ...order.sanNames].map((n) => (n.startsWith('*.') ? n.slice(2) : n));
  return [...new Set(names)].slice(0, MAX_SCANNED_NAMES);
}

/** The worst grade of the scanned hosts; null when none could be scanned. */
export function worstGrade(hosts: readonly HostReport[]): Grade | null {
  let worst: Grade | null = null;
  for (const h of hosts)
    if (h.status === 'scanned' && (worst === null || GRADES.indexOf(h.rating.grade) > GRADES.indexOf(worst)))
      worst = h.rating.grade;
  return worst;
}

function orderIdOf(value: unknown): number | undefined {
  const n =
    typeof value === 'number' ? value : typeof value === 'string' && /^\d{1,10}$/.test(value) ? Number(value) : NaN;
  return Number.isSafeInteger(n) && n > 0 && n <= 2_147_483_647 ? n : undefined;
}

function oneOf<T extends string>(allowed: readonly T[], value: unknown): T | undefined {
  if (typeof value !== 'string') return undefined;
  return allowed.find((a) => a.toLowerCase() === value.trim().toLowerCase());
}
