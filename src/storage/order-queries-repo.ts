import { sql } from 'kysely';
import type { CustomerId, MajorStatus, MinorStatus, Order, OrderId, OrderSortField } from '../core/index.js';
import type { Db } from './database.js';
import { NAME_BYTES, REVERSED_NAME, REVERSED_NAME_LENGTH } from './migrations/0020-order-counts.js';
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
 * A CommonName search: the LIKE pattern, and where the pattern's literal start (`www.shop.%`) or
 * end (`%.shop.de`, searched on the reversed names) bounds it, the index range of that literal.
 * `exact` when the range alone is the search: one literal, all its `%` on one side.
 */
interface NameSearch {
  readonly like: string;
  readonly range?: { readonly reversed: boolean; readonly from: string; readonly to?: string };
  readonly exact: boolean;
}

/** The search for `pattern`; undefined when it matches every name (`%`). */
function nameSearch(pattern: string): NameSearch | undefined {
  const parts = pattern.toLowerCase().split('%');
  const literals = parts.filter((p) => p !== '').length;
  if (literals === 0 && parts.length > 1) return undefined;
  const like = likePattern(pattern);
  const head = parts[0]!;
  const tail = parts.length > 1 ? parts[parts.length - 1]! : '';
  // The longer of the two literals is likely the narrower range. A pattern with `%` at both ends
  // (`%shop%`) has neither: it reads all of the customer's names in the index (see `matching`).
  let range: NameSearch['range'];
  if (head !== '' && head.length >= tail.length) range = { reversed: false, ...byteRange(head) };
  else if (tail !== '' && tail.length <= REVERSED_NAME_LENGTH) range = { reversed: true, ...byteRange(reverse(tail)) };
  return {
    like,
    ...(range === undefined ? {} : { range }),
    exact: literals === 1 && parts.length > 1 && range?.to !== undefined,
  };
}

/** By code point, as PostgreSQL's reverse() and 0020's SQLite expression reverse. */
const reverse = (text: string) => Array.from(text).reverse().join('');

/**
 * [from, to): every text that starts with `prefix`, in byte order (UTF-8 sorts by code point):
 * the last character one higher. No end when that cannot be (U+10FFFF).
 */
function byteRange(prefix: string): { from: string; to?: string } {
  const chars = Array.from(prefix);
  const last = chars.pop()!.codePointAt(0)! + 1;
  if (last > 0x10ffff) return { from: prefix };
  return { from: prefix, to: chars.join('') + String.fromCodePoint(last === 0xd800 ? 0xe000 : last) };
}

/**
 * Reads over many orders: a customer's search (GET /Orders) and changes (GET /ModifiedOrders),
 * and what the operator's views and the jobs look for across customers.
 */
export class OrderQueriesRepo {
  constructor(private readonly db: Db) {}

  /**
   * A page of a customer's orders and how many match in all. The total comes from the counters
   * of 0020 when only statuses and product types filter; otherwise from COUNT(*) over an index
   * range where the filter has one (a CommonName with a literal start or end, ExpiresWithinDays).
   */
  async list(customerId: CustomerId, f: OrderFilter): Promise<{ orders: Order[]; total: number }> {
    const search = f.commonName === undefined ? undefined : nameSearch(f.commonName);
    // Step 1: the orders of the statuses and product types asked for, counted by the triggers.
    const counted = await this.counted(customerId, f);
    const total =
      search === undefined && f.endsBetween === undefined && f.ids === undefined
        ? counted
        : Number(
            (
              await this.matching(customerId, f, search, true)
                .select((e) => e.fn.countAll<number>().as('n'))
                .executeTakeFirstOrThrow()
            ).n,
          );
    if (f.offset >= total) return { orders: [], total };
    // Step 2: the page. A search that matches few of the orders (fewer than the page would walk
    // through in sort order to find its rows) finds them by name and sorts only those; one that
    // matches many walks the orders in sort order and stops when the page is full. SQLite has no
    // statistics to tell the two apart; the counts do.
    const sparse = search !== undefined && total * total <= (f.offset + f.limit) * counted;
    const column = ORDER_COLUMNS[f.orderBy];
    const dir = f.orderDir === 'ASC' ? 'asc' : 'desc';
    let page = sparse
      ? this.db.kysely
          .selectFrom('orders')
          .where('id', 'in', this.matching(customerId, f, search, true).select('id'))
          .selectAll()
      : this.matching(customerId, f, search, false).selectAll();
    page = page.orderBy(column, dir);
    if (column !== 'id') page = page.orderBy('id', dir);
    // The limit as a literal: SQLite (3.4x) plans with a bound LIMIT's value, so it prepares such a
    // statement again on every run, which costs ~2 ms for one that holds 0020's reversal expression.
    if (!Number.isSafeInteger(f.limit) || f.limit < 0) throw new RangeError(`not a page size: ${f.limit}`);
    const rows = await page.offset(f.offset).limit(sql.lit(f.limit)).execute();
    return { orders: rows.map(toOrder), total };
  }

