import Database from 'better-sqlite3';
import {
  CompiledQuery,
  Kysely,
  PostgresDialect,
  SqliteDialect,
  sql,
  type Compilable,
  type SqliteDatabase,
} from 'kysely';
import type pg from 'pg';
import { CommitOutcomeUnknown, type TransactOptions } from '../core/index.js';
import { Gathering } from './gathering.js';
import { markedLater } from './later-statements.js';
import { commitStatus, serverRefused, timelineReadable, type TransactionId } from './commit-status.js';
import { isReplannedStatement, sendingLater, statementNames, transactionIdQueries } from './pg-connection.js';
import type { DB } from './schema.js';
import { checkpointsAside } from './sqlite-checkpoints.js';
import { commitMarks, sharedMarks } from './sqlite-commits.js';
import { CANCEL_GRACE_MS, handingOutHeard } from './pg-overdue.js';
import { connectionLost } from './unavailable.js';

export type Dialect = 'sqlite' | 'postgres';

export interface Db {
  readonly kysely: Kysely<DB>;
  readonly dialect: Dialect;
  /** PostgreSQL schema the connections use, when not the default. */
  readonly schema?: string;
  /** PostgreSQL: the server's URL (a process's LISTEN connection opens its own). */
  readonly url?: string;
  /** SQLite: reads run at once on the connection, outside Kysely, when it is idle (fixedQuery). */
  readonly direct?: DirectReads;
  /** A PostgreSQL transaction's: the calls of one statement its units make in one turn, run as one (`Gathering`). */
  readonly gathering?: Gathering;
  /** Closes every connection; the Db is unusable afterwards. */
  close(): Promise<void>;
}

/**
 * SQLite's one connection, read without Kysely's connection lock and promises. `all` gives
 * undefined while a transaction is open on it: a read then would see what that transaction has
 * not committed, so it must wait its turn through Kysely. Only for `kysely` itself, not a
 * transaction's or a plugin's view of it.
 */
export interface DirectReads {
  readonly kysely: Kysely<DB>;
  all<R>(text: string, parameters: readonly unknown[]): R[] | undefined;
  /**
   * A mark of the committed state (`sqlite-commits.ts`): two equal marks, nothing was committed
   * between them, by any process. Undefined when that cannot be told (an in-memory database, a
   * commit being written, a file whose header is not yet recognised): then read. Taken after the
   * call, once for all the calls waiting then (`sharedMarks`).
   */
  commitMark(): Promise<number | undefined>;
}

export interface OpenOptions {
  /** `postgres://…` or `postgresql://…` for PostgreSQL; anything else is a SQLite file path (or `:memory:`). */
  readonly url: string;
  /** PostgreSQL schema to use (created if missing); tests give each suite its own. */
  readonly schema?: string;
  readonly poolSize?: number;
  /** PostgreSQL: named prepared statements (`preparing`); default true. */
  readonly prepared?: boolean;
  /** PostgreSQL: how long a query may wait for a connection, a new one's handshake included (CONNECT_TIMEOUT_MS). */
  readonly connectTimeoutMs?: number;
  /**
   * PostgreSQL: how long the answer to one statement may take before its connection is dropped as
   * lost (QUERY_TIMEOUT_MS); 0 = as long as TCP takes. Migrations run without it (`migrating`).
   */
  readonly queryTimeoutMs?: number;
  /** For migrations (`openMigrated`, `certdesk migrate`): no bound on an answer (the server's: `pg-migrations.ts`). */
  readonly migrating?: boolean;
  /**
   * Called when an idle PostgreSQL connection fails (server restart, network cut). The pool drops
   * that connection and the next query opens a new one; without a listener the process would crash.
   */
  readonly onConnectionError?: (err: Error) => void;
}

/**
 * pg, loaded by the first PostgreSQL database this process opens: a process on SQLite (every CLI
 * command of the default install) never loads it.
 */
async function loadPg(): Promise<typeof pg> {
  const pg = (await import('pg')).default;
  // int8 (bigint) columns hold seconds and minor units, far below 2^53: read them as numbers.
  pg.types.setTypeParser(20, (v) => Number(v));
  return pg;
}

export function isPostgresUrl(url: string): boolean {
  return /^postgres(ql)?:\/\//i.test(url);
}

/** Opens the database named by `url`. Does not migrate (see `migrateToLatest`). */
export async function openDatabase(options: OpenOptions): Promise<Db> {
  if (isPostgresUrl(options.url)) return openPostgres(options);
  return openSqlite(options.url);
}

