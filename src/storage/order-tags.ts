import { sql } from 'kysely';
import type { CustomerId, MajorStatus, OrderId } from '../core/index.js';
import { fixedQuery, type Db, type DirectReads } from './database.js';

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
 *
 * On SQLite, a tag read is kept with the database's commit mark from before it was read, and given
 * again while the mark is unchanged: nothing has been committed since, by any process, so the tag
 * is still the order's. That skips the read transaction, the larger part of a polled GET
 * /Order/{id} (docs/architecture.md, "Hot paths").
 */
export async function readOrderTag(
  db: Db,
  customerId: CustomerId,
  id: OrderId,
  withNames: boolean,
): Promise<OrderTag | undefined> {
  // Only on the connection itself: a transaction's own reads see its uncommitted writes.
  const direct = db.direct?.kysely === db.kysely ? db.direct : undefined;
  const mark = await direct?.commitMark();
  if (direct === undefined || mark === undefined) return readTag(db, customerId, id, withNames);
  let kept = keptTags.get(direct);
  if (kept === undefined) keptTags.set(direct, (kept = new Map()));
  const key = `${customerId}:${id}:${withNames ? 'n' : ''}`;
  const known = kept.get(key);
  if (known?.mark === mark) return known.tag;
  const tag = await readTag(db, customerId, id, withNames);
  if (tag === undefined) return undefined;
  // The newest last; past the bound the oldest goes (a Map iterates in insertion order).
  if (!kept.delete(key) && kept.size >= KEPT_TAGS) kept.delete(kept.keys().next().value as string);
  kept.set(key, { mark, tag });
  return tag;
}

/** Tags kept per SQLite connection, each with the commit mark from before its read. */
const keptTags = new WeakMap<DirectReads, Map<string, { mark: number; tag: OrderTag }>>();
const KEPT_TAGS = 10_000;

async function readTag(db: Db, customerId: CustomerId, id: OrderId, withNames: boolean): Promise<OrderTag | undefined> {
  const [row] = withNames ? await orderTagWithNamesOf(db, customerId, id) : await orderTagOf(db, customerId, id);
  if (row === undefined) return undefined;
  return {
    counters: 'names' in row ? `${row.version}:${row.names}` : String(row.version),
    majorStatus: row.major_status as MajorStatus,
    certNotAfter: row.cert_not_after,
  };
}
