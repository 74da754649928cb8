import {
  CertdeskError,
  orderId as toOrderId,
  readCsr,
  type Clock,
  type Order,
  type OrderNameState,
  type Principal,
} from '../../core/index.js';
import type {
  OrderCertificatesRepo,
  OrderFilter,
  OrderNamesRepo,
  OrderQueriesRepo,
  OrdersRepo,
  ScansRepo,
} from '../../storage/index.js';
import type { IssuedCertificate, IssuerCapabilities } from '../../ca/index.js';
import type { CatalogService } from '../catalog/catalog.js';
import { dcvDetailsFor, type DcvExpectations } from '../dcv/dcv-details.js';

// Reading orders (spec §4.12–4.14): one order, a filtered page, the orders changed in a span,
// each as a view with what the include* flags may ask for.

/** What a reader sees of an issued certificate (Fulfillment, StartDate/EndDate). */
export interface OrderCertificate {
  readonly certificate: string;
  readonly intermediate: string;
  readonly pkcs7: string;
  readonly notBefore: number;
  readonly notAfter: number;
}

export interface OrderView {
  /** The order; a COMPLETE one past its EndDate shows EXPIRED. */
  readonly order: Order;
  readonly names: readonly OrderNameState[];
  /** The names DNS (or FILE) validation covers when the order is validated so: FILE never covers a wildcard. */
  readonly dnsFqdns?: readonly string[];
  readonly fileFqdns?: readonly string[];
  /** While a DNS or FILE order waits for its proof: exactly what to publish (spec 2.10 shapes). */
  readonly dcv?: DcvExpectations;
  /** The current certificate of a completed order (with includeFulfillment). */
  readonly certificate?: OrderCertificate;
  /** StartDate and EndDate of the current certificate. */
  readonly dates?: { readonly notBefore: number; readonly notAfter: number };
  /** The current certificate chains to a distrusted CA (DESIGN §5.8): the phase dates. */
  readonly distrust?: { phase1: number | null; phase2: number | null };
  /** The latest configuration scan (spec 2.11 ConfigurationAssessment), once one ran. */
  readonly configuration?: {
    readonly at: number;
    readonly engine: string;
    readonly criteriaVersion: string;
    /** null: no name could be scanned. */
    readonly grade: string | null;
  };
}

export interface OrderReadsDeps {
  readonly orders: Pick<OrdersRepo, 'get' | 'tag'>;
  readonly orderQueries: Pick<OrderQueriesRepo, 'list' | 'modified'>;
  readonly orderNames: Pick<OrderNamesRepo, 'names'>;
  readonly orderCertificates: Pick<OrderCertificatesRepo, 'currentCertificate' | 'chainingTo'>;
  readonly scans: Pick<ScansRepo, 'latest'>;
  /**
   * The issuer's optional capabilities (ca/issuer.ts `IssuerCapabilities`): the Fulfillment of a
   * recorded certificate, and which CA certificates are distrusted. Without them an order shows no
   * Fulfillment and nothing is scheduled for replacement.
   */
  readonly certificates: Pick<IssuerCapabilities, 'fulfillment' | 'distrustMarks'>;
  /** The catalog's brands, for what a waiting order's names need published (its DNS record or file). */
  readonly catalog?: Pick<CatalogService, 'brand'>;
  readonly clock: Clock;
}

/** Derived, not stored: a COMPLETE order past its last certificate's EndDate is EXPIRED. */
function expired(major: string, certNotAfter: number | null, now: number): boolean {
  return major === 'COMPLETE' && certNotAfter !== null && certNotAfter < now;
}

/** The marks of an issuer without any: one Map, so an order's tag does not change on every read. */
const NO_MARKS = new Map<string, { phase1: number | null; phase2: number | null }>();

/** Largest page of GET /Orders (documented in docs/orders.md). */
export const MAX_ITEMS_PER_PAGE = 1000;
export const DEFAULT_ITEMS_PER_PAGE = 100;

/** The orders of the caller's account as readers see them; another account's are never found. */
export class OrderReads {
  /** The distrust marks last seen, and how often they changed (part of every order's tag). */
  private marksSeen?: Map<string, unknown>;
  private marksChanges = 0;

  constructor(private readonly deps: OrderReadsDeps) {}

  /**
   * A tag of everything one order's view is made of, in one cheap query: while it is unchanged,
   * so is the view (getOrder), in every process. Read it before the view, so that a view kept
   * under it is never older than it. `withNameStatus`: the names' DCV status is part of what is
   * shown. Throws orderNotFound as getOrder does.
   */
  async orderTag(principal: Principal, id: number, withNameStatus: boolean): Promise<string> {
    const tag = await this.deps.orders.tag(principal.customerId, toOrderId(id), withNameStatus);
    if (tag === undefined)
      throw new CertdeskError('orderNotFound', `Invalid order id ${id}: no such order.`, { field: 'ServiceOrderID' });
    const marks = this.distrustMarks();
    if (marks !== this.marksSeen) {
      this.marksSeen = marks;
      this.marksChanges++;
    }
    // Time changes a view too: a COMPLETE order turns EXPIRED past its certificate's end.
    const gone = expired(tag.majorStatus, tag.certNotAfter, this.deps.clock.nowSeconds());
    return `${tag.counters}:${this.marksChanges}:${gone ? 1 : 0}`;
  }

