// A PostgreSQL connection lost while a transaction holds it (the server restarted, a failover, a
// cut network, an operator's pg_terminate_backend): the transaction fails with the loss, the
// process goes on, and the next transaction gets a new connection. pg reports the loss as an
// 'error' event on the client, and the pool listens only while the client is idle: without a
// listener of ours, that event would end the process.
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scratchPostgresDatabase } from '../../test/support/databases.js';
import { expectOverdueWritesCancelled } from '../../test/support/overdue.js';
import { startTcpRelay, type TcpRelay } from '../../test/support/tcp-relay.js';
import { CommitOutcomeUnknown } from '../core/index.js';
import { inTransaction, openDatabase } from './database.js';
import { handingOutHeard } from './pg-overdue.js';
import { CommitNotSent, databaseUnavailable, notSent } from './unavailable.js';

const url = process.env.CERTDESK_TEST_DATABASE_URL;
if (url === undefined || url === '')
  console.warn('connection loss tests not run: they are PostgreSQL only and CERTDESK_TEST_DATABASE_URL is not set');

describe.skipIf(url === undefined || url === '')('a PostgreSQL connection lost in a transaction', () => {
  let scratch: Awaited<ReturnType<typeof scratchPostgresDatabase>>;
  beforeAll(async () => {
    scratch = await scratchPostgresDatabase(url!);
  });
  afterAll(async () => {
    await scratch?.drop();
  });

  it('fail/the transaction fails with the loss, the process goes on, and the next transaction gets a new connection', async () => {
    const db = await openDatabase({ url: scratch.url, poolSize: 1 });
    const admin = new pg.Client({ connectionString: scratch.url });
    await admin.connect();
    try {
      const pid = async (k: typeof db.kysely) =>
        (await sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`.execute(k)).rows[0]!.pid;
      let lost = 0;
      const attempt = inTransaction(db, async (tx) => {
        lost = await pid(tx.kysely);
        // Between two statements, as a transaction is most of the time.
        await admin.query('SELECT pg_terminate_backend($1)', [lost]);
        // Until the server's goodbye arrives, the connection looks alive.
        for (;;) await sql`SELECT 1`.execute(tx.kysely);
      });
      // In the words of whichever part saw it first: the server's goodbye, the closed socket, pg.
      await expect(attempt).rejects.toThrow(/terminat|ECONNRESET|EPIPE|not queryable/i);
      const next = await inTransaction(db, (tx) => pid(tx.kysely));
      expect(next).not.toBe(lost);
    } finally {
      await admin.end();
      await db.close();
    }
  });

  it('fail/lost after its last statement, before its COMMIT: the COMMIT is not sent, so the failure is certain (CommitNotSent, a 503 to send again), not an unknown outcome; nothing kept', async () => {
    const db = await openDatabase({ url: scratch.url, poolSize: 1 });
    const admin = new pg.Client({ connectionString: scratch.url });
    await admin.connect();
    try {
      await sql`CREATE TABLE kept (k int PRIMARY KEY)`.execute(db.kysely);
      const attempt = inTransaction(db, async (tx) => {
        await sql`INSERT INTO kept VALUES (1)`.execute(tx.kysely);
        const { rows } = await sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`.execute(tx.kysely);
        // A restart while the transaction does other work (signing, say) before it commits.
        await admin.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
        // Until pg has seen the connection end, it still writes; from then on it sends nothing more.
        for (;;) if (notSent(await sql`SELECT 1`.execute(tx.kysely).catch((e: unknown) => e))) break;
        return 'done';
      });
      const e = await attempt.then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(e).toBeInstanceOf(CommitNotSent);
      expect(e).not.toBeInstanceOf(CommitOutcomeUnknown);
      expect(databaseUnavailable(e)).toBe('The database cannot be reached.');
      expect((await admin.query('SELECT count(*)::int AS n FROM kept')).rows[0].n).toBe(0);
    } finally {
      await admin.end();
      await db.close();
    }
  });
});

describe.skipIf(url === undefined || url === '')('a PostgreSQL server that is slow, not gone', () => {
  let scratch: Awaited<ReturnType<typeof scratchPostgresDatabase>>;
  beforeAll(async () => {
    scratch = await scratchPostgresDatabase(url!);
  });
  afterAll(async () => {
    await scratch?.drop();
  });

  it('fail/statements overdue behind a lock: each cancelled on the server, on a connection that stays: no backend left waiting past the pool, and none of the writes answered 503 lands later', async () => {
    const db = await openDatabase({ url: scratch.url, poolSize: 2, queryTimeoutMs: 300 });
    try {
      await expectOverdueWritesCancelled(db, scratch.url);
    } finally {
      await db.close();
    }
  });
});

