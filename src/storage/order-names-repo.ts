import type { MajorStatus, MinorStatus, OrderId, OrderName, OrderNameId, OrderNameState } from '../core/index.js';
import { fixedQuery, writeLater, type Db } from './database.js';
import { newNameRow, toOrderName, type NewOrderName } from './order-model.js';

/**
 * The names of orders and the state of each one's domain control validation: stored with the
 * order, checked by the worker, approved through an e-mail link.
 */
/** The names of one order, in order (GET /Order). */
const namesOfOrder = fixedQuery((k, orderId: OrderId) =>
  k.selectFrom('order_names').selectAll().where('order_id', '=', orderId).orderBy('id'),
);

export class OrderNamesRepo {
  constructor(private readonly db: Db) {}

  /**
   * Stores the names of an order, the common name first; returns them as stored, in the order
   * given. Nothing is read back (their ids grow in the order given): in a PostgreSQL transaction
   * the insert goes to the server with the transaction's next statement or its commit (`writeLater`).
   */
  async insertNames(orderId: OrderId, names: readonly NewOrderName[]): Promise<OrderNameState[]> {
    if (names.length === 0) return [];
    const rows = names.map((n) => newNameRow(orderId, n));
    await writeLater(this.db, 'order_names', this.db.kysely.insertInto('order_names').values(rows).compile());
    return names.map((n) => ({
      orderId,
      name: n.name,
      method: n.method,
      status: n.status,
      approverEmail: n.approverEmail,
      validatedAt: n.validatedAt ?? null,
      lastCheckedAt: n.lastCheckedAt ?? null,
      lastProblem: null,
    }));
  }

  /**
   * An order's status and row version with whether every one of its names is shown, read in one
   * statement, so from one snapshot: a transition guarded by that version (`OrdersRepo`'s
   * `markAwaitingIssuance`) cannot act on names a reissue replaced after this read.
   */
  async proofState(
    orderId: OrderId,
  ): Promise<{ major: MajorStatus; minor: MinorStatus; version: number; allShown: boolean } | undefined> {
    const rows = await this.db.kysely
      .selectFrom('orders as o')
      .leftJoin('order_names as n', 'n.order_id', 'o.id')
      .select(['o.major_status', 'o.minor_status', 'o.version', 'n.status'])
      .where('o.id', '=', orderId)
      .execute();
    const first = rows[0];
    if (first === undefined) return undefined;
    return {
      major: first.major_status as MajorStatus,
      minor: first.minor_status as MinorStatus,
      version: Number(first.version),
      allShown: rows.every((r) => r.status === 'VALIDATED'),
    };
  }

  /** The names of these orders, by order then as they were ordered (the common name first). */
  async names(orderIds: readonly OrderId[]): Promise<OrderName[]> {
    if (orderIds.length === 0) return [];
    const rows =
      orderIds.length === 1
        ? await namesOfOrder(this.db, orderIds[0]!)
        : await this.db.kysely
            .selectFrom('order_names')
            .selectAll()
            .where('order_id', 'in', [...orderIds])
            .orderBy('order_id')
            .orderBy('id')
            .execute();
    return rows.map(toOrderName);
  }

  /** Records the outcome of one DCV check of one name. */
  async recordCheck(
    nameId: OrderNameId,
    result: { validated: boolean; at: number; problem: string | null },
  ): Promise<void> {
    await this.db.kysely
      .updateTable('order_names')
      .set(
        result.validated
          ? { status: 'VALIDATED', validated_at: result.at, last_checked_at: result.at, last_problem: null }
          : { last_checked_at: result.at, last_problem: result.problem },
      )
      .where('id', '=', nameId)
      .where('status', '=', 'PENDING')
      .execute();
  }

  /** Sets the approver and the approval link of an order's pending EMAIL names (one approver for all, or per name). */
  async setApproval(
    orderId: OrderId,
    names: readonly string[] | 'all-pending',
    approver: string | null,
    tokenHash: string,
  ): Promise<number> {
    let q = this.db.kysely
      .updateTable('order_names')
      .set(
        approver === null
          ? { approval_token_hash: tokenHash }
          : { approver_email: approver, approval_token_hash: tokenHash },
      )
      .where('order_id', '=', orderId)
      .where('status', '=', 'PENDING')
      .where('method', '=', 'EMAIL');
    if (names !== 'all-pending') q = q.where('name', 'in', [...names]);
    const r = await q.executeTakeFirst();
    return Number(r.numUpdatedRows);
  }

  /** The pending names an approval link covers. */
  async namesByApprovalToken(tokenHash: string): Promise<OrderName[]> {
    const rows = await this.db.kysely
      .selectFrom('order_names')
      .selectAll()
      .where('approval_token_hash', '=', tokenHash)
      .orderBy('id')
      .execute();
    return rows.map(toOrderName);
  }

  /** Marks the names of an approval link validated (once); returns how many changed. */
  async approve(tokenHash: string, at: number): Promise<number> {
    const r = await this.db.kysely
      .updateTable('order_names')
      .set({ status: 'VALIDATED', validated_at: at, last_checked_at: at, last_problem: null })
      .where('approval_token_hash', '=', tokenHash)
      .where('status', '=', 'PENDING')
      .executeTakeFirst();
    return Number(r.numUpdatedRows);
  }
}
