// What lets migrations on PostgreSQL take as long as their work takes (`openDatabase` with
// `migrating`): a deployment may give the service's sessions bounds on the server (`ALTER ROLE …
// SET statement_timeout`, `lock_timeout`, `idle_in_transaction_session_timeout`, as
// docs/operations.md advises), and a migration may wait for another process's migration lock, or
// rewrite a large table. Each setting is set for one transaction only (`set_config` with
// is_local), so a pooler in transaction mode carries it to no other session. The one bound a
// migration keeps is on waiting for a table's lock (`migrate.ts`, `LockWaits`).
import { PostgresAdapter, PostgresDialect, sql, type DialectAdapter, type Kysely, type Migration } from 'kysely';

/** Kysely's migration lock on PostgreSQL (its PostgresAdapter's; not exported). */
export const MIGRATION_LOCK_ID = '3853314791062309107';
/** How long waiting for another process's migration may take (Kysely's own bound). */
const LOCK_WAIT = '1h';

const unbounded = (lockTimeout: string) =>
  sql`SELECT set_config('statement_timeout', '0', true), set_config('lock_timeout', ${lockTimeout}, true),
    set_config('idle_in_transaction_session_timeout', '0', true)`;

/**
 * Kysely takes its migration lock (a session's advisory lock) in a statement of its own, which a
 * statement_timeout bounds from its start; taken in a transaction of its own instead, it is held
 * past that transaction's end as before.
 */
class UnboundedMigrationAdapter extends PostgresAdapter {
  override async acquireMigrationLock(db: Kysely<unknown>): Promise<void> {
    await db.transaction().execute(async (trx) => {
      await unbounded(LOCK_WAIT).execute(trx);
      await sql`SELECT pg_advisory_lock(${sql.lit(MIGRATION_LOCK_ID)})`.execute(trx);
    });
  }
}

export class MigrationPostgresDialect extends PostgresDialect {
  override createAdapter(): DialectAdapter {
    return new UnboundedMigrationAdapter();
  }
}

/**
 * `migration`, run with no bound on the server but `lockWaitMs` on each wait for a lock: Kysely
 * runs the migrations in one transaction.
 */
export function boundedLockWaits(migration: Migration, lockWaitMs: number): Migration {
  return {
    ...migration,
    up: async (db) => {
      await unbounded(`${lockWaitMs}ms`).execute(db);
      await migration.up(db);
    },
  };
}