describe.skipIf(url === undefined || url === '')('a PostgreSQL server behind a path that goes silent', () => {
  let scratch: Awaited<ReturnType<typeof scratchPostgresDatabase>>;
  let relay: TcpRelay;
  beforeAll(async () => {
    scratch = await scratchPostgresDatabase(url!);
    relay = await startTcpRelay(new URL(url!), 5432);
  });
  afterAll(async () => {
    await relay?.close();
    await scratch?.drop();
  });

  it('fail/a query waits at most the connect timeout and fails as unreachable (a 503), not for ever; once the server answers, the next passes', async () => {
    const through = new URL(scratch.url);
    through.host = relay.host;
    // A hung proxy, or a host whose packets are dropped: accepted, and then nothing.
    relay.blackholeNew = true;
    const db = await openDatabase({ url: through.toString(), poolSize: 1, connectTimeoutMs: 2_000 });
    try {
      const e = await sql`SELECT 1 AS one`.execute(db.kysely).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(String(e)).toMatch(/timeout/i);
      expect(databaseUnavailable(e)).toBe('The database cannot be reached.');
      relay.blackholeNew = false;
      expect((await sql<{ one: number }>`SELECT 1 AS one`.execute(db.kysely)).rows).toEqual([{ one: 1 }]);
    } finally {
      await db.close();
    }
  });

  it('fail/the statement fails once its answer is overdue, as the database not answering (a 503), not when TCP gives up; nothing of the transaction kept; the next transaction gets a new connection', async () => {
    const through = new URL(scratch.url);
    through.host = relay.host;
    const db = await openDatabase({ url: through.toString(), poolSize: 1, queryTimeoutMs: 500 });
    const admin = new pg.Client({ connectionString: scratch.url });
    await admin.connect();
    try {
      await sql`CREATE TABLE kept (k int PRIMARY KEY)`.execute(db.kysely);
      const pid = async (k: typeof db.kysely) =>
        (await sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`.execute(k)).rows[0]!.pid;
      let silenced = 0;
      const started = Date.now();
      const e = await inTransaction(db, async (tx) => {
        await sql`INSERT INTO kept VALUES (1)`.execute(tx.kysely);
        silenced = await pid(tx.kysely);
        // A NAT or load balancer forgets the flow: no FIN, no RST, nothing more either way.
        relay.forgetFlows();
        await sql`INSERT INTO kept VALUES (2)`.execute(tx.kysely);
      }).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(Date.now() - started).toBeGreaterThanOrEqual(450);
      expect(String(e)).toMatch(/Query read timeout/);
      expect(e).not.toBeInstanceOf(CommitOutcomeUnknown);
      expect(databaseUnavailable(e)).toBe('The database did not answer in time.');
      expect((await admin.query('SELECT count(*)::int AS n FROM kept')).rows[0].n).toBe(0);
      // The pool dropped the silent connection: the next one is new, and answers.
      expect(await inTransaction(db, (tx) => pid(tx.kysely))).not.toBe(silenced);
    } finally {
      await admin.end();
      await db.close();
    }
  });
  it('fail/a path gone silent under idle connections (a NAT that forgot its flows, a failover): one statement waits out the bound, and the pool closes the others idle since rather than hand each out to wait it out in turn', async () => {
    const through = new URL(scratch.url);
    through.host = relay.host;
    const db = await openDatabase({ url: through.toString(), poolSize: 3, queryTimeoutMs: 500 });
    try {
      const pid = async () =>
        (await sql<{ pid: number }>`SELECT pg_backend_pid() AS pid, pg_sleep(0.2)`.execute(db.kysely)).rows[0]!.pid;
      // Three connections, each used and idle in the pool.
      const idle = new Set(await Promise.all([pid(), pid(), pid()]));
      expect(idle.size).toBe(3);
      relay.forgetFlows();

      const e = await sql`SELECT 1`.execute(db.kysely).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(databaseUnavailable(e)).toBe('The database did not answer in time.');
      // Without the pool's memory of the loss, each of these waited out the bound on an idle connection and failed.
      const next = [await pid(), await pid()];
      for (const p of next) expect(idle.has(p)).toBe(false);
    } finally {
      await db.close();
    }
  });
  it('fail/the connections closed for not heard from are dropped at once, not ended politely: behind a proxy that hangs the goodbye is never answered, and they stayed open', async () => {
    const hung = await startTcpRelay(new URL(scratch.url), 5432, undefined, undefined, { hungProxy: true });
    const through = new URL(scratch.url);
    through.host = hung.host;
    const pool = new pg.Pool({ connectionString: through.toString(), max: 3 });
    pool.on('error', () => undefined);
    const paths = handingOutHeard(pool);
    pool.on('connect', (client) => paths.track(client));
    try {
      const idle = [await pool.connect(), await pool.connect()];
      for (const client of idle) client.release();
      hung.forgetFlows();
      paths.lost(performance.now());
      const fresh = await pool.connect();
      expect(idle).not.toContain(fresh);
      const streams = idle.map(
        (c) => (c as unknown as { connection: { stream: { destroyed: boolean } } }).connection.stream,
      );
      expect(streams.map((s) => s.destroyed)).toEqual([true, true]);
      fresh.release();
    } finally {
      await pool.end();
      await hung.close();
    }
  });
});
