import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../database.js';
import { idColumn } from './columns.js';

/**
 * GET /Orders without COUNT(*) over all of a customer's orders (ItemsAvailable of 1,000,000 orders
 * took ~25 ms on SQLite and ~340 ms on PostgreSQL, and a CommonName search read every row of the
 * customer, ~1.2 s on SQLite, measured).
 *
 * `order_counts` holds how many orders each customer has per MajorStatus and ProductType, kept
 * exact by triggers on `orders`, so no code path that moves an order can forget it. On SQLite the
 * triggers add to it directly (one writer at a time: nothing to race). On PostgreSQL they append
 * to `order_count_deltas`, which a deferred trigger folds into `order_counts` at commit under the
 * customer's advisory lock taken with a try (see POSTGRES_TRIGGERS): no trigger ever waits for a
 * lock, so none can deadlock (orders moved in opposite directions at once, or a counter row
 * against the customer row a cancel refunds to), and a customer's transactions are not
 * serialised on a hot counter row. The count is the sum of both tables.
 *
 * Two indexes let a CommonName pattern search a range of names instead of all of them: one on
 * the names in byte order (a literal prefix: `www.shop.%`), one on the names reversed (a literal
 * suffix: `%.shop.de`). The queries must spell the indexed expressions exactly as below.
 */
export function orderCounts(dialect: Dialect) {
  const id = idColumn(dialect);
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      // Kysely runs PostgreSQL migrations in a transaction but not SQLite's: the triggers and the
      // back-fill must commit together, or an order written between them is counted twice or never.
      if (dialect === 'sqlite') await sql`BEGIN IMMEDIATE`.execute(db);
      try {
        await createTables(db, id);
        for (const statement of dialect === 'postgres' ? POSTGRES_TRIGGERS : SQLITE_TRIGGERS)
          await sql.raw(statement).execute(db);
        // After the triggers: on PostgreSQL creating them waited for every transaction writing
        // orders and holds off new ones until this commits, so the back-fill sees each order once.
        await sql`
          INSERT INTO order_counts (customer_id, major_status, product_type, n)
          SELECT customer_id, major_status, product_type, COUNT(*) FROM orders
          GROUP BY customer_id, major_status, product_type`.execute(db);
        await sql
          .raw(`CREATE INDEX orders_customer_name_rev ON orders (customer_id, ${REVERSED_NAME[dialect]})`)
          .execute(db);
        // SQLite compares text in byte order already (BINARY), so 0001's orders_customer_name serves
        // the prefix range there; PostgreSQL's default collation need not (en_US ignores dots and dashes).
        if (dialect === 'postgres')
          await sql
            .raw(`CREATE INDEX orders_customer_name_c ON orders (customer_id, ${NAME_BYTES.postgres})`)
            .execute(db);
        if (dialect === 'sqlite') await sql`COMMIT`.execute(db);
      } catch (e) {
        // SQLite may have rolled back already (a full disk): the error that matters is `e`.
        if (dialect === 'sqlite') await sql`ROLLBACK`.execute(db).catch(() => undefined);
        throw e;
      }
    },
  };
}