  /** One order of the caller's account; another account's order is not found (404). */
  async getOrder(principal: Principal, id: number, withCertificate = true): Promise<OrderView> {
    const order = await this.deps.orders.get(principal.customerId, toOrderId(id));
    if (order === undefined)
      throw new CertdeskError('orderNotFound', `Invalid order id ${id}: no such order.`, { field: 'ServiceOrderID' });
    return (await this.views([order], withCertificate))[0]!;
  }

  async listOrders(
    principal: Principal,
    filter: OrderFilter,
    withCertificates = false,
    scheduledToReplace = false,
  ): Promise<{ orders: OrderView[]; total: number }> {
    const scoped = scheduledToReplace
      ? {
          ...filter,
          ids: await this.deps.orderCertificates.chainingTo(principal.customerId, [...this.distrustMarks().keys()]),
        }
      : filter;
    const { orders, total } = await this.deps.orderQueries.list(principal.customerId, scoped);
    return { orders: await this.views(orders, withCertificates), total };
  }

  async modifiedOrders(principal: Principal, from: number, to: number, withCertificates = false): Promise<OrderView[]> {
    if (to < from) throw new CertdeskError('invalidInput', 'ToDate lies before FromDate.', { field: 'ToDate' });
    return this.views(await this.deps.orderQueries.modified(principal.customerId, from, to, 10_000), withCertificates);
  }

  /** What a DNS or FILE order still waiting for its proof needs published; nothing for any other. */
  private waitingProof(order: Order, names: readonly string[]): { dcv?: DcvExpectations } {
    const waiting =
      (order.majorStatus === 'PENDING' || order.majorStatus === 'REISSUE') &&
      (order.minorStatus === 'WF_DNS_AUTH' || order.minorStatus === 'WF_FILE_AUTH');
    if (!waiting || this.deps.catalog === undefined || order.dcvValue === null || order.csrPem === null) return {};
    try {
      const { hashMd5, hashSha256 } = readCsr(order.csrPem);
      return {
        dcv: dcvDetailsFor(this.deps.catalog.brand(order.caBrand), { hashMd5, hashSha256 }, names, order.dcvValue),
      };
    } catch {
      return {};
    }
  }

  private distrustMarks(): Map<string, { phase1: number | null; phase2: number | null }> {
    return this.deps.certificates.distrustMarks?.() ?? NO_MARKS;
  }

  /** What readers see of `orders`: names, the current certificate's dates, Fulfillment when asked for, distrust marks. */
  async views(orders: readonly Order[], withCertificates: boolean): Promise<OrderView[]> {
    const names = await this.deps.orderNames.names(orders.map((o) => o.id));
    const issued = orders.filter((o) => o.issuedAt !== null).map((o) => o.id);
    const scans = await this.deps.scans.latest(issued, 'configuration');
    return Promise.all(
      orders.map(async (order) => {
        const own = names.filter((n) => n.orderId === order.id);
        const latest =
          order.issuedAt === null ? undefined : await this.deps.orderCertificates.currentCertificate(order.id);
        // The chain and the PKCS#7 bundle are built only when Fulfillment is asked for.
        const full =
          latest !== undefined && withCertificates
            ? await this.deps.certificates.fulfillment?.(latest.serial)
            : undefined;
        return this.view(order, own, scans.get(order.id), latest, full);
      }),
    );
  }

  /**
   * The view of an order just completed by an issuance in this process (POST /Order issuing
   * inline), from what that issuance holds, with its Fulfillment: the order as completed, its names
   * as stored, and the certificate as signed. A new order has no configuration scan yet.
   */
  issuedView(order: Order, names: readonly OrderNameState[], certificate: IssuedCertificate): OrderView {
    return this.view(order, names, undefined, certificate, certificate);
  }

  private view(
    stored: Order,
    names: readonly OrderNameState[],
    scan: { createdAt: number; engine: string; criteriaVersion: string; grade: string | null } | undefined,
    latest: { notBefore: number; notAfter: number; chainIds: readonly string[] } | undefined,
    full: OrderCertificate | undefined,
  ): OrderView {
    const order: Order = expired(stored.majorStatus, stored.certNotAfter, this.deps.clock.nowSeconds())
      ? { ...stored, minorStatus: 'EXPIRED' }
      : stored;
    const fqdns = names.map((n) => n.name);
    const base = {
      order,
      names,
      ...(scan === undefined
        ? {}
        : {
            configuration: {
              at: scan.createdAt,
              engine: scan.engine,
              criteriaVersion: scan.criteriaVersion,
              grade: scan.grade,
            },
          }),
      ...(order.dvAuthMethod === 'DNS' ? { dnsFqdns: fqdns } : {}),
      ...(order.dvAuthMethod === 'FILE' ? { fileFqdns: fqdns.filter((n) => !n.startsWith('*.')) } : {}),
      ...this.waitingProof(order, fqdns),
    };
    if (order.issuedAt === null || latest === undefined) return base;
    const marks = this.distrustMarks();
    const mark = latest.chainIds.map((id) => marks.get(id)).find((m) => m !== undefined);
    return {
      ...base,
      dates: { notBefore: latest.notBefore, notAfter: latest.notAfter },
      // As given: an issuance's PKCS#7 bundle is built only if the answer shows it.
      ...(full === undefined ? {} : { certificate: full }),
      ...(mark === undefined ? {} : { distrust: mark }),
    };
  }
}
