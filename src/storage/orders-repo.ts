import { sql, type Insertable, type Selectable } from 'kysely';
import type { CustomerId, MajorStatus, MinorStatus } from '../core/index.js';
import type { Db } from './database.js';
import type { OrderNamesTable, OrdersTable } from './schema.js';

export type OrderRow = Selectable<OrdersTable>;
export type NewOrderRow = Omit<Insertable<OrdersTable>, 'id'>;
export type OrderNameRow = Selectable<OrderNamesTable>;
export type NewOrderName = Pick<Insertable<OrderNamesTable>, 'name' | 'method' | 'status' | 'approver_email' | 'validated_at' | 'last_checked_at'>;

/** Filters of GET /Orders (spec §4.12); every read is scoped to one customer. */
export interface OrderFilter {
  readonly statuses?: readonly MajorStatus[];
  readonly productTypes?: readonly string[];
  /** SQL LIKE pattern with `%` as the wildcard (`_` and `\` are matched literally). */
  readonly commonName?: string;
  /** Only these orders (an empty list matches none). */
  readonly ids?: readonly number[];
  readonly orderBy: 'ServiceOrderID' | 'OrderDate' | 'UpdateDate' | 'CommonName';
  readonly orderDir: 'ASC' | 'DESC';
  readonly offset: number;
  readonly limit: number;
}

const ORDER_COLUMNS = {
  ServiceOrderID: 'id', OrderDate: 'order_date', UpdateDate: 'update_date', CommonName: 'common_name',
} as const;

/** Whether an error is a unique-constraint violation (SQLite or PostgreSQL). */
export function isUniqueViolation(e: unknown): boolean {
  const err = e as { code?: string; message?: string };
  return err.code === '23505' || err.code === 'SQLITE_CONSTRAINT_UNIQUE' || /UNIQUE constraint failed/.test(err.message ?? '');
}

/**
 * Orders and their names, the customer's credit and the ledger. Methods are single statements;
 * the RA composes them in one transaction (`inTransaction`) where several must hold together.
 */
export class OrdersRepo {
  constructor(private readonly db: Db) {}

  /**
   * Reserves `amount` of the customer's credit: one guarded UPDATE, so concurrent orders can never
   * push `used` over the limit (SQLite serialises writers; PostgreSQL locks the row).
   */
  async reserveCredit(customerId: CustomerId, amount: number): Promise<boolean> {
    const r = await this.db.kysely
      .updateTable('customers')
      .set({ used_minor: sql`used_minor + ${amount}` })
      .where('id', '=', customerId)
      .where(sql<boolean>`used_minor + ${amount} <= credit_limit_minor`)
      .executeTakeFirst();
    return r.numUpdatedRows > 0n;
  }

  async insertOrder(row: NewOrderRow): Promise<number> {
    const r = await this.db.kysely.insertInto('orders').values(row).returning('id').executeTakeFirstOrThrow();
    return r.id;
  }

  async insertNames(orderId: number, names: readonly NewOrderName[]): Promise<void> {
    if (names.length === 0) return;
    await this.db.kysely.insertInto('order_names').values(names.map((n) => ({ ...n, order_id: orderId }))).execute();
  }

  /** One ledger line; the unique (order, kind) makes a second charge or refund of an order fail. */
  async insertLedger(customerId: CustomerId, orderId: number, kind: 'charge' | 'refund', amount: number, at: number): Promise<void> {
    await this.db.kysely.insertInto('ledger').values({ customer_id: customerId, order_id: orderId, kind, amount_minor: amount, created_at: at }).execute();
  }

  async byPartnerOrderId(customerId: CustomerId, partnerOrderId: string): Promise<{ id: number; requestHash: string } | undefined> {
    const r = await this.db.kysely
      .selectFrom('orders')
      .select(['id', 'request_hash'])
      .where('customer_id', '=', customerId)
      .where('partner_order_id', '=', partnerOrderId)
      .executeTakeFirst();
    return r === undefined ? undefined : { id: r.id, requestHash: r.request_hash };
  }

  /** One order of one customer: another customer's order is simply not found. */
  async get(customerId: CustomerId, id: number): Promise<OrderRow | undefined> {
    return this.db.kysely.selectFrom('orders').selectAll().where('customer_id', '=', customerId).where('id', '=', id).executeTakeFirst();
  }

  async names(orderIds: readonly number[]): Promise<OrderNameRow[]> {
    if (orderIds.length === 0) return [];
    return this.db.kysely.selectFrom('order_names').selectAll().where('order_id', 'in', [...orderIds]).orderBy('order_id').orderBy('id').execute();
  }

