// writeLater: a write nobody reads the result of is held in a PostgreSQL transaction and sent with
// the transaction's next statement or its commit, several as one statement. What the transaction
// runs afterwards sees it; it commits with the transaction or not at all; one that fails fails the
// transaction with its own error. On SQLite, and outside a transaction, it runs at once.
import { CompiledQuery, sql, type Kysely } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { scratchPostgresDatabase, testDialects } from '../../test/support/databases.js';
import { inTransaction, openDatabase, writeLater, type Db } from './database.js';
import { MailRepo } from './mail-repo.js';
import { migrateToLatest } from './migrate.js';
import { heldStatements, laterWritesStatement } from './later-statements.js';

/** Test tables, not in the schema: writeLater only uses the name to keep one held write per table. */
type Table = Parameters<typeof writeLater>[1];
const A = 'later_a' as Table;
const B = 'later_b' as Table;

/** The test tables as Kysely sees them. */
const k = (d: Db) => d.kysely as unknown as Kysely<Record<'later_a' | 'later_b', { id: number; label: string }>>;
/** Holds an INSERT of (id, label) into `table` (writeLater). */
const insert = (d: Db, table: Table, id: number, label: string) =>
  writeLater(
    d,
    table,
    k(d)
      .insertInto(table as 'later_a')
      .values({ id, label })
      .compile(),
  );
/** Holds a write that reads a table (so is not folded): every row of later_a copied into later_b. */
const copyAToB = (d: Db) =>
  writeLater(
    d,
    B,
    k(d)
      .insertInto('later_b')
      .columns(['id', 'label'])
      .expression(k(d).selectFrom('later_a').select(['id', 'label']))
      .compile(),
  );