async function createTables(db: Kysely<unknown>, id: ReturnType<typeof idColumn>): Promise<void> {
  await db.schema
    .createTable('order_counts')
    .addColumn('customer_id', 'bigint', (c) => c.notNull())
    .addColumn('major_status', 'text', (c) => c.notNull())
    .addColumn('product_type', 'text', (c) => c.notNull())
    .addColumn('n', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('order_counts_pk', ['customer_id', 'major_status', 'product_type'])
    .execute();
  await id(db.schema.createTable('order_count_deltas'))
    .addColumn('customer_id', 'bigint', (c) => c.notNull())
    .addColumn('major_status', 'text', (c) => c.notNull())
    .addColumn('product_type', 'text', (c) => c.notNull())
    .addColumn('n', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('order_count_deltas_customer').on('order_count_deltas').column('customer_id').execute();
}

/**
 * Names longer than this are reversed on SQLite only as far as their last this many characters,
 * which is still the start of the whole reversal: a suffix up to this long is found by its range.
 * A DNS name has at most 253 characters in text (RFC 1035 §2.3.4; src/validation/names.ts).
 */
export const REVERSED_NAME_LENGTH = 253;

/**
 * SQLite has no reverse(): the characters taken one by one from the end, in as few steps as the
 * name's length needs (one fixed length of 253 costs ~40 µs an insert, these ~8 µs, measured).
 */
function sqliteReversed(column: string): string {
  const chars = (n: number) => Array.from({ length: n }, (_, i) => `substr(${column}, ${-(i + 1)}, 1)`).join(' || ');
  const steps = [16, 32, 64, 128].map((n) => `WHEN length(${column}) <= ${n} THEN ${chars(n)}`);
  return `(CASE ${steps.join(' ')} ELSE ${chars(REVERSED_NAME_LENGTH)} END)`;
}

/** The common name reversed, in byte order, as the index orders_customer_name_rev holds it. */
export const REVERSED_NAME: Readonly<Record<Dialect, string>> = {
  sqlite: sqliteReversed('common_name'),
  postgres: 'reverse(common_name) COLLATE "C"',
};

/** The common name in byte order, as the index of its prefix ranges holds it. */
export const NAME_BYTES: Readonly<Record<Dialect, string>> = {
  sqlite: 'common_name',
  postgres: 'common_name COLLATE "C"',
};

const KEY = 'customer_id, major_status, product_type';

/** Adds one (NEW) or takes one away (OLD) from the count of that row's key. */
const sqliteCount = (row: 'NEW' | 'OLD') => {
  const sign = row === 'NEW' ? '+' : '-';
  return `INSERT INTO order_counts (${KEY}, n) VALUES (${row}.customer_id, ${row}.major_status, ${row}.product_type, ${sign}1)
    ON CONFLICT (${KEY}) DO UPDATE SET n = n ${sign} 1;`;
};

const SQLITE_TRIGGERS = [
  `CREATE TRIGGER orders_count_insert AFTER INSERT ON orders BEGIN ${sqliteCount('NEW')} END`,
  `CREATE TRIGGER orders_count_delete AFTER DELETE ON orders BEGIN ${sqliteCount('OLD')} END`,
  `CREATE TRIGGER orders_count_update AFTER UPDATE OF ${KEY} ON orders
    WHEN OLD.customer_id IS NOT NEW.customer_id OR OLD.major_status IS NOT NEW.major_status
      OR OLD.product_type IS NOT NEW.product_type
    BEGIN ${sqliteCount('OLD')} ${sqliteCount('NEW')} END`,
];

// On PostgreSQL the triggers on `orders` only append to order_count_deltas (one row per statement
// and key for inserts and deletes, two per row whose key an update changes): appending waits for
// nobody, and a counter row updated once per order would grow a chain of versions as long as
// the transaction's orders (a 100,000-order transaction took 80 s that way, measured). At commit,
// a deferred trigger folds the customer's deltas into order_counts, under the customer's
// advisory lock taken with a try: only its holder deletes deltas and writes order_counts, so
// that never waits either; a transaction that finds the lock taken leaves its deltas to the
// next one. 0x4f43 ('OC') names these locks (the two-key form, apart from the one key Kysely's
// migration lock uses); the customer id is folded into 31 bits, and two customers sharing a
// lock only take turns folding. Only READ COMMITTED transactions (certdesk's) fold: in a
// snapshot that predates another fold, deleting its deltas would fail the transaction.
const deltasOf = (rows: string, sign: string) => `
  INSERT INTO order_count_deltas (${KEY}, n)
  SELECT ${KEY}, ${sign}COUNT(*) FROM ${rows} GROUP BY ${KEY};`;

const POSTGRES_TRIGGERS = [
  `CREATE FUNCTION orders_count_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN ${deltasOf('added', '')}
  RETURN NULL;
END $$`,
  `CREATE FUNCTION orders_count_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN ${deltasOf('removed', '-')}
  RETURN NULL;
END $$`,
  `CREATE FUNCTION orders_count_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO order_count_deltas (${KEY}, n) VALUES
    (OLD.customer_id, OLD.major_status, OLD.product_type, -1),
    (NEW.customer_id, NEW.major_status, NEW.product_type, 1);
  RETURN NULL;
END $$`,
  `CREATE FUNCTION order_count_deltas_fold() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- One fold per transaction and customer: the first takes every delta, so later rows are gone.
  IF current_setting('transaction_isolation') <> 'read committed'
    OR NOT EXISTS (SELECT 1 FROM order_count_deltas WHERE id = NEW.id)
    OR NOT pg_try_advisory_xact_lock(20291, (NEW.customer_id & 2147483647)::int) THEN
    RETURN NULL;
  END IF;
  WITH folded AS (
    DELETE FROM order_count_deltas WHERE customer_id = NEW.customer_id
    RETURNING major_status, product_type, n
  )
  INSERT INTO order_counts AS c (${KEY}, n)
  SELECT NEW.customer_id, major_status, product_type, SUM(n) FROM folded
  GROUP BY major_status, product_type
  ON CONFLICT (${KEY}) DO UPDATE SET n = c.n + excluded.n;
  RETURN NULL;
END $$`,
  `CREATE TRIGGER orders_count_insert AFTER INSERT ON orders REFERENCING NEW TABLE AS added
  FOR EACH STATEMENT EXECUTE FUNCTION orders_count_added()`,
  `CREATE TRIGGER orders_count_delete AFTER DELETE ON orders REFERENCING OLD TABLE AS removed
  FOR EACH STATEMENT EXECUTE FUNCTION orders_count_removed()`,
  // Row by row: PostgreSQL allows no column list on a trigger with transition tables, and a
  // statement trigger would run for every update of an order (claims, DCV checks).
  `CREATE TRIGGER orders_count_update AFTER UPDATE OF ${KEY} ON orders FOR EACH ROW
  WHEN (OLD.customer_id IS DISTINCT FROM NEW.customer_id OR OLD.major_status IS DISTINCT FROM NEW.major_status
    OR OLD.product_type IS DISTINCT FROM NEW.product_type)
  EXECUTE FUNCTION orders_count_moved()`,
  `CREATE CONSTRAINT TRIGGER order_count_deltas_fold AFTER INSERT ON order_count_deltas
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION order_count_deltas_fold()`,
];
