// Migrations on PostgreSQL, run here rather than by Kysely's Migrator (which runs them on SQLite),
// in Kysely's bookkeeping table, so that either can read what the other applied:
// - A run holds the run lock (`RUN_LOCK_ID`) in a transaction of its own, on a connection of its
//   own, from its first migration to its last: other processes that migrate wait for it, then
//   find nothing to do. That transaction writes nothing (no xid, no snapshot kept between its
//   statements), so holding it does not hold back vacuum.
// - Each migration commits in a transaction of its own, which takes Kysely's migration lock
//   (`pg_advisory_xact_lock`) and reads what is applied under it: a process of an earlier release
//   (Kysely's Migrator) waits for it too, and two runs never apply one migration twice, should
//   the run lock be lost with its connection. Transactions' locks end with them: Kysely's (a
//   session's, taken in one statement and released in another) could, through a pooler in
//   transaction mode, be released on another server connection and stay held on the first.
// - A migration waits for a table's lock at most `LockWaits.waitMs`: the lock it asks for queues
//   every later statement on that table, so a wait for an old transaction held the service's
//   traffic as long. Past it the migration's transaction rolls back, releasing every table lock
//   it took, and is tried again after a pause in which the traffic runs.
// - The server's bounds a deployment may set for the service's sessions (statement_timeout,
//   idle_in_transaction_session_timeout, and from PostgreSQL 17 transaction_timeout) are lifted for these transactions (`set_config` local, so
//   a pooler carries them to no other session): a migration may rewrite a large table, or wait for
//   another process's run.
import { sql, type Kysely, type Migration } from 'kysely';
import { withinTime } from '../core/index.js';
import { CONNECT_TIMEOUT_MS, KEEPALIVE_AFTER_MS, type Db } from './database.js';
import { dropSocket } from './pg-overdue.js';
import { fromServer } from './unavailable.js';

/** The migration lock: Kysely's own key, so that a process of an earlier release waits for it too. */
export const MIGRATION_LOCK_ID = '3853314791062309107';
/** The run lock: held while a process applies its migrations, pauses included. */
export const RUN_LOCK_ID = '3853314791062309108';
/** How long closing the run lock's connection may take before its socket is dropped. */
const CLOSE_WITHIN_MS = 5_000;
/** PostgreSQL's lock_not_available: a wait for a lock ran past `lock_timeout`. */
const LOCK_NOT_AVAILABLE = '55P03';
/** How long waiting for another process's migrations may take (Kysely's own bound). */
const LOCK_WAIT = '1h';

/**
 * The service's bounds on the server lifted for the transaction; the wait for a lock at most an
 * hour. transaction_timeout exists from PostgreSQL 17: set where the server has it (no row, no
 * call before), since naming an unknown setting is an error.
 */
const UNBOUNDED = `SELECT set_config('statement_timeout', '0', true), set_config('lock_timeout', '${LOCK_WAIT}', true),
  set_config('idle_in_transaction_session_timeout', '0', true),
  (SELECT set_config(name, '0', true) FROM pg_settings WHERE name = 'transaction_timeout')`;

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
  return holdingRunLock(db, async () => {
    const applied: string[] = [];
    for (;;) {
      let outcome = await applyNext(db, migrations, lockWaits.waitMs);
      for (let tried = 1; typeof outcome === 'object'; tried++) {
        if (tried >= lockWaits.attempts)
          throw new Error(
            `migration ${outcome.waited} could not take the locks it needs: other transactions held them past ${lockWaits.waitMs} ms ` +
              `at each of ${tried} attempts. Look for long transactions (pg_stat_activity: 'idle in transaction', ` +
              `long queries), end them, and migrate again`,
            { cause: outcome.error },
          );
        onLockWait?.({ migration: outcome.waited, attempt: tried, attempts: lockWaits.attempts });
        await new Promise((resolve) => setTimeout(resolve, lockWaits.pauseMs * (0.5 + Math.random())));
        outcome = await applyNext(db, migrations, lockWaits.waitMs);
      }
      if (outcome === 'none') return applied;
      applied.push(outcome);
    }
  });
}