describe.each(testDialects())('writes held for later on $dialect', ({ dialect, open }) => {
  let db: Db;
  beforeAll(async () => {
    db = await open();
    await sql`CREATE TABLE later_a (id integer PRIMARY KEY, label text NOT NULL)`.execute(db.kysely);
    await sql`CREATE TABLE later_b (id integer PRIMARY KEY, label text NOT NULL)`.execute(db.kysely);
  });
  afterAll(async () => {
    await db?.close();
  });
  beforeEach(async () => {
    await sql`DELETE FROM later_a`.execute(db.kysely);
    await sql`DELETE FROM later_b`.execute(db.kysely);
  });

  const rows = async (d: Db, table: 'later_a' | 'later_b') =>
    (await k(d).selectFrom(table).select(['id', 'label']).orderBy('id').execute()).map((r) => `${r.id}:${r.label}`);

  it('ok/held writes of two tables, and a second of one: the next statement of the transaction sees them all, and they commit', async () => {
    const seen = await inTransaction(db, async (tx) => {
      await insert(tx, A, 1, 'a1');
      await insert(tx, B, 1, 'b1');
      await insert(tx, A, 2, 'a2');
      return [...(await rows(tx, 'later_a')), ...(await rows(tx, 'later_b'))];
    });
    expect(seen).toEqual(['1:a1', '2:a2', '1:b1']);
    expect(await rows(db, 'later_a')).toEqual(['1:a1', '2:a2']);
    expect(await rows(db, 'later_b')).toEqual(['1:b1']);
  });

  it('ok/held writes as the last of a transaction: sent with its commit', async () => {
    await inTransaction(db, async (tx) => {
      await insert(tx, A, 1, 'a1');
      await insert(tx, B, 1, 'b1');
    });
    expect(await rows(db, 'later_a')).toEqual(['1:a1']);
    expect(await rows(db, 'later_b')).toEqual(['1:b1']);
  });

  it('ok/an INSERT … RETURNING into another table after held writes: its rows answered as they are, and every write there', async () => {
    const returned = await inTransaction(db, async (tx) => {
      await insert(tx, A, 1, 'held');
      return k(tx).insertInto('later_b').values({ id: 5, label: 'carrier' }).returning(['id', 'label']).execute();
    });
    expect(returned).toEqual([{ id: 5, label: 'carrier' }]);
    expect(await rows(db, 'later_a')).toEqual(['1:held']);
    expect(await rows(db, 'later_b')).toEqual(['5:carrier']);
  });

  it('ok/an INSERT into the table of a held write, after it: both there, the held one first', async () => {
    const returned = await inTransaction(db, async (tx) => {
      await insert(tx, A, 1, 'held');
      return k(tx).insertInto('later_a').values({ id: 2, label: 'next' }).returning('id').execute();
    });
    expect(returned).toEqual([{ id: 2 }]);
    expect(await rows(db, 'later_a')).toEqual(['1:held', '2:next']);
  });

  it('ok/a held write that reads a table sees the writes held before it and none held after it, as if each were sent at once', async () => {
    await inTransaction(db, async (tx) => {
      await insert(tx, A, 1, 'a1');
      await copyAToB(tx);
      await insert(tx, A, 2, 'a2');
    });
    expect(await rows(db, 'later_b')).toEqual(['1:a1']);
    expect(await rows(db, 'later_a')).toEqual(['1:a1', '2:a2']);
  });

  it('ok/a second held write of one table that meets the first on its row runs after it', async () => {
    await inTransaction(db, async (tx) => {
      await insert(tx, A, 1, 'inserted');
      await writeLater(tx, A, k(tx).updateTable('later_a').set({ label: 'updated' }).where('id', '=', 1).compile());
      await insert(tx, B, 1, 'b1');
    });
    expect(await rows(db, 'later_a')).toEqual(['1:updated']);
    expect(await rows(db, 'later_b')).toEqual(['1:b1']);
  });

  it('ok/outside a transaction: written at once', async () => {
    await insert(db, A, 7, 'now');
    expect(await rows(db, 'later_a')).toEqual(['7:now']);
  });

  it('fail/a held write that fails (a key taken) fails the transaction with its own error: nothing of it is kept', async () => {
    await insert(db, B, 1, 'taken');
    const attempt = inTransaction(db, async (tx) => {
      await sql`INSERT INTO later_a (id, label) VALUES (1, 'sent at once')`.execute(tx.kysely);
      await insert(tx, A, 2, 'held');
      await insert(tx, B, 1, 'held, and taken');
    });
    await expect(attempt).rejects.toThrow(dialect === 'postgres' ? /duplicate key/ : /UNIQUE constraint/);
    expect(await rows(db, 'later_a')).toEqual([]);
    expect(await rows(db, 'later_b')).toEqual(['1:taken']);
    // The connection is clean afterwards: the next transaction commits only its own write.
    await inTransaction(db, (tx) => insert(tx, A, 3, 'next'));
    expect(await rows(db, 'later_a')).toEqual(['3:next']);
  });

  it('fail/a held write its driver refuses to send (a value it cannot encode): the transaction fails, and nothing of it is kept', async () => {
    const unencodable = {
      toPostgres: () => {
        throw new Error('cannot encode this value');
      },
    };
    const attempt = inTransaction(db, async (tx) => {
      await sql`INSERT INTO later_a (id, label) VALUES (1, 'sent at once')`.execute(tx.kysely);
      await writeLater(
        tx,
        B,
        CompiledQuery.raw(
          dialect === 'postgres'
            ? 'insert into "later_b" (id, label) values ($1, $2)'
            : 'insert into "later_b" (id, label) values (?, ?)',
          [1, dialect === 'postgres' ? unencodable : Symbol('unencodable')],
        ),
      );
    });
    await expect(attempt).rejects.toThrow();
    expect(await rows(db, 'later_a')).toEqual([]);
    expect(await rows(db, 'later_b')).toEqual([]);
  });

  it('fail/a transaction that throws after holding writes: rolled back, the writes never sent, not even by the next transaction on the connection', async () => {
    const attempt = inTransaction(db, async (tx) => {
      await insert(tx, A, 1, 'held');
      await insert(tx, B, 1, 'held');
      throw new Error('changed its mind');
    });
    await expect(attempt).rejects.toThrow('changed its mind');
    await inTransaction(db, (tx) => insert(tx, B, 2, 'next'));
    expect(await rows(db, 'later_a')).toEqual([]);
    expect(await rows(db, 'later_b')).toEqual(['2:next']);
  });

  it('race/40 transactions at once, each holding a write to both tables, with one that fails among them: each commits whole or not at all', async () => {
    const results = await Promise.allSettled(
      Array.from({ length: 40 }, (_, i) =>
        inTransaction(db, async (tx) => {
          await insert(tx, A, i, `a${i}`);
          // Transaction 13 takes the key of transaction 12 in later_b: one of the two fails.
          await insert(tx, B, i === 13 ? 12 : i, `b${i}`);
        }),
      ),
    );
    const failed = results.flatMap((r, i) => (r.status === 'rejected' ? [i] : []));
    expect(failed).toHaveLength(1);
    expect([12, 13]).toContain(failed[0]);
    const committed = Array.from({ length: 40 }, (_, i) => i).filter((i) => i !== failed[0]);
    expect(await rows(db, 'later_a')).toEqual(committed.map((i) => `${i}:a${i}`));
    expect((await rows(db, 'later_b')).sort()).toEqual(committed.map((i) => `${i === 13 ? 12 : i}:b${i}`).sort());
  });
});