  /** A page of a customer's orders and how many match in all. */
  async list(customerId: CustomerId, f: OrderFilter): Promise<{ rows: OrderRow[]; total: number }> {
    let q = this.db.kysely.selectFrom('orders').where('customer_id', '=', customerId);
    if (f.statuses !== undefined && f.statuses.length > 0) q = q.where('major_status', 'in', [...f.statuses]);
    if (f.productTypes !== undefined && f.productTypes.length > 0) q = q.where('product_type', 'in', [...f.productTypes]);
    if (f.commonName !== undefined) q = q.where(sql<boolean>`common_name LIKE ${f.commonName} ESCAPE '\\'`);
    if (f.ids !== undefined) q = f.ids.length === 0 ? q.where(sql<boolean>`1 = 0`) : q.where('id', 'in', [...f.ids]);
    const column = ORDER_COLUMNS[f.orderBy];
    const dir = f.orderDir === 'ASC' ? 'asc' : 'desc';
    const [rows, count] = await Promise.all([
      q.selectAll().orderBy(column, dir).orderBy('id', dir).offset(f.offset).limit(f.limit).execute(),
      q.select((e) => e.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
    ]);
    return { rows, total: Number(count.n) };
  }

  /** Orders changed in [from, to) (GET /ModifiedOrders), oldest change first. */
  async modified(customerId: CustomerId, from: number, to: number, limit: number): Promise<OrderRow[]> {
    return this.db.kysely
      .selectFrom('orders')
      .selectAll()
      .where('customer_id', '=', customerId)
      .where('update_date', '>=', from)
      .where('update_date', '<', to)
      .orderBy('update_date')
      .orderBy('id')
      .limit(limit)
      .execute();
  }

  /** An order by id alone: for the worker, never for a request (requests use `get`). */
  async byId(id: number): Promise<OrderRow | undefined> {
    return this.db.kysely.selectFrom('orders').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /** Records the outcome of one DCV check of one name. */
  async recordCheck(nameId: number, result: { validated: boolean; at: number; problem: string | null }): Promise<void> {
    await this.db.kysely
      .updateTable('order_names')
      .set(result.validated ? { status: 'VALIDATED', validated_at: result.at, last_checked_at: result.at, last_problem: null } : { last_checked_at: result.at, last_problem: result.problem })
      .where('id', '=', nameId)
      .where('status', '=', 'PENDING')
      .execute();
  }

  /** Orders of every customer in one state, oldest first (operator views such as the vetting queue). */
  async inState(major: MajorStatus, minor: MinorStatus, limit: number): Promise<OrderRow[]> {
    return this.db.kysely.selectFrom('orders').selectAll().where('major_status', '=', major).where('minor_status', '=', minor).orderBy('order_date').orderBy('id').limit(limit).execute();
  }

  async setOrganization(id: number, json: string, at: number): Promise<void> {
    await this.db.kysely.updateTable('orders').set({ organization_json: json, update_date: at }).where('id', '=', id).execute();
  }

  /** Sets the approver and the approval link of an order's pending EMAIL names (one approver for all, or per name). */
  async setApproval(orderId: number, names: readonly string[] | 'all-pending', approver: string | null, tokenHash: string): Promise<number> {
    let q = this.db.kysely.updateTable('order_names')
      .set(approver === null ? { approval_token_hash: tokenHash } : { approver_email: approver, approval_token_hash: tokenHash })
      .where('order_id', '=', orderId).where('status', '=', 'PENDING').where('method', '=', 'EMAIL');
    if (names !== 'all-pending') q = q.where('name', 'in', [...names]);
    const r = await q.executeTakeFirst();
    return Number(r.numUpdatedRows);
  }

  /** The pending names an approval link covers. */
  async namesByApprovalToken(tokenHash: string): Promise<OrderNameRow[]> {
    return this.db.kysely.selectFrom('order_names').selectAll().where('approval_token_hash', '=', tokenHash).execute();
  }

  /** Marks the names of an approval link validated (once); returns how many changed. */
  async approve(tokenHash: string, at: number): Promise<number> {
    const r = await this.db.kysely.updateTable('order_names')
      .set({ status: 'VALIDATED', validated_at: at, last_checked_at: at, last_problem: null })
      .where('approval_token_hash', '=', tokenHash).where('status', '=', 'PENDING')
      .executeTakeFirst();
    return Number(r.numUpdatedRows);
  }

  /** Gives back reserved credit (a refund); never below zero (a CHECK constraint guards it too). */
  async releaseCredit(customerId: CustomerId, amount: number): Promise<void> {
    await this.db.kysely.updateTable('customers').set({ used_minor: sql`used_minor - ${amount}` }).where('id', '=', customerId).execute();
  }

  /** Every certificate of an order, newest first (the first is the current one). */
  async certificates(orderId: number): Promise<{ serial: string; revokedAt: number | null; notAfter: number }[]> {
    const rows = await this.db.kysely.selectFrom('certificates').select(['serial', 'revoked_at', 'not_after']).where('order_id', '=', orderId).orderBy('id', 'desc').execute();
    return rows.map((r) => ({ serial: r.serial, revokedAt: r.revoked_at, notAfter: r.not_after }));
  }

  /** The newest certificate issued for an order, if any (a restart after signing reuses it). */
  async latestCertificate(orderId: number, after: number | null = null): Promise<{ id: number; serial: string; notBefore: number; notAfter: number; chainIds: string[] } | undefined> {
    let q = this.db.kysely.selectFrom('certificates').select(['id', 'serial', 'not_before', 'not_after', 'chain_ids']).where('order_id', '=', orderId);
    if (after !== null) q = q.where('id', '>', after);
    const r = await q.orderBy('id', 'desc').executeTakeFirst();
    return r === undefined ? undefined : { id: r.id, serial: r.serial, notBefore: r.not_before, notAfter: r.not_after, chainIds: r.chain_ids === null ? [] : r.chain_ids.split(',') };
  }

  /**
   * Subscriptions due for their next certificate: COMPLETE orders whose term ends after their
   * current certificate, which expires within `horizon` seconds.
   */
  async subscriptionsDue(now: number, horizon: number): Promise<OrderRow[]> {
    return this.db.kysely
      .selectFrom('orders as o')
      .innerJoin('certificates as c', 'c.order_id', 'o.id')
      .selectAll('o')
      .where('o.major_status', '=', 'COMPLETE')
      .where('c.id', '=', (eb) => eb.selectFrom('certificates as c2').select((e) => e.fn.max('c2.id').as('m')).whereRef('c2.order_id', '=', 'o.id'))
      .where('o.term_end', 'is not', null)
      .whereRef('o.term_end', '>', 'c.not_after')
      .where('c.not_after', '<=', now + horizon)
      .orderBy('c.not_after')
      .limit(1000)
      .execute();
  }

  /**
   * Orders a reminder may be due for: COMPLETE ones whose last certificate expires within
   * `expiryHorizon` and is not renewed by a subscription, and pending or reissuing ones waiting
   * for DCV at least `dcvAge` seconds.
   */
  async remindable(now: number, expiryHorizon: number, dcvAge: number): Promise<{ expiring: OrderRow[]; waiting: OrderRow[] }> {
    const expiring = await this.db.kysely.selectFrom('orders').selectAll()
      .where('major_status', '=', 'COMPLETE')
      .where('cert_not_after', '>', now)
      .where('cert_not_after', '<=', now + expiryHorizon)
      .where((eb) => eb.or([eb('term_end', 'is', null), eb('term_end', '<=', eb.ref('cert_not_after'))]))
      .limit(10_000).execute();
    const waiting = await this.db.kysely.selectFrom('orders').selectAll()
      .where('major_status', 'in', ['PENDING', 'REISSUE'])
      .where('minor_status', 'in', ['WF_DNS_AUTH', 'WF_FILE_AUTH', 'WF_EMAIL_AUTH'])
      .where((eb) => eb(eb.fn.coalesce('reissued_at', 'order_date'), '<=', now - dcvAge))
      .limit(10_000).execute();
    return { expiring, waiting };
  }

  /** A customer's orders whose current certificate chains to one of `caIds` (filterScheduledToReplace). */
  async chainingTo(customerId: CustomerId, caIds: readonly string[]): Promise<number[]> {
    if (caIds.length === 0) return [];
    const rows = await this.db.kysely
      .selectFrom('orders as o')
      .innerJoin('certificates as c', 'c.order_id', 'o.id')
      .select('o.id')
      .where('o.customer_id', '=', customerId)
      .where('c.id', '=', (eb) => eb.selectFrom('certificates as c2').select((e) => e.fn.max('c2.id').as('m')).whereRef('c2.order_id', '=', 'o.id'))
      .where((eb) => eb.or(caIds.map((id) => eb(sql<string>`',' || c.chain_ids || ','`, 'like', `%,${id},%`))))
      .execute();
    return rows.map((r) => r.id);
  }

  /** Starts a reissue round: the order's request and state replaced, its names replaced (one transaction, the RA's). */
  async startReissue(id: number, from: MajorStatus, set: Pick<OrderRow, 'minor_status' | 'csr_pem' | 'csr_sha256' | 'common_name' | 'san_names' | 'signature_hash_algorithm' | 'dv_auth_method' | 'dcv_value' | 'params_json' | 'reissued_at' | 'reissue_base_cert' | 'update_date'>, names: readonly NewOrderName[]): Promise<boolean> {
    const r = await this.db.kysely.updateTable('orders').set({ ...set, major_status: 'REISSUE', failure_reason: null }).where('id', '=', id).where('major_status', '=', from).executeTakeFirst();
    if (r.numUpdatedRows === 0n) return false;
    await this.db.kysely.deleteFrom('order_names').where('order_id', '=', id).execute();
    await this.insertNames(id, names);
    return true;
  }

  /** Moves an order from one state to another if it is still in `from`; false when it was not. */
  async transition(id: number, from: { major: MajorStatus; minor?: MinorStatus }, to: { major: MajorStatus; minor: MinorStatus }, at: number, extra: Partial<Pick<OrderRow, 'issued_at' | 'failure_reason' | 'billing_status' | 'term_end' | 'cert_not_after'>> = {}): Promise<boolean> {
    let q = this.db.kysely.updateTable('orders').set({ major_status: to.major, minor_status: to.minor, update_date: at, ...extra }).where('id', '=', id).where('major_status', '=', from.major);
    if (from.minor !== undefined) q = q.where('minor_status', '=', from.minor);
    const r = await q.executeTakeFirst();
    return r.numUpdatedRows > 0n;
  }
}
