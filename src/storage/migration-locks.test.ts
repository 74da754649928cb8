// A migration on PostgreSQL waits for a table's lock a bounded time (`LockWaits`): the lock it
// asks for queues every later statement on that table, so a migration waiting for an old
// transaction held the service's traffic as long. Past the bound its transaction rolls back and
// tries again after a pause, in which the traffic runs; it gives up, having applied nothing,
// after its attempts. The migration here is 0024, taken back from a migrated database: it indexes
// five tables in one transaction, the last one sign_in_failures.
import { randomBytes } from 'node:crypto';
import { Migrator, sql } from 'kysely';
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openPostgres, scratchPostgresDatabase, waitUntilBlockedBy } from '../../test/support/databases.js';
import { openDatabase, type Db } from './database.js';
import { migrateToLatest, migrations, type LockWaits } from './migrate.js';

const url = process.env.CERTDESK_TEST_DATABASE_URL;
if (url === undefined || url === '')
  console.warn('migration lock waits not tested: they are PostgreSQL only and CERTDESK_TEST_DATABASE_URL is not set');

const INDEXES = [
  'dcv_values_expiry',
  'oauth_codes_expiry',
  'web_sessions_expiry',
  'operator_sessions_expiry',
  'sign_in_failures_updated',
];

describe.skipIf(url === undefined || url === '')('migration lock waits on PostgreSQL', () => {
  let db: Db;
  let dbUrl: string;
  let migrating: Db;
  let old: pg.Client;
  beforeEach(async () => {
    db = await openPostgres(url!);
    dbUrl = db.url!;
    await sql`DELETE FROM kysely_migration WHERE name = '0024-expiry-indexes'`.execute(db.kysely);
    for (const index of INDEXES) await sql`DROP INDEX ${sql.id(index)}`.execute(db.kysely);
    migrating = await openDatabase({ url: dbUrl, migrating: true, poolSize: 2 });
    // An old transaction that wrote to sign_in_failures and has not ended (a session left idle in transaction).
    old = new pg.Client({ connectionString: dbUrl });
    await old.connect();
    await old.query('BEGIN; LOCK TABLE sign_in_failures IN ROW EXCLUSIVE MODE');
  });
  afterEach(async () => {
    await old?.end();
    await migrating?.close();
    await db?.close();
  });

  const indexes = async () =>
    (
      await sql<{
        name: string;
      }>`SELECT indexname AS name FROM pg_indexes WHERE indexname IN (${sql.join(INDEXES)})`.execute(db.kysely)
    ).rows.map((r) => r.name);
  const oldPid = async () => (await old.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;

  it('ok/writes to the table pass while the migration waits; it is applied once the old transaction ends', async () => {
    const waits: { migration: string; attempt: number; attempts: number }[] = [];
    let waited!: () => void;
    const firstWait = new Promise<void>((resolve) => (waited = resolve));
    const lockWaits: LockWaits = { waitMs: 200, pauseMs: 200, attempts: 1_000 };
    const migrated = migrateToLatest(migrating, {
      lockWaits,
      onLockWait: (w) => {
        waits.push(w);
        waited();
      },
    });
    void migrated.catch(() => undefined); // awaited below; a failed assertion before must not leave it unheard
    try {
      await waitUntilBlockedBy(db, await oldPid());
      // A write of the service, on a connection of its own. Without the bound it queued behind the
      // migration's lock request until the old transaction ended.
      const writer = new pg.Client({ connectionString: dbUrl });
      await writer.connect();
      try {
        const wrote = writer
          .query('BEGIN; LOCK TABLE sign_in_failures IN ROW EXCLUSIVE MODE; COMMIT')
          .then(() => 'wrote');
        const held = new Promise((resolve) => setTimeout(() => resolve('held for 20 s'), 20_000).unref());
        expect(await Promise.race([wrote, held])).toBe('wrote');
      } finally {
        await writer.end();
      }
      await firstWait;
      expect(waits[0]).toEqual({ migration: '0024-expiry-indexes', attempt: 1, attempts: 1_000 });
      expect(await indexes()).toEqual([]);
    } finally {
      await old.query('COMMIT');
    }
    expect(await migrated).toEqual(['0024-expiry-indexes']);
    expect((await indexes()).sort()).toEqual([...INDEXES].sort());
    // The lock is Kysely's again for the next process, which finds nothing to do.
    expect(await migrateToLatest(migrating)).toEqual([]);
  });

  it('fail/a transaction that never ends: the migration gives up after its attempts, naming itself, having applied nothing', async () => {
    const waits: number[] = [];
    const failed = await migrateToLatest(migrating, {
      lockWaits: { waitMs: 100, pauseMs: 50, attempts: 3 },
      onLockWait: (w) => waits.push(w.attempt),
    }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(String(failed)).toMatch(
      /migration 0024-expiry-indexes could not take the locks it needs: other transactions held them past 100 ms at each of 3 attempts/,
    );
    expect(((failed as Error).cause as { code?: string }).code).toBe('55P03');
    expect(waits).toEqual([1, 2]);
    // The four indexes made before the wait went with the transaction.
    expect(await indexes()).toEqual([]);
    const { rows } = await sql`SELECT name FROM kysely_migration WHERE name = '0024-expiry-indexes'`.execute(db.kysely);
    expect(rows).toEqual([]);
    // The old transaction was never disturbed.
    expect((await old.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
  });

  it('fail/another failure of a migration is not tried again', async () => {
    // An index of that name already there: a failure of the migration's own, not a wait.
    await old.query('COMMIT');
    await sql`CREATE INDEX sign_in_failures_updated ON sign_in_failures (updated_at)`.execute(db.kysely);
    const waits: unknown[] = [];
    await expect(
      migrateToLatest(migrating, {
        lockWaits: { waitMs: 100, pauseMs: 50, attempts: 3 },
        onLockWait: (w) => waits.push(w),
      }),
    ).rejects.toThrow(/migration 0024-expiry-indexes failed: .*already exists/);
    expect(waits).toEqual([]);
    expect(await indexes()).toEqual(['sign_in_failures_updated']);
  });
  it('ok/a second process migrating at once waits for the first rather than filling its pauses with attempts of its own', async () => {
    const second = await openDatabase({ url: dbUrl, migrating: true, poolSize: 2 });
    try {
      const waits: string[] = [];
      let waited!: () => void;
      const firstWait = new Promise<void>((resolve) => (waited = resolve));
      const lockWaits: LockWaits = { waitMs: 100, pauseMs: 300, attempts: 1_000 };
      const a = migrateToLatest(migrating, {
        lockWaits,
        onLockWait: () => {
          waits.push('a');
          waited();
        },
      });
      void a.catch(() => undefined);
      await firstWait;
      const b = migrateToLatest(second, { lockWaits, onLockWait: () => waits.push('b') });
      void b.catch(() => undefined);
      // Several of a's attempts and pauses pass while b waits.
      while (waits.length < 4) await new Promise((resolve) => setTimeout(resolve, 50));
      await old.query('COMMIT');
      expect(await a).toEqual(['0024-expiry-indexes']);
      expect(await b).toEqual([]);
      expect(waits.filter((w) => w === 'b')).toEqual([]);
    } finally {
      await old.query('ROLLBACK').catch(() => undefined);
      await second.close();
    }
  });

  it('ok/each migration commits on its own: one applied before a later one waits holds no lock meanwhile, and stays applied if the later one gives up', async () => {
    // 0023 taken back too: it alters ca_crls (an ACCESS EXCLUSIVE lock), then 0024 waits.
    await sql`DELETE FROM kysely_migration WHERE name = '0023-crl-entries-digest'`.execute(db.kysely);
    await sql`ALTER TABLE ca_crls DROP COLUMN entries_sha256`.execute(db.kysely);
    let waited!: () => void;
    const firstWait = new Promise<void>((resolve) => (waited = resolve));
    const migrated = migrateToLatest(migrating, {
      lockWaits: { waitMs: 100, pauseMs: 100, attempts: 40 },
      onLockWait: () => waited(),
    });
    void migrated.catch(() => undefined);
    await firstWait;
    // Read while 0024 retries: in one transaction with 0023 this waited for the whole run.
    const reader = new pg.Client({ connectionString: dbUrl });
    await reader.connect();
    try {
      const read = reader.query('SELECT count(entries_sha256)::int AS n FROM ca_crls').then((r) => r.rows);
      const held = new Promise((resolve) => setTimeout(() => resolve('held for 20 s'), 20_000).unref());
      expect(await Promise.race([read, held])).toEqual([{ n: 0 }]);
    } finally {
      await reader.end();
    }
    await expect(migrated).rejects.toThrow(/migration 0024-expiry-indexes could not take the locks it needs/);
    const { rows } = await sql<{ name: string }>`SELECT name FROM kysely_migration WHERE name >= '0023'`.execute(
      db.kysely,
    );
    expect(rows.map((r) => r.name)).toEqual(['0023-crl-entries-digest']);
  });
  it('ok/while it pauses, the run holds no transaction id nor snapshot: vacuum is not held back', async () => {
    const seen: Promise<{ pid: number; xid: string | null; xmin: string | null }[]>[] = [];
    let waited!: () => void;
    const firstWait = new Promise<void>((resolve) => (waited = resolve));
    const migrated = migrateToLatest(migrating, {
      lockWaits: { waitMs: 100, pauseMs: 4_000, attempts: 1_000 },
      onLockWait: () => {
        // At the start of a pause of at least 2 s.
        seen.push(
          sql<{ pid: number; xid: string | null; xmin: string | null }>`SELECT pid, backend_xid::text AS xid,
            backend_xmin::text AS xmin FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid()
              AND (backend_xid IS NOT NULL OR backend_xmin IS NOT NULL)`
            .execute(db.kysely)
            .then((r) => r.rows),
        );
        waited();
      },
    });
    void migrated.catch(() => undefined);
    try {
      await firstWait;
      expect(await seen[0]).toEqual([]);
    } finally {
      await old.query('COMMIT');
    }
    expect(await migrated).toEqual(['0024-expiry-indexes']);
  });

  it('ok/a role that may use the schema but not create in it migrates an up-to-date database (finds nothing to do)', async () => {
    await old.query('COMMIT');
    const role = `cdt_user_${randomBytes(4).toString('hex')}`;
    await sql`DELETE FROM kysely_migration WHERE name = '0024-expiry-indexes'`.execute(db.kysely);
    await migrateToLatest(migrating);
    await sql.raw(`CREATE ROLE ${role} LOGIN`).execute(db.kysely);
    try {
      await sql
        .raw(
          `REVOKE CREATE ON SCHEMA public FROM PUBLIC; GRANT USAGE ON SCHEMA public TO ${role};
        GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO ${role}`,
        )
        .execute(db.kysely);
      const as = new URL(dbUrl);
      as.username = role;
      const user = await openDatabase({ url: as.toString(), migrating: true, poolSize: 2 });
      try {
        expect(await migrateToLatest(user)).toEqual([]);
        const refused = await sql`CREATE TABLE not_allowed (k int)`.execute(user.kysely).then(
          () => undefined,
          (e: unknown) => (e as { code?: string }).code,
        );
        expect(refused).toBe('42501');
      } finally {
        await user.close();
      }
    } finally {
      await sql.raw(`DROP OWNED BY ${role}; DROP ROLE ${role}`).execute(db.kysely);
    }
  });

  it("ok/two processes migrating a fresh database at once leave rows that Kysely's Migrator (an earlier release) accepts: applied once each, in order by time", async () => {
    await old.query('COMMIT');
    const fresh = await scratchPostgresDatabase(url!);
    try {
      const runs = await Promise.all(
        [1, 2].map(async () => {
          const one = await openDatabase({ url: fresh.url, migrating: true, poolSize: 2 });
          try {
            return await migrateToLatest(one);
          } finally {
            await one.close();
          }
        }),
      );
      const all = Object.keys(migrations(db));
      expect([...runs[0]!, ...runs[1]!].sort()).toEqual(all);
      const check = await openDatabase({ url: fresh.url, poolSize: 1 });
      try {
        const { rows } = await sql<{ name: string; timestamp: string }>`SELECT name, timestamp FROM kysely_migration
          ORDER BY timestamp, name`.execute(check.kysely);
        expect(rows.map((r) => r.name)).toEqual(all);
        for (const r of rows) expect(r.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
        const provider = { getMigrations: async () => migrations(check) };
        const { error, results } = await new Migrator({ db: check.kysely, provider }).migrateToLatest();
        expect(error).toBeUndefined();
        expect(results).toEqual([]);
      } finally {
        await check.close();
      }
    } finally {
      await fresh.drop();
    }
  });
});
