import { readdirSync, readlinkSync } from 'node:fs';
import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { sqliteFile } from '../../test/support/databases.js';
import type { Db } from './database.js';

// A statement inside a transaction journals the pages it changes; SQLite spills that journal past
// 64 KiB to a temporary file (named etilqs_*) unless temp_store is MEMORY. The service keeps it in
// memory; migrations, which may rewrite a whole table in one statement, spill to a file.

/** This process's open temporary files of SQLite. */
function sqliteTempFiles(): string[] {
  return readdirSync('/proc/self/fd')
    .map((fd) => {
      try {
        return readlinkSync(`/proc/self/fd/${fd}`);
      } catch {
        return '';
      }
    })
    .filter((link) => link.includes('etilqs_'));
}

const onLinux = process.platform === 'linux';
if (!onLinux) console.warn('SQLite temp-store tests not run: they read /proc/self/fd (Linux only)');

describe.runIf(onLinux)('SQLite temporary storage', () => {
  const file = sqliteFile();
  let db: Db | undefined;
  afterEach(async () => {
    await db?.close();
    db = undefined;
  });

  /** Fills a table with rows large enough that rewriting half of them changes ~1 MB of pages. */
  async function filled(): Promise<Db> {
    const d = await file.open();
    await sql`CREATE TABLE scratch (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, body TEXT NOT NULL)`.execute(
      d.kysely,
    );
    await sql`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 4000)
      INSERT INTO scratch (name, body) SELECT 'name-' || i, printf('%.300c', 'x') FROM n`.execute(d.kysely);
    return d;
  }

  /** Rewrites half the rows in one statement inside a transaction; the temporary files open meanwhile. */
  async function rewriteInTransaction(d: Db): Promise<string[]> {
    return d.kysely.transaction().execute(async (tx) => {
      await sql`UPDATE scratch SET body = body || 'y' WHERE id % 2 = 0`.execute(tx);
      return sqliteTempFiles();
    });
  }

  it('keeps a large statement journal of the service in memory: no temporary file', async () => {
    db = await filled();
    expect(await rewriteInTransaction(db)).toEqual([]);
    const { rows } = await sql<{ n: number }>`SELECT count(*) AS n FROM scratch WHERE body LIKE '%y'`.execute(
      db.kysely,
    );
    expect(rows[0]?.n).toBe(2000);
  });

  it('spills to a temporary file with temp_store = FILE, as migrations run (what the setting avoids)', async () => {
    db = await filled();
    await sql`PRAGMA temp_store = FILE`.execute(db.kysely);
    expect((await rewriteInTransaction(db)).length).toBe(1);
  });

  it('is back to MEMORY after migrating', async () => {
    db = await file.open(); // migrated by the helper
    const { rows } = await sql<{ temp_store: number }>`PRAGMA temp_store`.execute(db.kysely);
    expect(rows[0]?.temp_store).toBe(2);
  });
});
