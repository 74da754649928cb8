// PostgreSQL runs the statements Kysely sends as named prepared statements (storage/database.ts
// `preparing`): parsed once per connection, and still answered after a schema change alters what
// one returns. One connection, so that every statement meets what the last one left.
import { sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scratchPostgresDatabase } from '../../test/support/databases.js';
import { inTransaction, openDatabase, type Db } from './database.js';

const url = process.env.CERTDESK_TEST_DATABASE_URL;
if (url === undefined || url === '')
  console.warn('prepared statement tests not run: they are PostgreSQL only and CERTDESK_TEST_DATABASE_URL is not set');

describe.skipIf(url === undefined || url === '')('prepared statements on postgres', () => {
  let db: Db;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    const scratch = await scratchPostgresDatabase(url!);
    drop = scratch.drop;
    db = await openDatabase({ url: scratch.url, poolSize: 1 });
    await sql`CREATE TABLE things (id int PRIMARY KEY, label text)`.execute(db.kysely);
    await sql`INSERT INTO things VALUES (1, 'one'), (2, 'two')`.execute(db.kysely);
  });
  afterAll(async () => {
    await db?.close();
    await drop?.();
  });

  const k = () => db.kysely as unknown as Kysely<{ things: { id: number; label: string } }>;
  const prepared = async () =>
    (await sql<{ statement: string }>`SELECT statement FROM pg_prepared_statements`.execute(db.kysely)).rows.map(
      (r) => r.statement,
    );

  /** `fn` on a database of its own, one connection, with an empty table `things`; dropped afterwards. */
  async function onOwnDatabase(prepared: boolean, fn: (d: Db) => Promise<void>): Promise<void> {
    const scratch = await scratchPostgresDatabase(url!);
    const own = await openDatabase({ url: scratch.url, poolSize: 1, prepared });
    try {
      await sql`CREATE TABLE things (id int PRIMARY KEY, label text)`.execute(own.kysely);
      await fn(own);
    } finally {
      await own.close();
      await scratch.drop();
    }
  }

  it('ok/a query and its parameters: parsed once on the connection, answered for each value', async () => {
    for (const id of [1, 2, 1]) {
      const row = await k().selectFrom('things').select('label').where('id', '=', id).executeTakeFirst();
      expect(row?.label).toBe(id === 1 ? 'one' : 'two');
    }
    const texts = (await prepared()).filter((t) => t.includes('from "things"'));
    expect(texts).toEqual(['select "label" from "things" where "id" = $1']);
  });

  it('ok/a text has the same name in every process (a hash of the text): a pooler sharing a server connection cannot run another text under it', async () => {
    await onOwnDatabase(true, async (other) => {
      const names = async (d: Db) => {
        await (d.kysely as unknown as ReturnType<typeof k>)
          .selectFrom('things')
          .select('label')
          .where('id', '=', 7)
          .execute();
        return (
          await sql<{ name: string; statement: string }>`SELECT name, statement FROM pg_prepared_statements`.execute(
            d.kysely,
          )
        ).rows.filter((r) => r.statement.includes('"id" = $1'));
      };
      const [mine, theirs] = [await names(db), await names(other)];
      expect(mine).toHaveLength(1);
      expect(mine[0]!.name).toMatch(/^certdesk_[A-Za-z0-9_-]{32}$/);
      expect(theirs).toEqual(mine);
    });
  });

  it('ok/at most 500 prepared statements on a connection: more texts run unnamed, and are answered', async () => {
    await onOwnDatabase(true, async (busy) => {
      const kb = busy.kysely as unknown as Kysely<{ things: { id: number } }>;
      // A page size is a literal in the SQL (as GET /Orders writes it): each one a text of its own.
      for (let n = 1; n <= 520; n++)
        expect(await kb.selectFrom('things').select('id').where('id', '=', n).limit(sql.lit(n)).execute()).toEqual([]);
      const count = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_prepared_statements`.execute(
        busy.kysely,
      );
      expect(count.rows[0]?.n).toBe(500);
    });
  });

  it('ok/LIKE searches and transaction control are not prepared', async () => {
    await inTransaction(db, async (tx) => {
      const like = (tx.kysely as unknown as ReturnType<typeof k>)
        .selectFrom('things')
        .select('id')
        .where('label', 'like', 'o%');
      expect(await like.execute()).toEqual([{ id: 1 }]);
    });
    expect((await prepared()).filter((t) => /like|begin|commit/i.test(t))).toEqual([]);
  });

  it('ok/a column added under a prepared select *: outside a transaction the next read is answered at once', async () => {
    const all = () => k().selectFrom('things').selectAll().where('id', '=', 1).execute();
    expect(await all()).toEqual([{ id: 1, label: 'one' }]);
    await sql`ALTER TABLE things ADD COLUMN note text DEFAULT 'n'`.execute(db.kysely);
    expect(await all()).toEqual([{ id: 1, label: 'one', note: 'n' }]);
  });

  it('ok/without them (CERTDESK_DATABASE_PREPARED=false, for a pooler that does not keep them): nothing is prepared', async () => {
    await onOwnDatabase(false, async (plain) => {
      const k2 = plain.kysely as unknown as Kysely<{ things: { id: number } }>;
      for (let i = 0; i < 3; i++) await k2.selectFrom('things').select('id').where('id', '=', i).execute();
      const rows = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_prepared_statements`.execute(
        plain.kysely,
      );
      expect(rows.rows[0]?.n).toBe(0);
    });
  });

  it('ok/inside a transaction the changed statement fails it once; inTransaction runs it again, writes and all, once', async () => {
    const all = (d: Db) =>
      (d.kysely as unknown as ReturnType<typeof k>).selectFrom('things').selectAll().where('id', '=', 2);
    expect(await all(db).execute()).toEqual([{ id: 2, label: 'two', note: 'n' }]);
    await sql`ALTER TABLE things DROP COLUMN note`.execute(db.kysely);
    let attempts = 0;
    const read = await inTransaction(db, async (tx) => {
      attempts++;
      await (tx.kysely as unknown as ReturnType<typeof k>)
        .insertInto('things')
        .values({ id: 10 + attempts, label: 'x' })
        .execute();
      return all(tx).execute();
    });
    expect(read).toEqual([{ id: 2, label: 'two' }]);
    expect(attempts).toBe(2);
    // The first attempt's write was rolled back with it.
    expect(await k().selectFrom('things').select('id').where('id', '>', 10).execute()).toEqual([{ id: 12 }]);
    // Any other error is not retried.
    attempts = 0;
    await expect(
      inTransaction(db, async () => {
        attempts++;
        throw new Error('refused');
      }),
    ).rejects.toThrow('refused');
    expect(attempts).toBe(1);
  });
});
