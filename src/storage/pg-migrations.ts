// Migrations on PostgreSQL, run here rather than by Kysely's Migrator (which runs them on SQLite),
// in Kysely's bookkeeping table, so that either can read what the other applied:
// - Each migration commits in a transaction of its own, which takes the migration lock
//   (`pg_advisory_xact_lock`) first. A transaction's lock ends with it: through a pooler in
//   transaction mode Kysely's lock (a session's, taken in one statement and released in another)
//   could be released on another server connection, left held on the first, and then that
//   connection's next client "held" it too.
// - A migration waits for a table's lock at most `LockWaits.waitMs`: the lock it asks for queues
//   every later statement on that table, so a wait for an old transaction held the service's
//   traffic as long. Past it the migration is rolled back to its savepoint, which releases every
//   table lock it took, and tried again after a pause, holding only the migration lock: the
//   traffic runs meanwhile, and another process that migrates waits for that lock rather than
//   filling the pause with attempts of its own.
// - The server's bounds a deployment may set for the service's sessions (statement_timeout,
//   idle_in_transaction_session_timeout) are lifted for the transaction (`set_config` local, so a
//   pooler carries them to no other session): a migration may rewrite a large table, or wait for
//   another process's migration.
import { sql, type Kysely, type Migration } from 'kysely';
import type { Db } from './database.js';

/** The migration lock: Kysely's own key, so that a process of an earlier release waits for it too. */
export const MIGRATION_LOCK_ID = '3853314791062309107';
/** How long waiting for another process's migration may take (Kysely's own bound). */
const LOCK_WAIT = '1h';

/** How a migration waits for the locks of the tables it changes (see the top of this file). */
export interface LockWaits {
  /** The longest one wait for a lock may take (the migration's `lock_timeout`). */
  readonly waitMs: number;
  /** The pause before the next attempt, jittered ±50 % so as not to meet the same periodic work. */
  readonly pauseMs: number;
  readonly attempts: number;
}

/** About five minutes of attempts, each holding a table's traffic at most about 2 s. */
export const LOCK_WAITS: LockWaits = { waitMs: 2_000, pauseMs: 3_000, attempts: 60 };

export interface LockWait {
  readonly migration: string;
  readonly attempt: number;
  readonly attempts: number;
}

/**
 * Applies `migrations` (in their order) that `db` lacks, one transaction each; returns the names
 * applied. Safe to run from several processes at once.
 */
export async function migratePostgres(
  db: Db,
  migrations: Record<string, Migration>,
  lockWaits: LockWaits,
  onLockWait?: (wait: LockWait) => void,
): Promise<string[]> {
  const table = sql.table(db.schema === undefined ? 'kysely_migration' : `${db.schema}.kysely_migration`);
  const names = Object.keys(migrations);
  const applied: string[] = [];
  for (;;) {
    const next = await db.kysely.transaction().execute(async (trx) => {
      await sql`SELECT set_config('statement_timeout', '0', true), set_config('lock_timeout', ${LOCK_WAIT}, true),
        set_config('idle_in_transaction_session_timeout', '0', true)`.execute(trx);
      await sql`SELECT pg_advisory_xact_lock(${sql.lit(MIGRATION_LOCK_ID)})`.execute(trx);
      // Kysely's table as Kysely makes it; under the lock, so two first starts do not race to make it.
      await sql`CREATE TABLE IF NOT EXISTS ${table} (name varchar(255) NOT NULL PRIMARY KEY, timestamp varchar(255) NOT NULL)`.execute(
        trx,
      );
      const done = new Set(
        (await sql<{ name: string }>`SELECT name FROM ${table}`.execute(trx)).rows.map((r) => r.name),
      );
      const unknown = [...done].filter((name) => !(name in migrations));
      if (unknown.length > 0)
        throw new Error(`the database has migrations this release does not know (${unknown.join(', ')}): it is newer`);
      const name = names.find((n) => !done.has(n));
      if (name === undefined) return undefined;
      await applyWithLockWaits(trx as unknown as Kysely<unknown>, name, migrations[name]!, lockWaits, onLockWait);
      await sql`INSERT INTO ${table} (name, timestamp) VALUES (${name}, ${new Date().toISOString()})`.execute(trx);
      return name;
    });
    if (next === undefined) return applied;
    applied.push(next);
  }
}

/** `migration` applied in `trx`, each attempt in a savepoint with `lockWaits.waitMs` on a wait for a lock. */
async function applyWithLockWaits(
  trx: Kysely<unknown>,
  name: string,
  migration: Migration,
  lockWaits: LockWaits,
  onLockWait: ((wait: LockWait) => void) | undefined,
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    await sql`SAVEPOINT migration`.execute(trx);
    await sql`SELECT set_config('lock_timeout', ${`${lockWaits.waitMs}ms`}, true)`.execute(trx);
    try {
      await migration.up(trx);
      await sql`RELEASE SAVEPOINT migration`.execute(trx);
      return;
    } catch (e) {
      // On a connection that is gone the transaction is too: the migration's own failure is the news.
      const rolledBack = await sql`ROLLBACK TO SAVEPOINT migration`.execute(trx).then(
        () => true,
        () => false,
      );
      if (!rolledBack || !lockNotAvailable(e)) throw new Error(`migration ${name} failed: ${String(e)}`, { cause: e });
      if (attempt >= lockWaits.attempts)
        throw new Error(
          `migration ${name} could not take the locks it needs: other transactions held them past ${lockWaits.waitMs} ms ` +
            `at each of ${attempt} attempts. Look for long transactions (pg_stat_activity: 'idle in transaction', ` +
            `long queries), end them, and migrate again`,
          { cause: e },
        );
      onLockWait?.({ migration: name, attempt, attempts: lockWaits.attempts });
      await new Promise((resolve) => setTimeout(resolve, lockWaits.pauseMs * (0.5 + Math.random())));
    }
  }
}

/** PostgreSQL's lock_not_available: a wait for a lock ran past `lock_timeout`. */
function lockNotAvailable(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === '55P03';
}
