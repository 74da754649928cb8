import { Migrator, sql, type Migration, type MigrationProvider } from 'kysely';
import { isPostgresUrl, openDatabase, type Db, type OpenOptions } from './database.js';
import { LOCK_WAITS, migratePostgres, type LockWait, type LockWaits } from './pg-migrations.js';
import { initial } from './migrations/0001-initial.js';
import { hashStore } from './migrations/0002-hash-store.js';
import { ca } from './migrations/0003-ca.js';
import { orderDcv } from './migrations/0004-order-dcv.js';
import { mail } from './migrations/0005-mail.js';
import { emailApproval } from './migrations/0006-email-approval.js';
import { orderIndexes } from './migrations/0007-order-indexes.js';
import { reissue } from './migrations/0008-reissue.js';
import { issuanceClaim } from './migrations/0009-issuance-claim.js';
import { cancelIdempotency } from './migrations/0010-cancel-idempotency.js';
import { passwordPolicy } from './migrations/0011-password-policy.js';
import { redirectUris } from './migrations/0012-redirect-uris.js';
import { signIn } from './migrations/0013-sign-in.js';
import { twoFactor } from './migrations/0014-two-factor.js';
import { signInThrottle } from './migrations/0015-sign-in-throttle.js';
import { vouchers } from './migrations/0016-vouchers.js';
import { scans } from './migrations/0017-scans.js';
import { operators } from './migrations/0018-operators.js';
import { orderExpiryIndex } from './migrations/0019-order-expiry-index.js';
import { orderCounts } from './migrations/0020-order-counts.js';
import { orderVersions } from './migrations/0021-order-versions.js';
import { revokedByKey } from './migrations/0022-revoked-by-key.js';
import { crlEntriesDigest } from './migrations/0023-crl-entries-digest.js';
import { expiryIndexes } from './migrations/0024-expiry-indexes.js';

/**
 * Every migration in order. Forward only: a shipped migration is never edited, only followed. On
 * PostgreSQL each runs in a transaction of its own and waits at most LOCK_WAITS.waitMs for a
 * table's lock, then is tried again (`pg-migrations.ts`): one that changes several tables takes
 * their locks first (`LOCK TABLE a, b IN … MODE`), so that none is held while it waits for another.
 */
export function migrations(db: Db): Record<string, Migration> {
  return {
    '0001-initial': initial(db.dialect),
    '0002-hash-store': hashStore(db.dialect),
    '0003-ca': ca(db.dialect),
    '0004-order-dcv': orderDcv(db.dialect),
    '0005-mail': mail(db.dialect),
    '0006-email-approval': emailApproval(db.dialect),
    '0007-order-indexes': orderIndexes(db.dialect),
    '0008-reissue': reissue(db.dialect),
    '0009-issuance-claim': issuanceClaim(db.dialect),
    '0010-cancel-idempotency': cancelIdempotency(db.dialect),
    '0011-password-policy': passwordPolicy(db.dialect),
    '0012-redirect-uris': redirectUris(db.dialect),
    '0013-sign-in': signIn(db.dialect),
    '0014-two-factor': twoFactor(db.dialect),
    '0015-sign-in-throttle': signInThrottle(db.dialect),
    '0016-vouchers': vouchers(db.dialect),
    '0017-scans': scans(db.dialect),
    '0018-operators': operators(db.dialect),
    '0019-order-expiry-index': orderExpiryIndex(db.dialect),
    '0020-order-counts': orderCounts(db.dialect),
    '0021-order-versions': orderVersions(db.dialect),
    '0022-revoked-by-key': revokedByKey(db.dialect),
    '0023-crl-entries-digest': crlEntriesDigest(db.dialect),
    '0024-expiry-indexes': expiryIndexes(db.dialect),
  };
}

export { LOCK_WAITS, type LockWait, type LockWaits } from './pg-migrations.js';

export interface MigrateOptions {
  /** PostgreSQL: how a migration waits for a table's lock (`pg-migrations.ts`). */
  readonly lockWaits?: LockWaits;
  /** PostgreSQL: told of each attempt whose wait for a lock ran out, before the pause. */
  readonly onLockWait?: (wait: LockWait) => void;
}

/**
 * Brings the schema to the latest version. Safe to run from several processes at once (a lock on
 * PostgreSQL; retries on SQLite). Throws with the failing migration's name on error.
 */
export async function migrateToLatest(db: Db, options: MigrateOptions = {}): Promise<string[]> {
  if (db.dialect === 'postgres')
    return migratePostgres(db, migrations(db), options.lockWaits ?? LOCK_WAITS, options.onLockWait);
  // A migration may rewrite a whole table in one statement: its statement journal spills to a
  // temporary file, not to memory as the service's short statements do (database.ts), and the
  // connection's own setting comes back after.
  const { rows } = await sql<{ temp_store: number }>`PRAGMA temp_store`.execute(db.kysely);
  await sql`PRAGMA temp_store = FILE`.execute(db.kysely);
  try {
    return await migrateWithRetries(db);
  } finally {
    await sql`PRAGMA temp_store = ${sql.raw(String(rows[0]?.temp_store ?? 0))}`.execute(db.kysely);
  }
}

/**
 * Opens the database for the service with its schema brought up to date first. On PostgreSQL the
 * migrations run on connections of their own (`migrating`) that wait for an answer as long as it
 * takes, and lift the server's bounds a deployment sets for the service's sessions: a migration
 * may rewrite a large table, or wait for another process's migration to finish. Then the
 * service's pool opens with `queryTimeoutMs`.
 */
export async function openMigrated(options: OpenOptions, migrate: MigrateOptions = {}): Promise<Db> {
  if (isPostgresUrl(options.url)) {
    const migrating = await openDatabase({ ...options, migrating: true });
    try {
      await migrateToLatest(migrating, migrate);
    } finally {
      await migrating.close();
    }
    return openDatabase(options);
  }
  const db = await openDatabase(options);
  try {
    await migrateToLatest(db, migrate);
  } catch (e) {
    await db.close();
    throw e;
  }
  return db;
}

async function migrateWithRetries(db: Db): Promise<string[]> {
  // Kysely's migration lock is a no-op on SQLite: two processes starting on a fresh file race. A
  // loser that read the migration list before the winner committed fails on the winner's change
  // (a table or column that exists, the file locked); retry until there is nothing left to do.
  // What an attempt applied before it failed stays applied (on SQLite each migration commits on
  // its own), so the report names it with what the later attempts apply.
  const applied: string[] = [];
  for (let attempt = 1; ; attempt++) {
    const run = await migrateOnce(db);
    applied.push(...run.applied);
    if (run.error === undefined) return applied;
    const text = String(run.error.cause ?? run.error);
    if (!/SQLITE_BUSY|database is locked|already exists|duplicate column name/.test(text) || attempt >= 20)
      throw run.error;
    await new Promise((resolve) => setTimeout(resolve, 50 * attempt));
  }
}

/** One run of Kysely's migrator (SQLite): the migrations it applied, and the error it stopped at, if any. */
async function migrateOnce(db: Db): Promise<{ applied: string[]; error?: Error }> {
  const all = migrations(db);
  const provider: MigrationProvider = { getMigrations: async () => all };
  const { error, results } = await new Migrator({ db: db.kysely, provider }).migrateToLatest();
  const applied = (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
  if (error === undefined) return { applied };
  const failed = results?.find((r) => r.status === 'Error');
  return {
    applied,
    error: new Error(`migration ${failed?.migrationName ?? '(unknown)'} failed: ${String(error)}`, { cause: error }),
  };
}
