// Statements overdue behind a lock another session holds, on `db` (opened with a short
// `queryTimeoutMs`): each answered as the database not answering in time, and cancelled on the
// server, so no backend of `db`'s is left waiting and none of the writes lands once the lock goes.
import { sql } from 'kysely';
import pg from 'pg';
import { expect } from 'vitest';
import { databaseUnavailable, type Db } from '../../src/storage/index.js';

/** `adminUrl`: the same database, directly (the lock holder, and the one that looks). */
export async function expectOverdueWritesCancelled(db: Db, adminUrl: string): Promise<void> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await sql`CREATE TABLE hits (k int)`.execute(db.kysely);
    await admin.query('BEGIN');
    await admin.query('LOCK TABLE hits');
    for (let i = 0; i < 6; i++) {
      const e = await sql`INSERT INTO hits VALUES (${i})`.execute(db.kysely).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(databaseUnavailable(e), String(e)).toBe('The database did not answer in time.');
    }
    const { rows } = await admin.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'`,
    );
    expect(rows).toEqual([{ n: 0 }]);
    await admin.query('COMMIT');
    expect((await sql<{ n: number }>`SELECT count(*)::int AS n FROM hits`.execute(db.kysely)).rows).toEqual([{ n: 0 }]);
  } finally {
    await admin.query('ROLLBACK').catch(() => undefined);
    await admin.end();
  }
}
