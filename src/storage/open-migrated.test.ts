// The service's database opened with its schema brought up to date (`openMigrated`): on
// PostgreSQL the migrations wait for their answers as long as they take, while the service's own
// statements keep the bound on an answer (`queryTimeoutMs`).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scratchPostgresDatabase } from '../../test/support/databases.js';
import { migrateToLatest, openMigrated } from './migrate.js';
import { MIGRATION_LOCK_ID } from './pg-migrations.js';
import { databaseUnavailable } from './unavailable.js';

const url = process.env.CERTDESK_TEST_DATABASE_URL;
if (url === undefined || url === '')
  console.warn('openMigrated on PostgreSQL not tested: CERTDESK_TEST_DATABASE_URL is not set');

describe.skipIf(url === undefined || url === '')('openMigrated on PostgreSQL', () => {
  let scratch: Awaited<ReturnType<typeof scratchPostgresDatabase>>;
  beforeAll(async () => {
    scratch = await scratchPostgresDatabase(url!);
  });
  afterAll(async () => scratch?.drop());

  it('ok/the migrations wait past the bound and past the server bounds the deployment sets (here for another process holding the migration lock), and the service then gets its connections with both', async () => {
    const bound = 300;
    const other = new pg.Client({ connectionString: scratch.url });
    await other.connect();
    try {
      // The settings docs/operations.md advises, as ALTER ROLE would give them, shorter than the wait.
      await other.query(
        `ALTER DATABASE "${scratch.name}" SET statement_timeout = ${bound}; ALTER DATABASE "${scratch.name}" SET lock_timeout = ${bound}`,
      );
      // Another process migrating the same database: the lock is held three bounds long.
      await other.query(`SELECT pg_advisory_lock(${MIGRATION_LOCK_ID})`);
      const released = new Promise<void>((resolve) =>
        setTimeout(
          () => void other.query(`SELECT pg_advisory_unlock(${MIGRATION_LOCK_ID})`).then(() => resolve()),
          3 * bound,
        ),
      );
      const started = Date.now();
      const db = await openMigrated({ url: scratch.url, queryTimeoutMs: bound });
      await released;
      try {
        expect(Date.now() - started).toBeGreaterThanOrEqual(3 * bound - 50);
        expect(await migrateToLatest(db)).toEqual([]);
        // The service's sessions keep the server's bound and the one on an answer.
        const { rows } = await sql<{ statement_timeout: string }>`SHOW statement_timeout`.execute(db.kysely);
        expect(rows).toEqual([{ statement_timeout: `${bound}ms` }]);
        const late = await sql`SELECT pg_sleep(${(3 * bound) / 1000})`.execute(db.kysely).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(databaseUnavailable(late), String(late)).toBe('The database did not answer in time.');
      } finally {
        await db.close();
      }
    } finally {
      await other.end();
    }
  });
});

describe('openMigrated on SQLite', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'certdesk-open-migrated-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('ok/a new file is migrated on the connection the service then uses', async () => {
    const db = await openMigrated({ url: join(dir, 'new.db') });
    try {
      expect(await migrateToLatest(db)).toEqual([]);
      const { rows } = await sql<{ n: number }>`SELECT count(*) AS n FROM customers`.execute(db.kysely);
      expect(rows).toEqual([{ n: 0 }]);
    } finally {
      await db.close();
    }
  });

  it('fail/a file that is not a database: the open fails with the migration, and nothing is left open', async () => {
    const file = join(dir, 'not-a-database.db');
    writeFileSync(file, 'certainly not SQLite '.repeat(100));
    await expect(openMigrated({ url: file })).rejects.toThrow(/not a database|file is (encrypted|not a database)/i);
    // Nothing holds the file: it can be removed and made again.
    rmSync(file);
    const db = await openMigrated({ url: file });
    await db.close();
  });
});
