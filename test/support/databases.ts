import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { sql } from 'kysely';
import pg from 'pg';
import { inject } from 'vitest';
import { migrateToLatest, openDatabase, type Db, type Dialect, type OpenOptions } from '../../src/storage/index.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** A migrated PostgreSQL database made by the global setup, copied for each test's database. */
    pgTemplate: string | undefined;
  }
}

export interface TestDialect {
  readonly dialect: Dialect;
  /** A fresh, migrated, empty database (a new SQLite file in memory, or a new PostgreSQL database). */
  open(): Promise<Db>;
}

const pgUrl = process.env.CERTDESK_TEST_DATABASE_URL;
let warned = false;

/**
 * The dialects every storage test runs on (Kysely's DIALECTS pattern): SQLite always,
 * PostgreSQL when CERTDESK_TEST_DATABASE_URL is set (CI sets it; without it the reason is printed).
 */
export function testDialects(): TestDialect[] {
  const list: TestDialect[] = [{ dialect: 'sqlite', open: openSqlite }];
  if (pgUrl !== undefined && pgUrl !== '') list.push({ dialect: 'postgres', open: () => openPostgres(pgUrl) });
  else if (!warned) {
    warned = true;
    console.warn('PostgreSQL variants not run: CERTDESK_TEST_DATABASE_URL is not set');
  }
  return list;
}

/**
 * SQLite in a file of its own, as a service runs it, for tests in which a second connection or
 * another process shares the database: `file()` names the one opened last. Closing the Db removes it.
 */
export function sqliteFile(): TestDialect & { file(): string } {
  let last: string | undefined;
  return {
    dialect: 'sqlite',
    file: () => {
      if (last === undefined) throw new Error('sqliteFile: nothing opened yet');
      return last;
    },
    async open() {
      const file = join(mkdtempSync(join(tmpdir(), 'certdesk-sqlite-')), 'certdesk.db');
      last = file;
      const db = await openDatabase({ url: file });
      await migrateToLatest(db);
      return {
        ...db,
        close: async () => {
          await db.close();
          rmSync(dirname(file), { recursive: true, force: true });
        },
      };
    },
  };
}

async function openSqlite(): Promise<Db> {
  const db = await openDatabase({ url: ':memory:' });
  await migrateToLatest(db);
  return db;
}

/**
 * A new, empty PostgreSQL database on the server of `adminUrl` (named `<prefix>_<random>`), and a
 * `drop` that removes it. pg's Pool.end() resolves once it has asked each connection to close,
 * not once they have: dropping with FORCE while one is still closing kills it with an error nobody
 * listens to, so `drop` waits (briefly) for the server to see them gone first.
 */
export async function scratchPostgresDatabase(
  adminUrl: string,
  prefix = 'cdt',
  template?: string,
): Promise<{ name: string; url: string; unused: () => Promise<void>; drop: () => Promise<void> }> {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  const admin = async <R>(fn: (client: pg.Client) => Promise<R>): Promise<R> => {
    const client = new pg.Client({ connectionString: adminUrl });
    await client.connect();
    try {
      return await fn(client);
    } finally {
      await client.end();
    }
  };
  const unusedBy = async (c: pg.Client) => {
    for (let i = 0; i < 100; i++) {
      const { rows } = await c.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1',
        [name],
      );
      if (rows[0]?.n === 0) break;
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  await admin((c) => c.query(`CREATE DATABASE "${name}"${template === undefined ? '' : ` TEMPLATE "${template}"`}`));
  const own = new URL(adminUrl);
  own.pathname = `/${name}`;
  return {
    name,
    url: own.toString(),
    unused: () => admin(unusedBy),
    drop: () =>
      admin(async (c) => {
        await unusedBy(c);
        await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      }),
  };
}

/**
 * A migrated database for `openPostgres` to copy (CREATE DATABASE … TEMPLATE): ~90 ms a test
 * database instead of ~310 ms for creating one and running every migration in it. Made once per
 * run by the global setup; connections to it are then refused, as a template must have none.
 */
export async function migratedPostgresTemplate(adminUrl: string): Promise<{ name: string; drop: () => Promise<void> }> {
  const template = await scratchPostgresDatabase(adminUrl, 'cdt_template');
  try {
    const db = await openDatabase({ url: template.url, poolSize: 1 });
    try {
      await migrateToLatest(db);
    } finally {
      await db.close();
    }
    await template.unused();
    const admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
    try {
      await admin.query(`ALTER DATABASE "${template.name}" WITH ALLOW_CONNECTIONS false`);
    } finally {
      await admin.end();
    }
  } catch (e) {
    await template.drop();
    throw e;
  }
  return { name: template.name, drop: template.drop };
}

/**
 * A fresh database per call, dropped on close. (Schemas in one shared database are not enough:
 * Kysely's migrator introspects every schema it can see, and fails when a parallel test file
 * drops its own schema in the middle of that scan.)
 */
/**
 * A fresh, migrated PostgreSQL database on the server of `url`. `host`: where the service's
 * connections go instead of that server (`host:port` of a relay to it, `tcp-relay.ts`).
 */
export async function openPostgres(
  url: string,
  host?: string,
  options: Pick<OpenOptions, 'queryTimeoutMs' | 'connectTimeoutMs'> = {},
): Promise<Db> {
  // The global setup's migrated template when there is one (a run without it migrates each).
  const template = inject('pgTemplate');
  const scratch = await scratchPostgresDatabase(url, 'cdt', template);
  const connectTo = new URL(scratch.url);
  if (host !== undefined) connectTo.host = host;
  const db = await openDatabase({ url: connectTo.toString(), poolSize: 5, ...options });
  const close = async () => {
    await db.close();
    await scratch.drop();
  };
  try {
    if (template === undefined) await migrateToLatest(db);
  } catch (e) {
    await close();
    throw e;
  }
  return { ...db, close };
}

/**
 * Waits (up to 30 s) until some session of `db`'s PostgreSQL server waits for a lock held by the
 * backend `pid`: a statement sent on another connection has reached the lock it must wait for.
 */
export async function waitUntilBlockedBy(db: Db, pid: number): Promise<void> {
  for (let i = 0; i < 600; i++) {
    const { rows } = await sql<{
      pid: number;
    }>`SELECT pid FROM pg_stat_activity WHERE ${pid} = ANY(pg_blocking_pids(pid))`.execute(db.kysely);
    if (rows.length > 0) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`nothing waited for backend ${pid} within 30 s`);
}
