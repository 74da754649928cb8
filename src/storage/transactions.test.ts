// inTransaction runs a transaction again from the start when PostgreSQL aborted it only because
// of another one (a deadlock's victim, a serialization conflict), a few times at most, and never
// for any other failure.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDialects } from '../../test/support/databases.js';
import { inTransaction, type Db } from './database.js';

/** An error as node-pg reports a failed statement: SQLSTATE in `code`. */
function pgError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

describe.each(testDialects())('transactions on $dialect', ({ dialect, open }) => {
  let db: Db;
  beforeAll(async () => {
    db = await open();
    await sql`CREATE TABLE rerun_things (id integer PRIMARY KEY, label text NOT NULL)`.execute(db.kysely);
    await sql`INSERT INTO rerun_things (id, label) VALUES (1, 'one'), (2, 'two')`.execute(db.kysely);
  });
  afterAll(async () => {
    await db?.close();
  });

  const labels = async () =>
    (await sql<{ id: number; label: string }>`SELECT id, label FROM rerun_things ORDER BY id`.execute(db.kysely)).rows;

  it('ok/a serialization failure: the transaction runs again from the start and commits once', async () => {
    let runs = 0;
    const result = await inTransaction(db, async (tx) => {
      runs++;
      await sql`UPDATE rerun_things SET label = ${`run ${runs}`} WHERE id = 1`.execute(tx.kysely);
      if (runs === 1) throw pgError('40001', 'could not serialize access due to concurrent update');
      return runs;
    });
    expect(result).toBe(2);
    expect((await labels())[0]).toEqual({ id: 1, label: 'run 2' });
  });

  it('fail/a conflict that persists: given up after three reruns, the error as it came, nothing written', async () => {
    let runs = 0;
    const attempt = inTransaction(db, async (tx) => {
      runs++;
      await sql`UPDATE rerun_things SET label = 'never' WHERE id = 2`.execute(tx.kysely);
      throw pgError('40P01', 'deadlock detected');
    });
    await expect(attempt).rejects.toMatchObject({ code: '40P01', message: 'deadlock detected' });
    expect(runs).toBe(4);
    expect((await labels())[1]).toEqual({ id: 2, label: 'two' });
  });

  it('fail/any other failure (a constraint, a bug): not run again', async () => {
    let runs = 0;
    const attempt = inTransaction(db, async (tx) => {
      runs++;
      await sql`INSERT INTO rerun_things (id, label) VALUES (1, 'again')`.execute(tx.kysely);
    });
    await expect(attempt).rejects.toThrow();
    expect(runs).toBe(1);
  });

  const real = dialect === 'postgres';
  if (!real) console.warn('the real deadlock test is PostgreSQL only (SQLite has one writer at a time)');
  it.skipIf(!real)(
    'race/two transactions taking two rows in opposite orders: PostgreSQL aborts one as the victim, which runs again and commits after the other',
    async () => {
      const runs = { a: 0, b: 0 };
      // Both hold their first row before either asks for its second: a certain deadlock.
      let arrived = 0;
      let release!: () => void;
      const bothHoldOne = new Promise<void>((resolve) => (release = resolve));
      const swap = (name: 'a' | 'b', first: number, second: number) =>
        inTransaction(db, async (tx) => {
          runs[name]++;
          await sql`UPDATE rerun_things SET label = ${name} WHERE id = ${first}`.execute(tx.kysely);
          if (runs[name] === 1 && ++arrived === 2) release();
          await bothHoldOne;
          await sql`UPDATE rerun_things SET label = ${name} WHERE id = ${second}`.execute(tx.kysely);
          return name;
        });
      expect(await Promise.all([swap('a', 1, 2), swap('b', 2, 1)])).toEqual(['a', 'b']);
      // One of them was the victim and ran twice; it committed last, so both rows carry its name.
      expect(runs.a + runs.b).toBe(3);
      const victim = runs.a === 2 ? 'a' : 'b';
      expect(await labels()).toEqual([
        { id: 1, label: victim },
        { id: 2, label: victim },
      ]);
    },
    30_000,
  );
});