function openSqlite(file: string): Db {
  const raw = new Database(file);
  // WAL with synchronous=NORMAL: durable across process crashes, ~75x the commit rate of the
  // default journal and a sync per commit, measured here. busy_timeout lets several processes share one file.
  // busy_timeout first: switching a fresh file to WAL takes a lock another process starting at the
  // same moment may hold, and without the timeout that pragma fails at once ("database is locked").
  raw.pragma('busy_timeout = 5000');
  raw.pragma('journal_mode = WAL');
  raw.pragma('synchronous = NORMAL');
  raw.pragma('foreign_keys = ON');
  // 64 MiB of page cache (the default is 2 MiB): indexes on random keys (token hashes, DCV values)
  // are written at random pages; with the small cache recording a certificate cost ~3x more.
  raw.pragma('cache_size = -65536');
  // Statement journals in memory: a statement inside a transaction journals each page it changes
  // (for its own rollback), and past 64 KiB SQLite spilled that journal to a new file in /var/tmp:
  // an order's INSERT (its row and ten index pages) made, wrote and unlinked one per order, and
  // failed where that directory is full or read-only. Migrations spill to a file (migrate.ts).
  raw.pragma('temp_store = MEMORY');
  const commits = commitMarks(raw, file);
  // Checkpoints on a thread of their own (sqlite-checkpoints.ts), not in a commit on the event loop.
  const checkpoints = raw.memory ? undefined : checkpointsAside(raw, file, commits);
  const commitMark = sharedMarks(commits);
  const statements = withStatementCache(raw);
  const kysely = new Kysely<DB>({ dialect: new SqliteDialect({ database: statements }) });
  return {
    kysely,
    dialect: 'sqlite',
    direct: {
      kysely,
      all: <R>(text: string, parameters: readonly unknown[]) =>
        raw.inTransaction ? undefined : (statements.prepare(text).all(parameters) as R[]),
      commitMark,
    },
    // The connection first: the marks' descriptor of the -shm file may close only after it.
    close: async () => {
      await checkpoints?.close();
      await kysely.destroy();
      commits.close();
    },
  };
}

/**
 * Kysely prepares every query anew; better-sqlite3 statements can be reused, and preparing is a
 * tenth of a cheap query's cost. Kysely emits a bounded set of SQL texts (parameters are bound),
 * so an LRU of a few hundred statements holds them all. (Statements are never iterated twice at
 * once: Kysely iterates only for `stream()`, which certdesk does not use.)
 */
function withStatementCache(
  raw: Database.Database,
  size = 500,
): SqliteDatabase & { prepare(text: string): Database.Statement } {
  const statements = new Map<string, Database.Statement>();
  return {
    close: () => raw.close(),
    prepare(text: string) {
      let statement = statements.get(text);
      if (statement === undefined) {
        statement = raw.prepare(text);
        if (statements.size >= size) statements.delete(statements.keys().next().value as string);
        statements.set(text, statement);
      }
      return statement;
    },
  };
}

/** How long a PostgreSQL connection nobody uses stays open. */
export const IDLE_CONNECTION_MS = 5 * 60_000;
/** How long a PostgreSQL connection is idle before TCP keepalive probes start. */
export const KEEPALIVE_AFTER_MS = 60_000;
/**
 * How long a query waits for a pooled connection, making a new one included: a server whose
 * packets are dropped (a host down behind a firewall) or that accepts and never answers (a hung
 * proxy) held each request for minutes, until the kernel gave up on the handshake, or for ever.
 */
export const CONNECT_TIMEOUT_MS = 10_000;
/**
 * How long the answer to one statement may take once it was written: past it the statement is
 * cancelled on the server, and past a grace more the connection taken for lost and destroyed
 * (`pg-overdue.ts`). A path cut silently after the statement left (no FIN, no RST; keepalive does
 * not probe while data waits for its acknowledgement) held the request until TCP gave up, ~15
 * min, or for ever behind a proxy that stopped answering. Far above what any statement of the
 * service takes (a CRL of 100,000 entries is read in well under a second).
 */
export const QUERY_TIMEOUT_MS = 30_000;

