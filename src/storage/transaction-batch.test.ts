// TransactionBatch (core) over real transactions: units started together share one, each gets its
// own result, and a unit that fails fails alone while the others commit.
import { sql } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { testDialects } from '../../test/support/databases.js';
import { TransactionBatch } from '../core/index.js';
import { inTransaction, openDatabase, type Db } from './database.js';

describe.each(testDialects())('TransactionBatch on $dialect', ({ dialect, open }) => {
  let db: Db;
  /** Transactions begun through the batch (committed or not). */
  let begun = 0;
  let batch: TransactionBatch<Db>;
  beforeAll(async () => {
    db = await open();
    await sql`CREATE TABLE batch_things (id integer PRIMARY KEY, label text NOT NULL)`.execute(db.kysely);
    await sql`CREATE TABLE batch_counter (id integer PRIMARY KEY, n integer NOT NULL)`.execute(db.kysely);
    batch = new TransactionBatch(<T>(fn: (tx: Db) => Promise<T>) => {
      begun++;
      return inTransaction(db, fn);
    });
  });
  afterAll(async () => {
    await db?.close();
  });
  beforeEach(async () => {
    await sql`DELETE FROM batch_things`.execute(db.kysely);
    await sql`DELETE FROM batch_counter`.execute(db.kysely);
    await sql`INSERT INTO batch_counter (id, n) VALUES (1, 0)`.execute(db.kysely);
    begun = 0;
  });

  const rows = async () =>
    (await sql<{ id: number; label: string }>`SELECT id, label FROM batch_things ORDER BY id`.execute(db.kysely)).rows;
  const insert = (id: number, label: string) => async (tx: Db) => {
    await sql`INSERT INTO batch_things (id, label) VALUES (${id}, ${label})`.execute(tx.kysely);
    return `${label}#${id}`;
  };

  it('ok/units started together share a transaction; each gets its own result once all are committed', async () => {
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => batch.run(insert(i, `u${i}`))));
    expect(results).toEqual(Array.from({ length: 20 }, (_, i) => `u${i}#${i}`));
    expect(await rows()).toHaveLength(20);
    // The first may go alone (the batch flushes on the next tick); the rest wait for it and share one.
    expect(begun).toBeLessThanOrEqual(2);
  });

  it('ok/one unit alone is one transaction, and sees its own writes', async () => {
    const seen = await batch.run(async (tx) => {
      await insert(7, 'alone')(tx);
      return (await sql<{ n: number }>`SELECT count(*) AS n FROM batch_things`.execute(tx.kysely)).rows[0]!.n;
    });
    expect(Number(seen)).toBe(1);
    expect(begun).toBe(1);
  });

  it('fail/a unit that throws fails alone, with its own error and none of its writes; the others commit once', async () => {
    const attempts = Array.from({ length: 10 }, (_, i) =>
      batch.run(async (tx) => {
        await insert(i, `u${i}`)(tx);
        if (i === 4) throw new Error('unit 4 refuses');
        return i;
      }),
    );
    const settled = await Promise.allSettled(attempts);
    expect(settled.filter((s) => s.status === 'rejected')).toEqual([
      { status: 'rejected', reason: new Error('unit 4 refuses') },
    ]);
    expect(settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []))).toEqual([0, 1, 2, 3, 5, 6, 7, 8, 9]);
    expect((await rows()).map((r) => r.id)).toEqual([0, 1, 2, 3, 5, 6, 7, 8, 9]);
  });

  it('fail/two units writing the same key: the shared transaction fails; run alone, one commits and the other gets the constraint error', async () => {
    const [noise, ...pair] = await Promise.allSettled([
      batch.run(insert(1, 'noise')),
      batch.run(insert(5, 'first')),
      batch.run(insert(5, 'second')),
    ]);
    expect(noise).toEqual({ status: 'fulfilled', value: 'noise#1' });
    // Alone they run at once, as two requests would: either may win.
    const won = pair.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    expect(won).toHaveLength(1);
    expect(pair.filter((s) => s.status === 'rejected')).toHaveLength(1);
    expect(await rows()).toEqual([
      { id: 1, label: 'noise' },
      { id: 5, label: won[0]!.split('#')[0] },
    ]);
  });

  it('fail/a conflict in one unit, then another unit failing for it: the conflict is what fails the batch, which runs again whole', async () => {
    // As on PostgreSQL: one unit's statement is a deadlock's victim (40P01), and every statement
    // of the transaction after it fails too (25P02), here a later one of the first unit's.
    let runs = 0;
    const results = await Promise.all([
      batch.run(async (tx) => {
        await insert(1, 'a')(tx);
        await new Promise((r) => setTimeout(r, 20));
        if (runs === 1) throw Object.assign(new Error('current transaction is aborted'), { code: '25P02' });
        return 'a';
      }),
      batch.run(async (tx) => {
        runs++;
        await insert(2, 'b')(tx);
        if (runs === 1) throw Object.assign(new Error('deadlock detected'), { code: '40P01' });
        return 'b';
      }),
    ]);
    expect(results).toEqual(['a', 'b']);
    // Both ran in one transaction twice (inTransaction reruns a conflict), never one by one.
    expect(runs).toBe(2);
    expect(begun).toBe(1);
    expect((await rows()).map((r) => r.id)).toEqual([1, 2]);
  });

  if (dialect !== 'postgres')
    console.warn('the two processes’ deadlock is PostgreSQL only (SQLite has one writer at a time)');
  it.skipIf(dialect !== 'postgres')(
    'race/two processes’ batches taking two rows in opposite orders: PostgreSQL aborts one, which runs again whole; every unit counts once',
    async () => {
      await sql`INSERT INTO batch_counter (id, n) VALUES (2, 0)`.execute(db.kysely);
      // The other process: a pool and a batch of its own on the same database.
      const other = await openDatabase({ url: db.url!, poolSize: 2 });
      try {
        const theirs = new TransactionBatch<Db>((fn, options) => inTransaction(other, fn, options));
        const runs = { ours: 0, theirs: 0 };
        // Each batch holds its first row before either asks for its second: a certain deadlock.
        let holding = 0;
        let release!: () => void;
        const bothHoldOne = new Promise<void>((resolve) => (release = resolve));
        const bump = (tx: Db, id: number) =>
          sql`UPDATE batch_counter SET n = n + 1 WHERE id = ${id}`.execute(tx.kysely);
        const opposite = (b: TransactionBatch<Db>, name: 'ours' | 'theirs', first: number, second: number) => [
          b.run(async (tx) => {
            runs[name]++;
            await bump(tx, first);
            if (runs[name] === 1 && ++holding === 2) release();
            return `${name}:${first}`;
          }),
          b.run(async (tx) => {
            await bothHoldOne;
            await bump(tx, second);
            return `${name}:${second}`;
          }),
        ];
        const results = await Promise.all([...opposite(batch, 'ours', 1, 2), ...opposite(theirs, 'theirs', 2, 1)]);
        expect(results).toEqual(['ours:1', 'ours:2', 'theirs:2', 'theirs:1']);
        // One batch was the victim and ran again, whole (not unit by unit); the other ran once.
        expect([runs.ours, runs.theirs].sort()).toEqual([1, 2]);
        expect(begun).toBe(1);
        const counts = await sql<{ id: number; n: number }>`SELECT id, n FROM batch_counter ORDER BY id`.execute(
          db.kysely,
        );
        expect(counts.rows.map((r) => [r.id, Number(r.n)])).toEqual([
          [1, 2],
          [2, 2],
        ]);
      } finally {
        await other.close();
      }
    },
    30_000,
  );

  it('bad input/a unit that throws something not an Error: that value, as thrown', async () => {
    const thrown = { not: 'an error' };
    const results = await Promise.allSettled([
      batch.run(insert(1, 'fine')),
      batch.run(async () => {
        throw thrown;
      }),
    ]);
    expect(results[0]).toEqual({ status: 'fulfilled', value: 'fine#1' });
    expect(results[1]).toEqual({ status: 'rejected', reason: thrown });
  });

  it('race/batched units and plain transactions moving one counter at once: every increment counted once, also when units fail and run again alone', async () => {
    const bump = (tx: Db) => sql`UPDATE batch_counter SET n = n + 1 WHERE id = 1`.execute(tx.kysely);
    const threw = new Set<number>();
    const batched = Array.from({ length: 40 }, (_, i) =>
      batch.run(async (tx) => {
        await bump(tx);
        // Four units fail their first run only: their batch is rolled back and rerun unit by unit.
        if (i % 10 === 3 && !threw.has(i)) {
          threw.add(i);
          throw new Error('once');
        }
      }),
    );
    const plain = Array.from({ length: 40 }, () => inTransaction(db, bump));
    const settled = await Promise.allSettled([...batched, ...plain]);
    const failed = settled.filter((s) => s.status === 'rejected').length;
    const n = (await sql<{ n: number }>`SELECT n FROM batch_counter WHERE id = 1`.execute(db.kysely)).rows[0]!.n;
    expect(Number(n)).toBe(80 - failed);
    // A unit fails only when its first run was alone (a batch of one is not run twice).
    expect(threw.size).toBe(4);
    expect(failed).toBeLessThanOrEqual(4);
  });
});