/** A migration's wait for a table's lock that ran past its bound (its transaction rolled back). */
interface Waited {
  readonly waited: string;
  readonly error: unknown;
}

/**
 * One attempt at the first migration of `migrations` that `db` lacks, in a transaction of its
 * own under the migration lock: its name once committed, 'none' when none is missing.
 */
async function applyNext(
  db: Db,
  migrations: Record<string, Migration>,
  lockWaitMs: number,
): Promise<string | 'none' | Waited> {
  const qualified = db.schema === undefined ? 'kysely_migration' : `${db.schema}.kysely_migration`;
  const table = sql.table(qualified);
  let waited: Waited | undefined;
  return db.kysely
    .transaction()
    .execute(async (trx) => {
      await sql.raw(UNBOUNDED).execute(trx);
      await sql`SELECT pg_advisory_xact_lock(${sql.lit(MIGRATION_LOCK_ID)})`.execute(trx);
      // Kysely's table as Kysely makes it, only when missing: creating needs a right on the
      // schema that a role which only uses it may lack (PostgreSQL checks it first).
      const { rows } = await sql<{ t: string | null }>`SELECT to_regclass(${qualified})::text AS t`.execute(trx);
      if (rows[0]?.t === null)
        await sql`CREATE TABLE ${table} (name varchar(255) NOT NULL PRIMARY KEY, timestamp varchar(255) NOT NULL)`.execute(
          trx,
        );
      const done = new Set(
        (await sql<{ name: string }>`SELECT name FROM ${table}`.execute(trx)).rows.map((r) => r.name),
      );
      const unknown = [...done].filter((name) => !(name in migrations));
      if (unknown.length > 0)
        throw new Error(`the database has migrations this release does not know (${unknown.join(', ')}): it is newer`);
      const name = Object.keys(migrations).find((n) => !done.has(n));
      if (name === undefined) return 'none';
      await sql`SELECT set_config('lock_timeout', ${`${lockWaitMs}ms`}, true)`.execute(trx);
      try {
        await migrations[name]!.up(trx as unknown as Kysely<unknown>);
      } catch (e) {
        if (fromServer(e) && e.code === LOCK_NOT_AVAILABLE) waited = { waited: name, error: e };
        throw new Error(`migration ${name} failed: ${String(e)}`, { cause: e });
      }
      // The server's clock, under the lock: Kysely's Migrator orders the rows by it.
      await sql`INSERT INTO ${table} (name, timestamp)
        VALUES (${name}, to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))`.execute(trx);
      return name;
    })
    .catch((e: unknown) => {
      if (waited !== undefined) return waited;
      throw e;
    });
}

/**
 * `fn`, run while a transaction on a connection of its own (not the pool's: it may have one)
 * holds the run lock; it writes nothing and is rolled back at the end.
 */
async function holdingRunLock<T>(db: Db, fn: () => Promise<T>): Promise<T> {
  if (db.url === undefined) throw new Error('migrations on PostgreSQL need the database URL');
  const pg = (await import('pg')).default;
  const client = new pg.Client({
    connectionString: db.url,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_AFTER_MS,
  });
  // A connection lost meanwhile fails the statement in hand; the 'error' event would end the process.
  client.on('error', () => undefined);
  await client.connect();
  try {
    await client.query('BEGIN');
    await client.query(UNBOUNDED);
    await client.query(`SELECT pg_advisory_xact_lock(${RUN_LOCK_ID})`);
    return await fn();
  } finally {
    // Closing the connection ends its transaction, and the lock with it; on a path gone silent
    // the goodbye is never answered, and the socket is dropped instead.
    await withinTime(client.end(), CLOSE_WITHIN_MS, 'closing the run lock').catch(() => dropSocket(client));
  }
}
