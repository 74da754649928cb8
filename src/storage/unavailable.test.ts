// Which real failures of the drivers count as the database being unavailable (a 503 for the
// caller, envelope.ts) and which are a fault of the statement or the data (never retried as
// such): each error here is made by the real server or library, not written by hand.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scratchPostgresDatabase } from '../../test/support/databases.js';
import { inTransaction, openDatabase } from './database.js';
import { databaseUnavailable } from './unavailable.js';

const url = process.env.CERTDESK_TEST_DATABASE_URL;
if (url === undefined || url === '')
  console.warn('PostgreSQL failures not classified here: CERTDESK_TEST_DATABASE_URL is not set');

const failureOf = async (run: () => Promise<unknown>): Promise<unknown> => {
  try {
    await run();
  } catch (e) {
    return e;
  }
  throw new Error('expected a failure');
};

const thrown = (run: () => unknown): unknown => {
  try {
    run();
  } catch (e) {
    return e;
  }
  throw new Error('expected a failure');
};

describe.skipIf(url === undefined || url === '')('PostgreSQL failures', () => {
  let scratch: Awaited<ReturnType<typeof scratchPostgresDatabase>>;
  beforeAll(async () => {
    scratch = await scratchPostgresDatabase(url!);
  });
  afterAll(async () => scratch?.drop());

  it('fail/no server listening (ECONNREFUSED): cannot be reached', async () => {
    // The discard port: nothing listens there on loopback.
    const gone = new URL(scratch.url);
    gone.host = '127.0.0.1:9';
    const db = await openDatabase({ url: gone.toString(), poolSize: 1 });
    try {
      const e = await failureOf(() => sql`SELECT 1`.execute(db.kysely));
      expect(databaseUnavailable(e)).toBe('The database cannot be reached.');
    } finally {
      await db.close();
    }
  });

  it('fail/a connection ended by the server (57P01) and one refused for too many connections (53300): cannot be reached', async () => {
    const admin = new pg.Client({ connectionString: scratch.url });
    await admin.connect();
    const role = `cdt_limited_${process.pid}_${Date.now()}`;
    try {
      const victim = new pg.Client({ connectionString: scratch.url });
      victim.on('error', () => undefined);
      await victim.connect();
      const pid = (await victim.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      await admin.query('SELECT pg_terminate_backend($1)', [pid]);
      const ended = await failureOf(async () => {
        for (;;) await victim.query('SELECT 1');
      });
      expect(databaseUnavailable(ended), String(ended)).toBe('The database cannot be reached.');
      await victim.end().catch(() => undefined);

      await admin.query(`CREATE ROLE ${role} LOGIN CONNECTION LIMIT 0`);
      const limited = new URL(scratch.url);
      limited.username = role;
      const refused = new pg.Client({ connectionString: limited.toString() });
      const e = await failureOf(() => refused.connect());
      expect((e as { code?: string }).code).toBe('53300');
      expect(databaseUnavailable(e)).toBe('The database cannot be reached.');
    } finally {
      await admin.query(`DROP ROLE IF EXISTS ${role}`);
      await admin.end();
    }
  });

  it('fail/every pooled connection busy past the connect timeout: busy, not unreachable', async () => {
    const db = await openDatabase({ url: scratch.url, poolSize: 1, connectTimeoutMs: 300 });
    try {
      let release = () => undefined as void;
      const held = new Promise<void>((resolve) => (release = resolve));
      let started = () => undefined as void;
      const holding = new Promise<void>((resolve) => (started = resolve));
      const holder = inTransaction(db, async (tx) => {
        await sql`SELECT 1`.execute(tx.kysely);
        started();
        await held;
      });
      await holding;
      const e = await failureOf(() => sql`SELECT 1`.execute(db.kysely));
      release();
      await holder;
      expect(databaseUnavailable(e), String(e)).toBe('The database is busy.');
    } finally {
      await db.close();
    }
  });

  it('fail/no answer in time: the bound on an answer (the statement cancelled on the server, the connection kept), statement_timeout (57014), lock_timeout (55P03): did not answer in time', async () => {
    const db = await openDatabase({ url: scratch.url, poolSize: 1, queryTimeoutMs: 300 });
    const admin = new pg.Client({ connectionString: scratch.url });
    await admin.connect();
    try {
      const pid = async () =>
        (await sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`.execute(db.kysely)).rows[0]!.pid;
      const first = await pid();
      const started = Date.now();
      const late = await failureOf(() => sql`SELECT pg_sleep(5)`.execute(db.kysely));
      expect((late as { code?: string }).code).toBe('57014');
      expect(Date.now() - started).toBeLessThan(4_000);
      expect(databaseUnavailable(late), String(late)).toBe('The database did not answer in time.');
      expect(await pid()).toBe(first);

      const cancelled = await failureOf(() =>
        inTransaction(db, async (tx) => {
          await sql`SET LOCAL statement_timeout = 50`.execute(tx.kysely);
          await sql`SELECT pg_sleep(0.25)`.execute(tx.kysely);
        }),
      );
      expect((cancelled as { code?: string }).code).toBe('57014');
      expect(databaseUnavailable(cancelled)).toBe('The database did not answer in time.');

      await sql`CREATE TABLE locked (k int PRIMARY KEY)`.execute(db.kysely);
      await sql`INSERT INTO locked VALUES (1)`.execute(db.kysely);
      await admin.query('BEGIN');
      await admin.query('SELECT k FROM locked FOR UPDATE');
      const waited = await failureOf(() =>
        inTransaction(db, async (tx) => {
          await sql`SET LOCAL lock_timeout = 50`.execute(tx.kysely);
          await sql`SELECT k FROM locked FOR UPDATE`.execute(tx.kysely);
        }),
      );
      await admin.query('ROLLBACK');
      expect((waited as { code?: string }).code).toBe('55P03');
      expect(databaseUnavailable(waited)).toBe('The database did not answer in time.');
    } finally {
      await admin.end();
      await db.close();
    }
  });

  it('ok/a statement the server refused (a unique key, bad SQL, a NUL, too many parameters): not unavailable', async () => {
    const db = await openDatabase({ url: scratch.url, poolSize: 1 });
    try {
      await sql`CREATE TABLE t (k int PRIMARY KEY, v text)`.execute(db.kysely);
      await sql`INSERT INTO t VALUES (1, 'a')`.execute(db.kysely);
      // The last, more parameters than a statement may have: 08P01, answered on a connection that still works.
      const tooMany = Array.from({ length: 70_000 }, (_, i) => i);
      for (const statement of [
        sql`INSERT INTO t VALUES (1, 'b')`,
        sql`SELEC 1`,
        sql`INSERT INTO t VALUES (2, ${'a\0b'})`,
        sql`SELECT k FROM t WHERE k IN (${sql.join(tooMany)})`,
      ]) {
        const e = await failureOf(() => statement.execute(db.kysely));
        expect(databaseUnavailable(e), String(e)).toBeUndefined();
      }
      expect((await sql<{ k: number }>`SELECT k FROM t`.execute(db.kysely)).rows).toEqual([{ k: 1 }]);
    } finally {
      await db.close();
    }
  });
});

describe('SQLite failures', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'certdesk-unavailable-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('fail/the file locked by another connection (SQLITE_BUSY): busy; a constraint: not unavailable', () => {
    const file = join(dir, 'busy.db');
    const holder = new Database(file);
    holder.pragma('journal_mode = WAL');
    holder.exec('CREATE TABLE t (k INTEGER PRIMARY KEY)');
    holder.exec('INSERT INTO t VALUES (1)');
    const waiting = new Database(file, { timeout: 0 });
    try {
      holder.exec('BEGIN IMMEDIATE');
      const busy = thrown(() => waiting.exec('INSERT INTO t VALUES (2)'));
      expect((busy as { code?: string }).code).toBe('SQLITE_BUSY');
      expect(databaseUnavailable(busy)).toBe('The database is busy.');
      holder.exec('ROLLBACK');
      const constraint = thrown(() => waiting.exec('INSERT INTO t VALUES (1)'));
      expect((constraint as { code?: string }).code).toMatch(/^SQLITE_CONSTRAINT/);
      expect(databaseUnavailable(constraint)).toBeUndefined();
    } finally {
      waiting.close();
      holder.close();
    }
  });

  it('ok/an error of certdesk or of JavaScript: not unavailable; inside an AggregateError, as its part says', () => {
    expect(databaseUnavailable(new TypeError('x is undefined'))).toBeUndefined();
    expect(databaseUnavailable(undefined)).toBeUndefined();
    const busy = Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
    expect(databaseUnavailable(new AggregateError([new Error('first'), busy]))).toBe('The database is busy.');
  });
});