async function openPostgres(options: OpenOptions): Promise<Db> {
  const schema = options.schema;
  if (schema !== undefined && !/^[a-z_][a-z0-9_]{0,62}$/.test(schema)) throw new Error(`bad schema name ${schema}`);
  const pg = await loadPg();
  if (schema !== undefined) {
    const admin = new pg.Client({ connectionString: options.url });
    await admin.connect();
    try {
      await admin.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
    } finally {
      await admin.end();
    }
  }
  const bound = options.migrating === true ? 0 : (options.queryTimeoutMs ?? QUERY_TIMEOUT_MS);
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.poolSize ?? 10,
    // A new connection costs a handshake and preparing each statement again (`preparing`): pg's
    // default (10 s idle) made bursts a minute apart pay both. Idle, it keeps no process alive.
    idleTimeoutMillis: IDLE_CONNECTION_MS,
    allowExitOnIdle: true,
    // Then it fails as unreachable: a 503 for the caller (unavailable.ts), not a request held.
    connectionTimeoutMillis: options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS,
    // Past the bound cancelled on the server, past the grace dropped (pg reads 0 as none).
    query_timeout: bound === 0 ? 0 : bound + CANCEL_GRACE_MS,
    // Kept that long, a connection outlives the idle timeouts of NATs and load balancers between
    // process and database (Azure's 4 min, AWS's 350 s), which drop a flow without a word: TCP
    // keepalive probes from a minute idle keep such a path open, and find one that was cut.
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_AFTER_MS,
    // Statements written without waiting for the answers before them (`sendingLater`).
    pipeline: true,
    ...(schema === undefined ? {} : { options: `-c search_path="${schema}"` }),
  });
  pool.on('error', options.onConnectionError ?? (() => undefined));
  const paths = handingOutHeard(pool); // none idle since a path was found silent
  pool.on('connect', (client) => {
    sendingLater(client, options.prepared !== false ? statementNames : undefined, bound, paths);
    // A connection lost while in use (a restart, a failover, a cut network): its statements fail
    // and their callers see it, and the pool drops it when it comes back. pg also emits 'error' on
    // the client, which the pool listens to only while the client is idle: unheard, it would end
    // the process.
    client.on('error', () => undefined);
  });
  const kysely = new Kysely<DB>({
    dialect: new PostgresDialect({ pool }),
  });
  return {
    kysely,
    dialect: 'postgres',
    url: options.url,
    ...(schema === undefined ? {} : { schema }),
    close: () => kysely.destroy(),
  };
}

/**
 * A write whose result nobody reads (an audit row, a ledger line, a queued job). In a PostgreSQL
 * transaction it is held and sent with the transaction's next statement or its commit, several
 * held writes as one statement: a transaction pays one round trip for them, not one each (on the
 * inline order path, about a third of its statements). Anything the transaction runs afterwards
 * sees it. Outside a transaction, and on SQLite, it runs at once.
 */
export async function writeLater(db: Db, table: keyof DB & string, query: CompiledQuery): Promise<void> {
  if (db.dialect !== 'postgres') {
    await db.kysely.executeQuery(query);
    return;
  }
  await db.kysely.executeQuery(markedLater(table, query));
}

/**
 * How often a transaction PostgreSQL chose as a deadlock's victim, or failed for a serialization
 * conflict, is run again from the start: the conflicting transaction commits or rolls back
 * meanwhile, so a second run rarely meets it again.
 */
const CONFLICT_RERUNS = 3;

/** PostgreSQL's deadlock victim (40P01) and serialization failure (40001): nothing of the transaction was kept. */
function isConflict(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return code === '40P01' || code === '40001';
}

/**
 * Runs `fn` in one transaction. The Db it is given writes through the transaction, so
 * repositories built on it join it: all their changes commit together or not at all.
 *
 * A transaction that failed only because of another one (a deadlock PostgreSQL broke by aborting
 * this one, a serialization conflict) or a prepared statement a schema change invalidated has
 * rolled back whole: it is run again from the start, after a short random pause on a conflict so
 * that the two do not meet again in step. So `fn` must have no effect outside the transaction that
 * a second run would repeat (outbox rows, not mail; values reset, not accumulated).
 *
 * A COMMIT whose answer is lost (the connection dropped after it was sent) leaves the outcome to
 * the server. With `settleLostCommit`, on PostgreSQL, the transaction also reads its id, and such
 * a failure is followed by asking the server (`commitStatus`): if it committed, `fn`'s result is
 * returned as if the answer had come. Without it, such a failure is `CommitOutcomeUnknown`
 * whatever the server did (SQLite's COMMIT has no connection to lose: a failed one rolled back).
 */
