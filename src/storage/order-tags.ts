import { sql } from 'kysely';
import type { CustomerId, MajorStatus, OrderId } from '../core/index.js';
import { fixedQuery, type Db } from './database.js';

/**
 * What GET /Order/{id} shows of an order, as change counters (migration 0021): the order's row
 * counts its own updates and its configuration scans; with the names' DCV status, their count,
 * newest and the sum of their versions too. Read from the order's row (and the names' index).
 */
const orderTagOf = fixedQuery((k, customerId: CustomerId, id: OrderId) =>
  k
    .selectFrom('orders')
    .select(['version', 'major_status', 'cert_not_after'])
    .where('customer_id', '=', customerId)
    .where('id', '=', id),
);
const orderTagWithNamesOf = fixedQuery((k, customerId: CustomerId, id: OrderId) =>
  k
    .selectFrom('orders as o')
    .select((eb) => [
      'o.version',
      'o.major_status',
      'o.cert_not_after',
      eb
        .selectFrom('order_names as n')
        .whereRef('n.order_id', '=', 'o.id')
        .select(sql<string>`count(*) || '.' || coalesce(max(n.id), 0) || '.' || coalesce(sum(n.version), 0)`.as('t'))
        .as('names'),
    ])
    .where('o.customer_id', '=', customerId)
    .where('o.id', '=', id),
);

/** An order's change counters as one string, with what decides whether it has expired by now. */
export interface OrderTag {
  readonly counters: string;
  readonly majorStatus: MajorStatus;
  readonly certNotAfter: number | null;
}

/**
 * The order's change counters (see orderTagOf; `withNames`: its names' DCV status too).
 * Undefined when the customer has no such order.
 */
export async function readOrderTag(
  db: Db,
  customerId: CustomerId,
  id: OrderId,
  withNames: boolean,
): Promise<OrderTag | undefined> {
  const [row] = withNames ? await orderTagWithNamesOf(db, customerId, id) : await orderTagOf(db, customerId, id);
  if (row === undefined) return undefined;
  return {
    counters: 'names' in row ? `${row.version}:${row.names}` : String(row.version),
    majorStatus: row.major_status as MajorStatus,
    certNotAfter: row.cert_not_after,
  };
}
