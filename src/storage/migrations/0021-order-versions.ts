import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../database.js';

/**
 * Change counters for what GET /Order/{id} shows, so a reader can tell from the order's row alone
 * whether an order looks as it did (storage `OrdersRepo.tag`). Kept by triggers, so no code path
 * can forget them:
 * - `orders.version` goes up with every update of the order's row, and with every configuration
 *   scan of the order (ConfigurationAssessment);
 * - `order_names.version` with every update of a name's row (DCV status, last check, approver):
 *   shown only in DCVStatus, so only a read with includeDCVStatus looks at the names' counters.
 * Names are added or removed only with an update of their order (placing, reissuing), and a
 * certificate becomes an order's current one only by the update that records it (`markIssued`,
 * after the CA stored it): neither needs a counter of its own.
 *
 * The names' trigger does not touch the order's row: that would lock the order from a statement
 * that held only a name (a DCV check racing a reissue, which locks the order, then its names,
 * could deadlock on PostgreSQL). A scan report is a new row nobody waits for, so its trigger may.
 */
export function orderVersions(dialect: Dialect) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      // Kysely runs PostgreSQL migrations in a transaction but not SQLite's: the columns and the
      // triggers commit together.
      if (dialect === 'sqlite') await sql`BEGIN IMMEDIATE`.execute(db);
      try {
        for (const table of ['orders', 'order_names'])
          await db.schema
            .alterTable(table)
            .addColumn('version', 'bigint', (c) => c.notNull().defaultTo(0))
            .execute();
        for (const statement of dialect === 'postgres' ? POSTGRES_TRIGGERS : SQLITE_TRIGGERS)
          await sql.raw(statement).execute(db);
        if (dialect === 'sqlite') await sql`COMMIT`.execute(db);
      } catch (e) {
        if (dialect === 'sqlite') await sql`ROLLBACK`.execute(db).catch(() => undefined);
        throw e;
      }
    },
  };
}

// SQLite cannot change NEW in a trigger: the row is updated once more, which fires no trigger
// again (its WHEN fails, and 0020's counters watch other columns).
const sqliteBump = (table: string) =>
  `CREATE TRIGGER ${table}_version AFTER UPDATE ON ${table} FOR EACH ROW WHEN NEW.version = OLD.version
  BEGIN UPDATE ${table} SET version = OLD.version + 1 WHERE id = NEW.id; END`;

const SQLITE_TRIGGERS = [
  sqliteBump('orders'),
  sqliteBump('order_names'),
  `CREATE TRIGGER scan_reports_order_version AFTER INSERT ON scan_reports FOR EACH ROW WHEN NEW.kind = 'configuration'
  BEGIN UPDATE orders SET version = version + 1 WHERE id = NEW.order_id; END`,
];

const POSTGRES_TRIGGERS = [
  `CREATE FUNCTION row_version_bump() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.version := OLD.version + 1;
  RETURN NEW;
END $$`,
  `CREATE TRIGGER orders_version BEFORE UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION row_version_bump()`,
  `CREATE TRIGGER order_names_version BEFORE UPDATE ON order_names FOR EACH ROW EXECUTE FUNCTION row_version_bump()`,
  // The order's own trigger counts the update.
  `CREATE FUNCTION scan_report_order_bump() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE orders SET version = version WHERE id = NEW.order_id;
  RETURN NULL;
END $$`,
  `CREATE TRIGGER scan_reports_order_version AFTER INSERT ON scan_reports FOR EACH ROW
  WHEN (NEW.kind = 'configuration') EXECUTE FUNCTION scan_report_order_bump()`,
];
