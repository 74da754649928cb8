// An order's creation and its completion as statements: for one order, and for the orders a
// PostgreSQL batch's units gather into one statement (`Gathering`, `OrdersRepo.insertOrder` and
// `markIssued`).
import { sql, type Selectable } from 'kysely';
import type { MajorStatus, Order, OrderId } from '../core/index.js';
import type { Db } from './database.js';
import { newOrderRow, toOrder, UNCLAIMED, type IssuedFacts, type NewOrder } from './order-model.js';
import type { OrdersTable } from './schema.js';

/** One `markIssued` call. */
export interface Issued {
  readonly id: OrderId;
  readonly major: MajorStatus;
  readonly claim: string;
  readonly at: number;
  readonly facts: IssuedFacts;
}

/** Stores `orders` in one INSERT; each answered with its own row, by its (customer, PartnerOrderID), which is unique. */
export async function insertOrders(db: Db, orders: readonly NewOrder[]): Promise<Order[]> {
  const ref = (customerId: number, partnerOrderId: string) => `${customerId} ${partnerOrderId}`;
  const rows = await db.kysely.insertInto('orders').values(orders.map(newOrderRow)).returningAll().execute();
  const byRef = new Map(rows.map((r) => [ref(r.customer_id, r.partner_order_id), r]));
  return orders.map((o) => toOrder(byRef.get(ref(o.customerId, o.partnerOrderId))!));
}

/**
 * WF_ISSUANCE → COMPLETE/COMPLETED for the holder of the claim: the order as completed, or
 * undefined when the claim or the state changed. issued_at, term_end and the billing status are
 * set on the first issuance only.
 */
export async function completeOrder(db: Db, { id, major, claim, at, facts }: Issued): Promise<Order | undefined> {
  const first =
    facts.first === undefined
      ? {}
      : { issued_at: facts.first.issuedAt, term_end: facts.first.termEnd, billing_status: 'cleared' };
  const r = await db.kysely
    .updateTable('orders')
    .set({
      major_status: 'COMPLETE',
      minor_status: 'COMPLETED',
      update_date: at,
      ...UNCLAIMED,
      cert_not_after: facts.certNotAfter,
      ...first,
    })
    .where('id', '=', id)
    .where('major_status', '=', major)
    .where('minor_status', '=', 'WF_ISSUANCE')
    .where('issuance_claim', '=', claim)
    .returningAll()
    .executeTakeFirst();
  return r === undefined ? undefined : toOrder(r);
}

/** `completeOrder` of each, in one UPDATE (PostgreSQL); each answered with its own order, by id. */
export async function completeOrders(db: Db, all: readonly Issued[]): Promise<(Order | undefined)[]> {
  // One order twice (never on the order paths: one claim holder completes it): one by one.
  if (new Set(all.map((i) => i.id)).size < all.length) {
    const out: (Order | undefined)[] = [];
    for (const i of all) out.push(await completeOrder(db, i));
    return out;
  }
  const values = all.map(
    (i) =>
      sql`(${i.id}::bigint, ${i.major}::text, ${i.claim}::text, ${i.at}::bigint, ${i.facts.certNotAfter}::bigint, ${
        i.facts.first?.issuedAt ?? null
      }::bigint, ${i.facts.first?.termEnd ?? null}::bigint)`,
  );
  // Each order as `completeOrder` completes it.
  const { rows } = await sql<Selectable<OrdersTable>>`update orders set major_status = 'COMPLETE',
      minor_status = 'COMPLETED', update_date = v.at, issuance_claim = null, issuance_claim_until = null,
      cert_not_after = v.not_after, issued_at = coalesce(v.issued_at, orders.issued_at),
      term_end = coalesce(v.term_end, orders.term_end),
      billing_status = case when v.issued_at is null then orders.billing_status else 'cleared' end
    from (values ${sql.join(values)}) as v (id, major, claim, at, not_after, issued_at, term_end)
    where orders.id = v.id and orders.major_status = v.major and orders.minor_status = 'WF_ISSUANCE'
      and orders.issuance_claim = v.claim
    returning orders.*`.execute(db.kysely);
  const byId = new Map(rows.map((r) => [r.id, r]));
  return all.map((i) => {
    const r = byId.get(i.id);
    return r === undefined ? undefined : toOrder(r);
  });
}
