import { sql } from 'kysely';
import type { CustomerId, MajorStatus, MinorStatus, Order, OrderId, OrderSortField } from '../core/index.js';
import type { Db } from './database.js';
import { toOrder } from './order-model.js';

/** Filters of GET /Orders (spec §4.12); every read is scoped to one customer. */
export interface OrderFilter {
  readonly statuses?: readonly MajorStatus[];
  readonly productTypes?: readonly string[];
  /** CommonName pattern of GET /Orders: `%` is the wildcard, every other character matches itself, case aside. */
  readonly commonName?: string;
  /** Only these orders (an empty list matches none). */
  readonly ids?: readonly OrderId[];
  /** Only orders whose current certificate ends in [from, to) (certdesk's ExpiresWithinDays). */
  readonly endsBetween?: { readonly from: number; readonly to: number };
  readonly orderBy: OrderSortField;
  readonly orderDir: 'ASC' | 'DESC';
  readonly offset: number;
  readonly limit: number;
}

const ORDER_COLUMNS = {
  ServiceOrderID: 'id',
  OrderDate: 'order_date',
  UpdateDate: 'update_date',
  CommonName: 'common_name',
  EndDate: 'cert_not_after',
} as const;

/** A LIKE pattern in which only `%` is a wildcard; names are stored lower-case, so the pattern is too. */
function likePattern(pattern: string): string {
  return pattern.toLowerCase().replace(/[\\_]/g, (c) => `\\${c}`);
}

/**
 * Reads over many orders: a customer's search (GET /Orders) and changes (GET /ModifiedOrders),
 * and what the operator's views and the jobs look for across customers.
 */
export class OrderQueriesRepo {
  constructor(private readonly db: Db) {}

  /** A page of a customer's orders and how many match in all. */
  async list(customerId: CustomerId, f: OrderFilter): Promise<{ orders: Order[]; total: number }> {
    let q = this.db.kysely.selectFrom('orders').where('customer_id', '=', customerId);
    if (f.statuses !== undefined && f.statuses.length > 0) q = q.where('major_status', 'in', [...f.statuses]);
    if (f.productTypes !== undefined && f.productTypes.length > 0)
      q = q.where('product_type', 'in', [...f.productTypes]);
    if (f.commonName !== undefined)
      q = q.where(sql<boolean>`common_name LIKE ${likePattern(f.commonName)} ESCAPE '\\'`);
    if (f.endsBetween !== undefined)
      q = q
        .where('major_status', '=', 'COMPLETE')
        .where('cert_not_after', '>=', f.endsBetween.from)
        .where('cert_not_after', '<', f.endsBetween.to);
    if (f.ids !== undefined) q = f.ids.length === 0 ? q.where(sql<boolean>`1 = 0`) : q.where('id', 'in', [...f.ids]);
    const column = ORDER_COLUMNS[f.orderBy];
    const dir = f.orderDir === 'ASC' ? 'asc' : 'desc';
    const [rows, count] = await Promise.all([
      q.selectAll().orderBy(column, dir).orderBy('id', dir).offset(f.offset).limit(f.limit).execute(),
      q.select((e) => e.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
    ]);
    return { orders: rows.map(toOrder), total: Number(count.n) };
  }

  /** Orders changed in [from, to) (GET /ModifiedOrders), oldest change first. */
  async modified(customerId: CustomerId, from: number, to: number, limit: number): Promise<Order[]> {
    const rows = await this.db.kysely
      .selectFrom('orders')
      .selectAll()
      .where('customer_id', '=', customerId)
      .where('update_date', '>=', from)
      .where('update_date', '<', to)
      .orderBy('update_date')
      .orderBy('id')
      .limit(limit)
      .execute();
    return rows.map(toOrder);
  }

  /** Orders of every customer in one state, oldest first (operator views such as the vetting queue). */
  async inState(major: MajorStatus, minor: MinorStatus, limit: number): Promise<Order[]> {
    const rows = await this.db.kysely
      .selectFrom('orders')
      .selectAll()
      .where('major_status', '=', major)
      .where('minor_status', '=', minor)
      .orderBy('order_date')
      .orderBy('id')
      .limit(limit)
      .execute();
    return rows.map(toOrder);
  }

  /**
   * Subscriptions due for their next certificate: COMPLETE orders whose term ends after their
   * current certificate, which expires within `horizon` seconds.
   */
  async subscriptionsDue(now: number, horizon: number): Promise<Order[]> {
    const rows = await this.db.kysely
      .selectFrom('orders as o')
      .innerJoin('certificates as c', 'c.order_id', 'o.id')
      .selectAll('o')
      .where('o.major_status', '=', 'COMPLETE')
      .where('c.id', '=', (eb) =>
        eb
          .selectFrom('certificates as c2')
          .select((e) => e.fn.max('c2.id').as('m'))
          .whereRef('c2.order_id', '=', 'o.id'),
      )
      .where('o.term_end', 'is not', null)
      .whereRef('o.term_end', '>', 'c.not_after')
      .where('c.not_after', '<=', now + horizon)
      .orderBy('c.not_after')
      .limit(1000)
      .execute();
    return rows.map(toOrder);
  }

  /**
   * Orders a reminder may be due for: COMPLETE ones whose last certificate expires within
   * `expiryHorizon` and is not renewed by a subscription, and pending or reissuing ones waiting
   * for DCV at least `dcvAge` seconds.
   */
  async remindable(
    now: number,
    expiryHorizon: number,
    dcvAge: number,
  ): Promise<{ expiring: Order[]; waiting: Order[] }> {
    const expiring = await this.db.kysely
      .selectFrom('orders')
      .selectAll()
      .where('major_status', '=', 'COMPLETE')
      .where('cert_not_after', '>', now)
      .where('cert_not_after', '<=', now + expiryHorizon)
      .where((eb) => eb.or([eb('term_end', 'is', null), eb('term_end', '<=', eb.ref('cert_not_after'))]))
      .limit(10_000)
      .execute();
    const waiting = await this.db.kysely
      .selectFrom('orders')
      .selectAll()
      .where('major_status', 'in', ['PENDING', 'REISSUE'])
      .where('minor_status', 'in', ['WF_DNS_AUTH', 'WF_FILE_AUTH', 'WF_EMAIL_AUTH'])
      .where((eb) => eb(eb.fn.coalesce('reissued_at', 'order_date'), '<=', now - dcvAge))
      .limit(10_000)
      .execute();
    return { expiring: expiring.map(toOrder), waiting: waiting.map(toOrder) };
  }
}
