import { sql, type Updateable } from 'kysely';
import {
  orderId as toOrderId,
  type CustomerId,
  type FailedMinorStatus,
  type MajorStatus,
  type MinorStatus,
  type Order,
  type OrderId,
  type OrganizationInfo,
  type VettedData,
} from '../core/index.js';
import { fixedQuery, writeLater, type Db } from './database.js';
import { OrderNamesRepo } from './order-names-repo.js';
import { completeOrder, completeOrders, insertOrders, type Issued } from './order-writes.js';
import { readOrderTag, type OrderTag } from './order-tags.js';
import {
  reissueRoundColumns,
  toOrder,
  UNCLAIMED,
  vettedOrganizationJson,
  type IssuedFacts,
  type NewOrder,
  type NewOrderName,
  type ReissueRound,
} from './order-model.js';
import type { OrdersTable } from './schema.js';

export type { IssuedFacts, NewOrder, NewOrderName, ReissueRound } from './order-model.js';

/** One order of one customer (GET /Order and every read behind a request). */
const orderOfCustomer = fixedQuery((k, customerId: CustomerId, id: OrderId) =>
  k.selectFrom('orders').selectAll().where('customer_id', '=', customerId).where('id', '=', id),
);

/** Whether an error is a unique-constraint violation (SQLite or PostgreSQL). */
export function isUniqueViolation(e: unknown): boolean {
  const err = e as { code?: string; message?: string };
  return (
    err.code === '23505' ||
    err.code === 'SQLITE_CONSTRAINT_UNIQUE' ||
    /UNIQUE constraint failed/.test(err.message ?? '')
  );
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

  /**
   * Stores a new order, PENDING with its charge uncleared; returns it as stored (a reader of it
   * afterwards sees exactly this). The orders a PostgreSQL batch's units insert in one turn go in
   * one statement (`Gathering`), each answered with its own row by its (customer, PartnerOrderID).
   */
  async insertOrder(order: NewOrder): Promise<Order> {
    if (order.issuanceClaim !== undefined && order.minorStatus !== 'WF_ISSUANCE')
      throw new Error('an issuance claim is taken only with an order awaiting issuance');
    const one = async (o: NewOrder) => (await insertOrders(this.db, [o]))[0]!;
    if (this.db.gathering === undefined) return one(order);
    return this.db.gathering.run('orders.insert', order, one, (all) => insertOrders(this.db, all));
  }

  /** One ledger line; the unique (order, kind) makes a second charge or refund of an order fail. */
  async insertLedger(
    customerId: CustomerId,
    orderId: OrderId,
    kind: 'charge' | 'refund',
    amount: number,
    at: number,
  ): Promise<void> {
    const insert = this.db.kysely
      .insertInto('ledger')
      .values({ customer_id: customerId, order_id: orderId, kind, amount_minor: amount, created_at: at });
    await writeLater(this.db, 'ledger', insert.compile());
  }

  async byPartnerOrderId(
    customerId: CustomerId,
    partnerOrderId: string,
  ): Promise<{ id: OrderId; requestHash: string } | undefined> {
    const r = await this.db.kysely
      .selectFrom('orders')
      .select(['id', 'request_hash'])
      .where('customer_id', '=', customerId)
      .where('partner_order_id', '=', partnerOrderId)
      .executeTakeFirst();
    return r === undefined ? undefined : { id: toOrderId(r.id), requestHash: r.request_hash };
  }

  /** One order of one customer: another customer's order is simply not found. */
  async get(customerId: CustomerId, id: OrderId): Promise<Order | undefined> {
    const [row] = await orderOfCustomer(this.db, customerId, id);
    return row === undefined ? undefined : toOrder(row);
  }

  /** The order's change tag (storage/order-tags.ts); undefined when the customer has no such order. */
  tag(customerId: CustomerId, id: OrderId, withNames: boolean): Promise<OrderTag | undefined> {
    return readOrderTag(this.db, customerId, id, withNames);
  }

  /** An order by id alone: for the worker, never for a request (requests use `get`). */
  async byId(id: OrderId): Promise<Order | undefined> {
    const row = await this.db.kysely.selectFrom('orders').selectAll().where('id', '=', id).executeTakeFirst();
    return row === undefined ? undefined : toOrder(row);
  }

  /** Gives back reserved credit (a refund); never below zero (a CHECK constraint guards it too). */
  async releaseCredit(customerId: CustomerId, amount: number): Promise<void> {
    await this.db.kysely
      .updateTable('customers')
      .set({ used_minor: sql`used_minor - ${amount}` })
      .where('id', '=', customerId)
      .execute();
  }

  /**
   * `from` (COMPLETE or REISSUE) → REISSUE: a new reissue round, the order's request and DCV and its
   * names replaced (one transaction, the RA's). False, changing nothing, when the order is no longer in `from`.
   */
  async setPendingReissue(
    id: OrderId,
    from: MajorStatus,
    round: ReissueRound,
    names: readonly NewOrderName[],
  ): Promise<boolean> {
    // A new round starts unclaimed: a holder still signing for the round it replaces loses its claim.
    const r = await this.db.kysely
      .updateTable('orders')
      .set({
        ...reissueRoundColumns(round),
        major_status: 'REISSUE',
        failure_reason: null,
        issuance_claim: null,
        issuance_claim_until: null,
      })
      .where('id', '=', id)
      .where('major_status', '=', from)
      .executeTakeFirst();
    if (r.numUpdatedRows === 0n) return false;
    await this.db.kysely.deleteFrom('order_names').where('order_id', '=', id).execute();
    // The round's names replace the old ones in the same transaction.
    await new OrderNamesRepo(this.db).insertNames(id, names);
    return true;
  }

  /**
   * Claims the signing of an order's current issuance round for `claim` until `until`: one guarded
   * UPDATE that succeeds for exactly one caller while the order waits in WF_ISSUANCE and nobody
   * holds a claim that is still running (see `IssuanceRounds.issue`). False when someone else holds it
   * or the order is no longer waiting for issuance.
   */
  async claimIssuance(id: OrderId, major: MajorStatus, claim: string, now: number, until: number): Promise<boolean> {
    const r = await this.db.kysely
      .updateTable('orders')
      .set({ issuance_claim: claim, issuance_claim_until: until })
      .where('id', '=', id)
      .where('major_status', '=', major)
      .where('minor_status', '=', 'WF_ISSUANCE')
      .where((eb) => eb.or([eb('issuance_claim', 'is', null), eb('issuance_claim_until', '<', now)]))
      .executeTakeFirst();
    return r.numUpdatedRows > 0n;
  }

  /** Takes the claim `from` (whose holder is gone) over for `claim`; false when it changed hands meanwhile. */
  async takeOverIssuance(id: OrderId, from: string, claim: string, until: number): Promise<boolean> {
    const r = await this.db.kysely
      .updateTable('orders')
      .set({ issuance_claim: claim, issuance_claim_until: until })
      .where('id', '=', id)
      .where('minor_status', '=', 'WF_ISSUANCE')
      .where('issuance_claim', '=', from)
      .executeTakeFirst();
    return r.numUpdatedRows > 0n;
  }

  /** Gives a claim up (a retryable failure before anything was signed); nothing when it is no longer held. */
  async releaseIssuance(id: OrderId, claim: string): Promise<void> {
    await this.db.kysely
      .updateTable('orders')
      .set({ issuance_claim: null, issuance_claim_until: null })
      .where('id', '=', id)
      .where('issuance_claim', '=', claim)
      .execute();
  }

  /**
   * WF_ISSUANCE → COMPLETE/COMPLETED for the holder of `claim` only, which it releases: the order
   * as completed, or undefined when the claim or the state changed (a cancel, a new reissue round,
   * a takeover). The completions a PostgreSQL batch's units make in one turn are one UPDATE
   * (`Gathering`).
   */
  async markIssued(
    id: OrderId,
    major: MajorStatus,
    claim: string,
    at: number,
    facts: IssuedFacts,
  ): Promise<Order | undefined> {
    const issued: Issued = { id, major, claim, at, facts };
    if (this.db.gathering === undefined) return completeOrder(this.db, issued);
    return this.db.gathering.run(
      'orders.markIssued',
      issued,
      (i) => completeOrder(this.db, i),
      (all) => completeOrders(this.db, all),
    );
  }

  // State changes. Each is one guarded UPDATE from the state the caller read: false, changing
  // nothing, when the order has moved on meanwhile (a conflict the caller resolves). Every one that
  // leaves WF_ISSUANCE ends any issuance claim, so no holder can complete a round it lost.

  /**
   * Every name shown: `from` (a PENDING or REISSUE DCV minor, at the row `version` whose names were
   * seen shown: `OrderNamesRepo.proofState`) → WF_ISSUANCE of the same major.
   */
  async markAwaitingIssuance(
    id: OrderId,
    from: { major: MajorStatus; minor: MinorStatus; version: number },
    at: number,
  ): Promise<boolean> {
    return this.move(id, from, { minor_status: 'WF_ISSUANCE', update_date: at });
  }

  /** Every name of a new OV/EV order shown: PENDING/`from` (at `version`) → PENDING/WF_ORG_VALIDATION (the operator's vetting). */
  async markAwaitingVetting(id: OrderId, from: MinorStatus, version: number, at: number): Promise<boolean> {
    return this.move(
      id,
      { major: 'PENDING', minor: from, version },
      { major_status: 'PENDING', minor_status: 'WF_ORG_VALIDATION', update_date: at, ...UNCLAIMED },
    );
  }

  /**
   * The operator vetted the organization: PENDING/WF_ORG_VALIDATION → PENDING/WF_ISSUANCE with what
   * was vetted recorded beside the organization as ordered.
   */
  async markVetted(
    id: OrderId,
    organization: OrganizationInfo | null,
    vetted: VettedData,
    at: number,
  ): Promise<boolean> {
    return this.move(
      id,
      { major: 'PENDING', minor: 'WF_ORG_VALIDATION' },
      {
        minor_status: 'WF_ISSUANCE',
        organization_json: vettedOrganizationJson(organization, vetted),
        update_date: at,
      },
    );
  }

  /** PENDING/`from` → FAILED/`minor` with its reason; the charge marked refunded (the RA books the refund in the same transaction). */
  async markFailed(
    id: OrderId,
    from: MinorStatus,
    minor: FailedMinorStatus,
    reason: string,
    at: number,
  ): Promise<boolean> {
    return this.move(
      id,
      { major: 'PENDING', minor: from },
      {
        major_status: 'FAILED',
        minor_status: minor,
        failure_reason: reason,
        billing_status: 'refunded',
        update_date: at,
        ...UNCLAIMED,
      },
    );
  }

  /** A reissue round that cannot complete: REISSUE/`from` → COMPLETE/COMPLETED, the current certificate kept, the reason recorded. */
  async markReissueAbandoned(id: OrderId, from: MinorStatus, reason: string, at: number): Promise<boolean> {
    return this.move(
      id,
      { major: 'REISSUE', minor: from },
      { major_status: 'COMPLETE', minor_status: 'COMPLETED', failure_reason: reason, update_date: at, ...UNCLAIMED },
    );
  }

  /** `from` → CANCELLED: the charge refunded, or cleared (kept) when cancelled too long after issuance. */
  async markCancelled(
    id: OrderId,
    from: { major: MajorStatus; minor: MinorStatus },
    refunded: boolean,
    at: number,
  ): Promise<boolean> {
    return this.move(id, from, {
      major_status: 'CANCELLED',
      minor_status: 'CANCELLED',
      billing_status: refunded ? 'refunded' : 'cleared',
      update_date: at,
      ...UNCLAIMED,
    });
  }

  /** Its current certificate revoked: `from` (any minor) → REVOKED, the charge marked refunded when `refunded`. */
  async markRevoked(id: OrderId, from: MajorStatus, refunded: boolean, at: number): Promise<boolean> {
    return this.move(
      id,
      { major: from },
      {
        major_status: 'REVOKED',
        minor_status: 'REVOKED',
        update_date: at,
        ...(refunded ? { billing_status: 'refunded' } : {}),
        ...UNCLAIMED,
      },
    );
  }

  /**
   * Holds the order's row until the caller's transaction ends, if the order is still `major`: a
   * write that changes nothing (as `CaRepo.lockIssuanceClaims`), so that a transition of the order
   * racing the caller's transaction (a cancel) either happened before it, and this answers false,
   * or waits for its commit.
   */
  async holdIn(id: OrderId, major: MajorStatus): Promise<boolean> {
    return this.move(id, { major }, { major_status: major });
  }

  /** Holds the order's row until the caller's transaction ends, whatever its state (a write that changes nothing). */
  async hold(id: OrderId): Promise<void> {
    await this.db.kysely
      .updateTable('orders')
      .set((eb) => ({ major_status: eb.ref('major_status') }))
      .where('id', '=', id)
      .execute();
  }

  private async move(
    id: OrderId,
    from: { major: MajorStatus; minor?: MinorStatus; version?: number },
    set: Updateable<OrdersTable>,
  ): Promise<boolean> {
    let q = this.db.kysely.updateTable('orders').set(set).where('id', '=', id).where('major_status', '=', from.major);
    if (from.minor !== undefined) q = q.where('minor_status', '=', from.minor);
    if (from.version !== undefined) q = q.where('version', '=', from.version);
    const r = await q.executeTakeFirst();
    return r.numUpdatedRows > 0n;
  }

  /**
   * Records on a cancelled order the Idempotency-Key of the DELETE /Order that cancelled it and
   * what it answered (refunded or charged), in the cancel's transaction. Guarded: only a CANCELLED
   * order without a key takes one, so a key is never replaced. False when nothing was recorded.
   */
  async recordCancelKey(id: OrderId, key: string, refunded: boolean): Promise<boolean> {
    const r = await this.db.kysely
      .updateTable('orders')
      .set({ cancel_key: key, cancel_refunded: refunded ? 1 : 0 })
      .where('id', '=', id)
      .where('major_status', '=', 'CANCELLED')
      .where('cancel_key', 'is', null)
      .executeTakeFirst();
    return r.numUpdatedRows > 0n;
  }
}