describe('the statement of held writes', () => {
  it('ok/each but the last a data-modifying WITH, the parameters numbered on in order', () => {
    const batch = laterWritesStatement([
      { table: 'a', text: 'insert into "a" ("x", "y") values ($1, $2)', values: [1, 'one'] },
      { table: 'b', text: 'update "b" set "x" = $1 where "y" = $2 and "z" is null', values: [2, 'two'] },
      { table: 'c', text: 'insert into "c" ("x") values ($1) on conflict ("x") do nothing', values: [3] },
    ]);
    expect(batch.text).toBe(
      'with "later_1" as (insert into "a" ("x", "y") values ($1, $2)), "later_2" as (update "b" set "x" = $3 where "y" = $4 and "z" is null) insert into "c" ("x") values ($5) on conflict ("x") do nothing',
    );
    expect(batch.values).toEqual([1, 'one', 2, 'two', 3]);
  });

  it('ok/held writes as statements: a run of foldable writes, one per table, as one; a write that reads a table alone; in their order', () => {
    const a1 = { table: 'a', text: 'insert into "a" ("x") values ($1)', values: [1] };
    const b1 = { table: 'b', text: 'insert into "b" ("x") values ($1)', values: [2] };
    const a2 = { table: 'a', text: 'update "a" set "x" = $1', values: [3] };
    const copy = { table: 'b', text: 'insert into "b" ("x") select "x" from "a" where "x" > $1', values: [4] };
    const c1 = { table: 'c', text: 'insert into "c" ("x") values ($1)', values: [5] };
    expect(heldStatements([a1, b1, a2, copy, c1, b1])).toEqual([
      laterWritesStatement([a1, b1]),
      { text: a2.text, values: a2.values },
      { text: copy.text, values: copy.values },
      laterWritesStatement([c1, b1]),
    ]);
    expect(heldStatements([])).toEqual([]);
  });

  it('ok/one write at several places of several statements: numbered for each place, the same every time', () => {
    const a = { table: 'a', text: 'insert into "a" ("x", "y") values ($1, $2)', values: [1, 2] };
    const b = { table: 'b', text: 'insert into "b" ("x") values ($1)', values: [3] };
    const first = 'with "later_1" as (insert into "a" ("x", "y") values ($1, $2)) insert into "b" ("x") values ($3)';
    const second = 'with "later_1" as (insert into "b" ("x") values ($1)) insert into "a" ("x", "y") values ($2, $3)';
    for (let round = 0; round < 2; round++) {
      expect(laterWritesStatement([a, b]).text).toBe(first);
      expect(laterWritesStatement([b, a]).text).toBe(second);
      expect(laterWritesStatement([b, b, a]).text).toBe(
        'with "later_1" as (insert into "b" ("x") values ($1)), "later_2" as (insert into "b" ("x") values ($2)) insert into "a" ("x", "y") values ($3, $4)',
      );
    }
  });

  it('ok/one write at 2,100 places: numbered right at each', () => {
    const a = { table: 'a', text: 'insert into "a" ("x") values ($1)', values: [1] };
    for (let offset = 1; offset <= 2_100; offset++) {
      const filler = {
        table: 'b',
        text: 'insert into "b" ("x") values ($1)',
        values: new Array<number>(offset).fill(0),
      };
      expect(laterWritesStatement([filler, a]).text).toBe(
        `with "later_1" as (insert into "b" ("x") values ($1)) insert into "a" ("x") values ($${offset + 1})`,
      );
    }
  });

  it('ok/one write: as it is', () => {
    const write = { table: 'a', text: 'insert into "a" ("x") values ($1)', values: [1] };
    expect(laterWritesStatement([write])).toEqual({ text: write.text, values: write.values });
  });
});