  /** How many orders of the customer have the filter's statuses and product types (empty: any). */
  private async counted(customerId: CustomerId, f: OrderFilter): Promise<number> {
    const part = (table: 'order_counts' | 'order_count_deltas') => {
      let q = this.db.kysely.selectFrom(table).select('n').where('customer_id', '=', customerId);
      if (f.statuses !== undefined && f.statuses.length > 0) q = q.where('major_status', 'in', [...f.statuses]);
      if (f.productTypes !== undefined && f.productTypes.length > 0)
        q = q.where('product_type', 'in', [...f.productTypes]);
      return q;
    };
    const r = await this.db.kysely
      .selectFrom(part('order_counts').unionAll(part('order_count_deltas')).as('c'))
      .select((e) => e.fn.sum<number | string | null>('c.n').as('n'))
      .executeTakeFirstOrThrow();
    return Number(r.n ?? 0);
  }

  /**
   * The customer's orders the filter matches. With `ranged`, a CommonName search reads only its
   * index range (a pattern without a literal start or end reads all the customer's names in the
   * index: `%shop%` has nothing to bound it); without, it is a LIKE on each row the query visits.
   */
  private matching(customerId: CustomerId, f: OrderFilter, search: NameSearch | undefined, ranged: boolean) {
    let q = this.db.kysely.selectFrom('orders').where('customer_id', '=', customerId);
    if (f.statuses !== undefined && f.statuses.length > 0) q = q.where('major_status', 'in', [...f.statuses]);
    if (f.productTypes !== undefined && f.productTypes.length > 0)
      q = q.where('product_type', 'in', [...f.productTypes]);
    const range = ranged ? search?.range : undefined;
    if (range !== undefined) {
      const key = sql.raw(range.reversed ? REVERSED_NAME[this.db.dialect] : NAME_BYTES[this.db.dialect]);
      q = q.where(sql<boolean>`${key} >= ${range.from}`);
      if (range.to !== undefined) q = q.where(sql<boolean>`${key} < ${range.to}`);
    }
    if (search !== undefined && !(range !== undefined && search.exact))
      q = q.where(sql<boolean>`common_name LIKE ${search.like} ESCAPE '\\'`);
    if (f.endsBetween !== undefined)
      q = q
        .where('major_status', '=', 'COMPLETE')
        .where('cert_not_after', '>=', f.endsBetween.from)
        .where('cert_not_after', '<', f.endsBetween.to);
    if (f.ids !== undefined) q = f.ids.length === 0 ? q.where(sql<boolean>`1 = 0`) : q.where('id', 'in', [...f.ids]);
    return q;
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
   * current certificate (the newest delivered), which expires within `horizon` seconds.
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
          .whereRef('c2.order_id', '=', 'o.id')
          .where('c2.delivered_at', 'is not', null),
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
