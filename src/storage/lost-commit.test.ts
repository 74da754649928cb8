// A COMMIT whose answer is lost: the connection drops after the COMMIT was sent, so the client
// cannot tell from the failure whether the server kept the transaction. A real TCP relay on
// loopback stands between the pool and PostgreSQL and loses the answer at the chosen moment:
// after the server answered COMMIT (it was kept), or before the COMMIT reached it (the server's
// end stays open and hears nothing more: it was not kept, and the backend waits in its
// transaction). With `settleLostCommit` the server is asked which; a batch's units are never run
// a second time over a transaction that may have committed them.
import { CompiledQuery, sql } from 'kysely';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { scratchPostgresDatabase } from '../../test/support/databases.js';
import { startCommitLossRelay, type CommitLossRelay } from '../../test/support/commit-loss.js';
import { CommitOutcomeUnknown, TransactionBatch } from '../core/index.js';
import { inTransaction, openDatabase, writeLater, type Db } from './database.js';
import { transactionIdQueries } from './pg-connection.js';

const url = process.env.CERTDESK_TEST_DATABASE_URL;
if (url === undefined || url === '')
  console.warn('lost COMMIT tests not run: they are PostgreSQL only and CERTDESK_TEST_DATABASE_URL is not set');

describe.skipIf(url === undefined || url === '')('a COMMIT whose answer is lost (PostgreSQL)', () => {
  let scratch: Awaited<ReturnType<typeof scratchPostgresDatabase>>;
  let relay: CommitLossRelay;
  let admin: pg.Client;
  let db: Db;

  beforeAll(async () => {
    scratch = await scratchPostgresDatabase(url!);
    admin = new pg.Client({ connectionString: scratch.url });
    await admin.connect();
    await admin.query('CREATE TABLE lost_commit_rows (id integer NOT NULL, label text NOT NULL)');
    relay = await startCommitLossRelay(new URL(scratch.url));
    const relayed = new URL(scratch.url);
    relayed.host = relay.host;
    db = await openDatabase({ url: relayed.toString(), poolSize: 1 });
  });
  afterEach(async () => {
    relay.lose(undefined);
    relay.refuseNew = false;
    await admin.query('DELETE FROM lost_commit_rows');
  });
  afterAll(async () => {
    await db?.close();
    await relay?.close();
    await admin?.end();
    await scratch?.drop();
  });

  const rows = async () =>
    (await admin.query<{ id: number; label: string }>('SELECT id, label FROM lost_commit_rows ORDER BY id, label'))
      .rows;
  const insert = (id: number, label: string) => async (tx: Db) => {
    await sql`INSERT INTO lost_commit_rows (id, label) VALUES (${id}, ${label})`.execute(tx.kysely);
    return `${label}#${id}`;
  };
  /** The backends of the scratch database that are inside a transaction. */
  const inTransactionBackends = async () =>
    (
      await admin.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND backend_xid IS NOT NULL AND pid <> pg_backend_pid()`,
        [scratch.name],
      )
    ).rows[0]!.n;

  it('ok/settling costs no write of its own: the id is read with the BEGIN', async () => {
    const writes = () => relay.connections.reduce((n, c) => n + c.chunks, 0);
    const writesOf = async (settleLostCommit: boolean) => {
      const before = writes();
      await inTransaction(db, insert(1, 'a'), { settleLostCommit });
      return writes() - before;
    };
    await writesOf(true); // the statement prepared and the server's timeline asked once, so that both counts below are alike
    expect(await writesOf(true)).toBe(await writesOf(false));
  });

  it('ok/the id read is the transaction’s, asked first (with the BEGIN) or after a statement (a round trip of its own)', async () => {
    for (const late of [false, true]) {
      const [asked, actual] = await inTransaction(db, async (tx) => {
        if (late) await insert(1, 'a')(tx);
        await tx.kysely.executeQuery(transactionIdQueries.ask);
        if (!late) await insert(1, 'a')(tx);
        const { rows } = await tx.kysely.executeQuery<{ xid: string; pid: number }>(transactionIdQueries.read);
        const current = await sql<{
          xid: string;
          pid: number;
        }>`SELECT txid_current()::text AS xid, pg_backend_pid() AS pid, substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS timeline`.execute(
          tx.kysely,
        );
        return [rows, current.rows];
      });
      expect(asked).toEqual(actual);
    }
  });

  it('fail/without settling, the loss is thrown though the server kept the transaction', async () => {
    relay.lose({ how: 'answerLost' });
    await expect(inTransaction(db, insert(1, 'a'))).rejects.toThrow();
    expect(relay.lost).toBe(1);
    expect(await rows()).toEqual([{ id: 1, label: 'a' }]);
  });

  it('ok/settled: the server kept it, so the work result is returned, its row kept once', async () => {
    relay.lose({ how: 'answerLost' });
    await expect(inTransaction(db, insert(1, 'a'), { settleLostCommit: true })).resolves.toBe('a#1');
    expect(relay.lost).toBe(1);
    expect(await rows()).toEqual([{ id: 1, label: 'a' }]);
    // The pool goes on with a new connection.
    await expect(inTransaction(db, insert(2, 'b'), { settleLostCommit: true })).resolves.toBe('b#2');
  });

  it('fail/settled: a COMMIT that never reached the server; its backend, still in the transaction, is ended, the failure thrown, nothing kept', async () => {
    relay.lose({ how: 'neverSent' });
    const attempt = inTransaction(db, insert(1, 'a'), { settleLostCommit: true });
    await expect(attempt).rejects.toThrow();
    await expect(attempt).rejects.not.toBeInstanceOf(CommitOutcomeUnknown);
    expect(relay.lost).toBe(1);
    expect(await rows()).toEqual([]);
    // The backend that would have held its locks until TCP gave up on the dead path is gone.
    await expect.poll(inTransactionBackends).toBe(0);
  });

  it('fail/settled: the server cannot be asked afterwards: CommitOutcomeUnknown, a 503 that says to look before retrying', async () => {
    relay.lose({ how: 'answerLost', thenUnreachable: true });
    const attempt = inTransaction(db, insert(1, 'a'), { settleLostCommit: true });
    await expect(attempt).rejects.toBeInstanceOf(CommitOutcomeUnknown);
    await expect(attempt).rejects.toMatchObject({ kind: 'notReady', message: /look before sending it again/ });
    expect(await rows()).toEqual([{ id: 1, label: 'a' }]);
  });

  it('ok/settled without the pool: the lost transaction holds a lock every pooled connection waits for; it is ended, and they go on', async () => {
    await admin.query(`INSERT INTO lost_commit_rows (id, label) VALUES (1, 'before')`);
    const relayed = new URL(scratch.url);
    relayed.host = relay.host;
    const pool = await openDatabase({ url: relayed.toString(), poolSize: 2 });
    try {
      const update = (label: string) => (tx: Db) =>
        sql`UPDATE lost_commit_rows SET label = ${label} WHERE id = 1`.execute(tx.kysely).then(() => label);
      let othersWait!: () => void;
      const waiting = new Promise<void>((resolve) => (othersWait = resolve));
      let holds!: () => void;
      const holding = new Promise<void>((resolve) => (holds = resolve));
      relay.lose({ how: 'neverSent' });
      const lost = inTransaction(
        pool,
        async (tx) => {
          await update('lost')(tx);
          holds();
          await waiting;
        },
        { settleLostCommit: true },
      );
      const locked = async () =>
        (
          await admin.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'`,
            [scratch.name],
          )
        ).rows[0]!.n;
      await holding;
      // The pool's other connection waits for the row, and the third transaction for a connection:
      // the one the lost transaction frees goes to it, and it waits for the row too.
      const others = [inTransaction(pool, update('b')), inTransaction(pool, update('c'))];
      await expect.poll(locked, { timeout: 10_000 }).toBeGreaterThanOrEqual(1);
      othersWait();
      await expect(lost).rejects.not.toBeInstanceOf(CommitOutcomeUnknown);
      expect(await Promise.all(others)).toEqual(['b', 'c']);
      expect((await rows())[0]!.label).toMatch(/^[bc]$/);
    } finally {
      await pool.close();
    }
  });

  it('fail/the server answers the COMMIT itself with a failure (a deferred unique key): nothing to ask, the failure thrown at once', async () => {
    await admin.query(
      'CREATE TABLE lost_commit_keys (id integer UNIQUE DEFERRABLE INITIALLY DEFERRED, label text NOT NULL)',
    );
    try {
      await sql`SELECT 1`.execute(db.kysely); // the pool's connection open
      const connections = relay.connections.length;
      const attempt = inTransaction(
        db,
        async (tx) => {
          await sql`INSERT INTO lost_commit_keys (id, label) VALUES (1, 'a'), (1, 'b')`.execute(tx.kysely);
        },
        { settleLostCommit: true },
      );
      await expect(attempt).rejects.toMatchObject({ code: '23505' });
      // No connection was opened to ask about it.
      expect(relay.connections.length).toBe(connections);
    } finally {
      await admin.query('DROP TABLE lost_commit_keys');
    }
  });

  it('ok/a server that will not tell its WAL timeline (as some managed services): the id is read without it, and a lost COMMIT is settled all the same', async () => {
    // A role of the application's kind (not a superuser), on a database where the function is refused.
    const role = `lc_app_${Date.now().toString(36)}`;
    await admin.query(`CREATE ROLE ${role} LOGIN`);
    await admin.query(`GRANT ALL ON lost_commit_rows TO ${role}`);
    await admin.query('REVOKE EXECUTE ON FUNCTION pg_current_wal_lsn() FROM PUBLIC');
    const relayed = new URL(scratch.url);
    relayed.host = relay.host;
    relayed.username = role;
    const app = await openDatabase({ url: relayed.toString(), poolSize: 1 });
    try {
      await expect(sql`SELECT pg_current_wal_lsn()`.execute(app.kysely)).rejects.toMatchObject({ code: '42501' });
      relay.lose({ how: 'answerLost' });
      await expect(inTransaction(app, insert(1, 'a'), { settleLostCommit: true })).resolves.toBe('a#1');
      expect(relay.lost).toBe(1);
      expect(await rows()).toEqual([{ id: 1, label: 'a' }]);
    } finally {
      await app.close();
      await admin.query('GRANT EXECUTE ON FUNCTION pg_current_wal_lsn() TO PUBLIC');
      await admin.query(`REVOKE ALL ON lost_commit_rows FROM ${role}`);
      // Its sessions are gone once the pool has closed them.
      await expect
        .poll(async () => (await admin.query('SELECT 1 FROM pg_stat_activity WHERE usename = $1', [role])).rowCount)
        .toBe(0);
      await admin.query(`DROP ROLE ${role}`);
    }
  });

  describe('TransactionBatch', () => {
    /** Units begun in one tick share one transaction (and a second run of a unit shows as a second row). */
    const batchOf = (...units: [number, string][]) => {
      let transactions = 0;
      const batch = new TransactionBatch<Db>((fn, options) => {
        transactions++;
        return inTransaction(db, fn, options);
      });
      const results = units.map(([id, label]) => batch.run(insert(id, label)));
      return { results, transactions: () => transactions };
    };

    it('ok/its COMMIT was kept and the answer lost: each unit gets its result, each row once (units were run again alone before)', async () => {
      relay.lose({ how: 'answerLost' });
      const b = batchOf([1, 'a'], [2, 'b'], [3, 'c']);
      expect(await Promise.all(b.results)).toEqual(['a#1', 'b#2', 'c#3']);
      expect(b.transactions()).toBe(1);
      expect(relay.lost).toBe(1);
      expect(await rows()).toEqual([
        { id: 1, label: 'a' },
        { id: 2, label: 'b' },
        { id: 3, label: 'c' },
      ]);
    });

    it('ok/its COMMIT never reached the server: nothing was kept, so each unit runs again alone and commits once', async () => {
      relay.lose({ how: 'neverSent' });
      const b = batchOf([1, 'a'], [2, 'b']);
      expect(await Promise.all(b.results)).toEqual(['a#1', 'b#2']);
      expect(b.transactions()).toBe(3);
      expect(await rows()).toEqual([
        { id: 1, label: 'a' },
        { id: 2, label: 'b' },
      ]);
    });

    it('ok/units that only hold writes (writeLater): the id is read before the COMMIT all the same; each row once', async () => {
      relay.lose({ how: 'answerLost' });
      const held = (id: number, label: string) => async (tx: Db) => {
        await writeLater(
          tx,
          'lost_commit_rows' as Parameters<typeof writeLater>[1],
          CompiledQuery.raw('INSERT INTO lost_commit_rows (id, label) VALUES ($1, $2)', [id, label]),
        );
        return `${label}#${id}`;
      };
      const batch = new TransactionBatch<Db>((fn, options) => inTransaction(db, fn, options));
      expect(await Promise.all([batch.run(held(1, 'a')), batch.run(held(2, 'b'))])).toEqual(['a#1', 'b#2']);
      expect(relay.lost).toBe(1);
      expect(await rows()).toEqual([
        { id: 1, label: 'a' },
        { id: 2, label: 'b' },
      ]);
    });

    it('fail/the outcome cannot be found out: every unit fails with CommitOutcomeUnknown and none runs again', async () => {
      relay.lose({ how: 'answerLost', thenUnreachable: true });
      const b = batchOf([1, 'a'], [2, 'b']);
      const settled = await Promise.allSettled(b.results);
      for (const s of settled) {
        expect(s.status).toBe('rejected');
        expect((s as PromiseRejectedResult).reason).toBeInstanceOf(CommitOutcomeUnknown);
      }
      expect(b.transactions()).toBe(1);
      expect(await rows()).toEqual([
        { id: 1, label: 'a' },
        { id: 2, label: 'b' },
      ]);
    });
  });
});