const pgUrl = process.env.CERTDESK_TEST_DATABASE_URL;
if (pgUrl === undefined || pgUrl === '')
  console.warn('the round-trip count of held writes is PostgreSQL only: CERTDESK_TEST_DATABASE_URL is not set');
describe.skipIf(pgUrl === undefined || pgUrl === '')('round trips of held writes on postgres', () => {
  /** `fn` with a database of its own (one connection) holding `tables`, dropped after. */
  const withOwnDatabase = async (tables: readonly string[], fn: (own: Db) => Promise<void>) => {
    const scratch = await scratchPostgresDatabase(pgUrl!);
    const own = await openDatabase({ url: scratch.url, poolSize: 1 });
    try {
      for (const t of tables)
        await own.kysely.executeQuery(CompiledQuery.raw(`CREATE TABLE ${t} (id integer PRIMARY KEY, label text)`));
      await fn(own);
    } finally {
      await own.close();
      await scratch.drop();
    }
  };
  /**
   * Counts what pg is asked to send (`sent`, each statement's text) and the writes to the socket
   * (`writes`, one per round trip: statements sent together go in one), below the connection's
   * own query (bound when the pool connects, after this). `reset` starts the count again;
   * `restore` puts pg back.
   */
  const countingRoundTrips = () => {
    const counter = {
      sent: [] as string[],
      writes: 0,
      reset() {
        counter.sent.length = 0;
        counter.writes = 0;
      },
      restore: () => undefined as void,
    };
    const counted = new WeakSet<object>();
    const original = pg.Client.prototype.query;
    pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
      if (typeof args[0] === 'string' || typeof (args[0] as { text?: unknown })?.text === 'string')
        counter.sent.push(typeof args[0] === 'string' ? args[0] : (args[0] as { text: string }).text);
      const socket = (
        this as unknown as { connection: { stream: Record<'_write' | '_writev', (...a: unknown[]) => unknown> } }
      ).connection.stream;
      if (!counted.has(socket)) {
        counted.add(socket);
        for (const m of ['_write', '_writev'] as const) {
          const write = socket[m].bind(socket);
          socket[m] = (...a: unknown[]) => {
            counter.writes++;
            return write(...a);
          };
        }
      }
      return (original as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof original;
    counter.restore = () => {
      pg.Client.prototype.query = original;
    };
    return counter;
  };
  /** The first word of each statement sent. */
  const verbs = (sent: readonly string[]) => sent.map((t) => t.split(' ')[0]!.toLowerCase());

  it('ok/a transaction of three held writes to three tables: BEGIN, one statement, COMMIT, in one write', async () => {
    const counter = countingRoundTrips();
    try {
      await withOwnDatabase(['later_a', 'later_b', 'later_c'], async (own) => {
        // A transaction that sends nothing: neither BEGIN nor COMMIT goes to the server.
        counter.reset();
        await inTransaction(own, async () => undefined);
        await expect(
          inTransaction(own, async (tx) => {
            await insert(tx, A, 9, 'dropped');
            throw new Error('changed its mind');
          }),
        ).rejects.toThrow('changed its mind');
        expect(counter.sent).toEqual([]);
        expect(counter.writes).toBe(0);

        counter.reset();
        await inTransaction(own, async (tx) => {
          for (const t of [A, B, 'later_c' as Table])
            await writeLater(
              tx,
              t,
              k(tx)
                .insertInto(t as 'later_a')
                .values({ id: 1, label: t })
                .compile(),
            );
        });
        expect(verbs(counter.sent)).toEqual(['begin', 'with', 'commit']);
        expect(counter.writes).toBe(1);
        const counts = await own.kysely.executeQuery<{ n: number }>(
          CompiledQuery.raw(
            'SELECT (SELECT count(*) FROM later_a) + (SELECT count(*) FROM later_b) + (SELECT count(*) FROM later_c) AS n',
          ),
        );
        expect(Number(counts.rows[0]!.n)).toBe(3);

        // An INSERT into another table carries them in its own statement; one into a held write's table does not.
        counter.reset();
        const carried = await inTransaction(own, async (tx) => {
          await insert(tx, A, 2, 'held');
          await insert(tx, B, 2, 'held');
          const c = await k(tx)
            .insertInto('later_c' as 'later_a')
            .values({ id: 2, label: 'carrier' })
            .returning('id')
            .execute();
          await insert(tx, A, 3, 'held');
          await k(tx).insertInto('later_a').values({ id: 4, label: 'after' }).execute();
          return c;
        });
        expect(carried).toEqual([{ id: 2 }]);
        expect(verbs(counter.sent)).toEqual(['begin', 'with', 'insert', 'insert', 'commit']);
        // BEGIN with the first statement, the held write with the next, the COMMIT alone.
        expect(counter.writes).toBe(3);
        expect(counter.sent[1]).toMatch(
          /^with "later_1" as \(insert into "later_a".*\), "later_2" as \(insert into "later_b".*\) insert into "later_c"/,
        );
      });
    } finally {
      counter.restore();
    }
  });

  it('ok/held writes of one table twice, one that reads a table, and more: all with the COMMIT, in one write, in their order', async () => {
    const counter = countingRoundTrips();
    try {
      await withOwnDatabase(['later_a', 'later_b'], async (own) => {
        counter.reset();
        await inTransaction(own, async (tx) => {
          await insert(tx, A, 1, 'first');
          await insert(tx, B, 1, 'b');
          await writeLater(tx, A, k(tx).updateTable('later_a').set({ label: 'second' }).where('id', '=', 1).compile());
          await writeLater(
            tx,
            B,
            k(tx)
              .insertInto('later_b' as 'later_a')
              .columns(['id', 'label'])
              .expression(
                k(tx)
                  .selectFrom('later_a')
                  .select([sql<number>`id + 10`.as('id'), 'label']),
              )
              .compile(),
          );
          await insert(tx, A, 2, 'third');
        });
        // The first two as one statement, the UPDATE of the first's table after them, the INSERT … SELECT
        // alone, then the last write: four statements, all in the write of the COMMIT.
        expect(verbs(counter.sent)).toEqual(['begin', 'with', 'update', 'insert', 'insert', 'commit']);
        expect(counter.writes).toBe(1);
        expect(await k(own).selectFrom('later_a').select(['id', 'label']).orderBy('id').execute()).toEqual([
          { id: 1, label: 'second' },
          { id: 2, label: 'third' },
        ]);
        expect(
          await k(own)
            .selectFrom('later_b' as 'later_a')
            .select(['id', 'label'])
            .orderBy('id')
            .execute(),
        ).toEqual([
          { id: 1, label: 'b' },
          { id: 11, label: 'second' },
        ]);
      });
    } finally {
      counter.restore();
    }
  });

  it('ok/an INSERT after a held write that reads a table carries only the writes held after it; the reading one runs first, alone', async () => {
    const counter = countingRoundTrips();
    try {
      await withOwnDatabase(['later_a', 'later_b', 'later_c'], async (own) => {
        counter.reset();
        const carried = await inTransaction(own, async (tx) => {
          await k(tx).insertInto('later_a').values({ id: 1, label: 'sent with the BEGIN' }).execute();
          await copyAToB(tx);
          await insert(tx, A, 2, 'held after the reading one');
          return k(tx)
            .insertInto('later_c' as 'later_a')
            .values({ id: 5, label: 'carrier' })
            .returning('id')
            .execute();
        });
        expect(carried).toEqual([{ id: 5 }]);
        expect(verbs(counter.sent)).toEqual(['begin', 'insert', 'insert', 'with', 'commit']);
        expect(counter.sent[3]).toMatch(/^with "later_1" as \(insert into "later_a".*\) insert into "later_c"/);
        expect(counter.writes).toBe(3);
        const labels = async (t: 'later_a' | 'later_b') =>
          (await k(own).selectFrom(t).select('label').orderBy('id').execute()).map((r) => r.label);
        expect(await labels('later_b')).toEqual(['sent with the BEGIN']);
        expect(await labels('later_a')).toEqual(['sent with the BEGIN', 'held after the reading one']);
      });
    } finally {
      counter.restore();
    }
  });

  it('ok/a mail and its delivery job (MailRepo.insertInTransaction): one statement, with the COMMIT, in one write', async () => {
    const counter = countingRoundTrips();
    const scratch = await scratchPostgresDatabase(pgUrl!);
    const own = await openDatabase({ url: scratch.url, poolSize: 1 });
    try {
      await migrateToLatest(own);
      const mail = { to: 'a@example.test', subject: 's', text: 't', kind: 'test', createdAt: 1_000 };
      counter.reset();
      await inTransaction(own, async (tx) => {
        await new MailRepo(tx).insertInTransaction({ ...mail, orderId: 1 }, 1_000);
        await new MailRepo(tx).insertInTransaction({ ...mail, orderId: 2 }, null);
      });
      expect(verbs(counter.sent)).toEqual(['begin', 'with', 'insert', 'commit']);
      expect(counter.writes).toBe(1);
      const [first, second] = await new MailRepo(own).list({ limit: 2 }).then((m) => m.sort((a, b) => a.id - b.id));
      expect(await own.kysely.selectFrom('jobs').select(['payload', 'unique_key']).execute()).toEqual([
        { payload: JSON.stringify({ mailId: first!.id }), unique_key: `mail:${first!.id}` },
      ]);
      expect(second).toMatchObject({ orderId: 2, status: 'outbox' });
    } finally {
      counter.restore();
      await own.close();
      await scratch.drop();
    }
  });

  it('fail/a held value pg refuses: every later statement of the transaction fails too, and nothing commits, even if the caller goes on', () =>
    withOwnDatabase(['later_a', 'later_b'], async (own) => {
      const unencodable = {
        toPostgres: () => {
          throw new Error('cannot encode this value');
        },
      };
      const attempt = inTransaction(own, async (tx) => {
        await k(tx).insertInto('later_a').values({ id: 1, label: 'sent with the BEGIN' }).execute();
        await writeLater(
          tx,
          B,
          CompiledQuery.raw('insert into "later_b" (id, label) values ($1, $2)', [1, unencodable]),
        );
        // The caller catches the failure and goes on: what follows must not run outside the transaction or commit.
        await expect(k(tx).insertInto('later_a').values({ id: 2, label: 'after' }).execute()).rejects.toThrow(
          'cannot encode this value',
        );
        await k(tx).insertInto('later_a').values({ id: 3, label: 'goes on' }).execute();
      });
      await expect(attempt).rejects.toThrow('cannot encode this value');
      const left = await own.kysely.executeQuery<{ n: number }>(
        CompiledQuery.raw('SELECT (SELECT count(*) FROM later_a) + (SELECT count(*) FROM later_b) AS n'),
      );
      expect(Number(left.rows[0]!.n)).toBe(0);
      // The connection is clean afterwards.
      await inTransaction(own, (tx) => k(tx).insertInto('later_a').values({ id: 4, label: 'next' }).execute());
      expect((await k(own).selectFrom('later_a').select('id').execute()).map((r) => r.id)).toEqual([4]);
    }));

  it('ok/a held write after a savepoint is dropped by rolling back to it: not sent, so its failure does not fail the rollback', () =>
    withOwnDatabase(['later_a'], async (own) => {
      await inTransaction(own, async (tx) => {
        await k(tx).insertInto('later_a').values({ id: 1, label: 'kept' }).execute();
        await sql`SAVEPOINT sp`.execute(tx.kysely);
        // Would fail (the key is taken) if it were sent.
        await insert(tx, A, 1, 'taken');
        await sql`ROLLBACK TO SAVEPOINT sp`.execute(tx.kysely);
        await k(tx).insertInto('later_a').values({ id: 2, label: 'after the savepoint' }).execute();
      });
      expect(
        (await k(own).selectFrom('later_a').select(['id', 'label']).orderBy('id').execute()).map((r) => r.label),
      ).toEqual(['kept', 'after the savepoint']);
    }));
});