export async function inTransaction<T>(db: Db, fn: (tx: Db) => Promise<T>, options: TransactOptions = {}): Promise<T> {
  const settling = options.settleLostCommit === true && db.dialect === 'postgres';
  const run = async () => {
    let ours: TransactionId | undefined;
    let result: { value: T } | undefined;
    // Asked through the pool before the transaction takes a connection of it (once per Db).
    const ask = settling
      ? (await timelineReadable(db))
        ? transactionIdQueries.ask
        : transactionIdQueries.askWithoutTimeline
      : undefined;
    try {
      return await db.kysely.transaction().execute(async (trx) => {
        const tx: Db = { ...db, kysely: trx, ...(db.dialect === 'postgres' ? { gathering: new Gathering() } : {}) };
        // Read with the BEGIN (`transactionIdQueries`): no round trip of its own.
        if (ask !== undefined) await trx.executeQuery(ask);
        const value = await fn(tx);
        if (ask !== undefined) [ours] = (await trx.executeQuery<TransactionId>(transactionIdQueries.read)).rows;
        result = { value };
        return value;
      });
    } catch (e) {
      // The work was done and the COMMIT failed: if its answer was lost, the server may have kept it.
      if (result === undefined || serverRefused(e)) throw e;
      if (ours !== undefined) {
        if ((await commitStatus(await loadPg(), db, ours, e)) === 'committed') return result.value;
        throw e;
      }
      // Not settled: the connection went with the COMMIT, and whether it was kept cannot be told.
      if (db.dialect === 'postgres' && connectionLost(e)) throw new CommitOutcomeUnknown(e);
      throw e;
    }
  };
  let replanned = false;
  for (let conflicts = 0; ;) {
    try {
      return await run();
    } catch (e) {
      // A prepared statement a schema change invalidated failed the transaction, and was renamed
      // (`preparing`): it is run once more from the start.
      if (isReplannedStatement(e) && !replanned) {
        replanned = true;
        continue;
      }
      if (!isConflict(e) || conflicts >= CONFLICT_RERUNS) throw e;
      conflicts++;
      await new Promise((resolve) => setTimeout(resolve, Math.floor(Math.random() * 20 * conflicts)));
    }
  }
}

/** Cheap liveness probe for /readyz: resolves when the database answers. */
export async function pingDatabase(db: Db): Promise<void> {
  await sql`select 1`.execute(db.kysely);
}

/**
 * A hot query whose SQL does not depend on its arguments, compiled once per database and then
 * run with each call's arguments as its parameters, in the order the builder uses them (checked
 * when it is first compiled). Kysely builds and compiles every query anew, which on the hottest
 * point reads (GET /Order: the order, its names, its certificate, its scan) cost more than the
 * database's own work (profiled with BENCH_PROFILE=1). A transaction is a database of its own
 * here: its queries are compiled once per transaction, as before. On SQLite, outside a
 * transaction, the statement runs directly on the connection (`Db.direct`).
 */
export function fixedQuery<A extends readonly unknown[], R>(
  build: (db: Kysely<DB>, ...args: A) => Compilable<R>,
): (db: Db, ...args: A) => Promise<R[]> {
  const compiled = new WeakMap<Kysely<DB>, CompiledQuery<R>>();
  return async (db, ...args) => {
    const known = compiled.get(db.kysely);
    if (known !== undefined) {
      // SQLite outside a transaction: the statement at once (Kysely's lock and promises cost as
      // much as a point read itself); in one, or on PostgreSQL, through Kysely.
      const rows = db.direct?.kysely === db.kysely ? db.direct.all<R>(known.sql, args) : undefined;
      return rows ?? (await db.kysely.executeQuery<R>({ ...known, parameters: args })).rows;
    }
    const query = build(db.kysely, ...args).compile();
    if (query.parameters.length !== args.length || query.parameters.some((p, i) => p !== args[i]))
      throw new Error(`fixedQuery: the parameters of "${query.sql}" are not its arguments, in order`);
    compiled.set(db.kysely, query);
    return (await db.kysely.executeQuery(query)).rows;
  };
}

/**
 * Many rows into `table` in one statement (at least one row), the columns named once: a column a
 * row lacks is NULL. For batches on hot paths (the CA's certificates and audit events): Kysely's
 * builder parses every value of a multi-row INSERT, about a tenth of recording a signed
 * certificate (profiled).
 */
export function rowsInsert<T extends keyof DB & string>(
  db: Db,
  table: T,
  columns: readonly (keyof DB[T] & string)[],
  rows: readonly Partial<Record<keyof DB[T] & string, unknown>>[],
): CompiledQuery {
  const parameters: unknown[] = [];
  const tuples: string[] = [];
  for (const row of rows) {
    const marks: string[] = [];
    for (const column of columns) {
      parameters.push(row[column] ?? null);
      marks.push(db.dialect === 'postgres' ? `$${parameters.length}` : '?');
    }
    tuples.push(`(${marks.join(', ')})`);
  }
  const names = columns.map((c) => `"${c}"`).join(', ');
  return CompiledQuery.raw(`insert into "${table}" (${names}) values ${tuples.join(', ')}`, parameters);
}
