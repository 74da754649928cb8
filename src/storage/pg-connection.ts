// The PostgreSQL connection under Kysely: statements named and prepared once per connection
// (`preparing`), and writes held for later sent with a transaction's next statement
// (`sendingLater`, storage `writeLater`; how they fold: later-statements.ts). Installed on each
// pool connection by `openDatabase`.
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import { CompiledQuery } from 'kysely';
import type pg from 'pg';
import {
  carriesHeld,
  heldStatements,
  LATER,
  lastUnfoldable,
  laterWritesStatement,
  type LaterWrite,
} from './later-statements.js';
import { memoised } from './memo.js';
import { answeredInTime, type SilentPaths } from './pg-overdue.js';
import { CommitNotSent, connectionLost, notSent } from './unavailable.js';

/**
 * Statements are named by a hash of their text (with a generation, bumped when a schema change
 * invalidates one): the same name means the same SQL in every process, so a pooler that hands one
 * server connection to several processes can never run another text under a name. Not named:
 * anything but a query or DML, statements with more than 64 parameters (batches of varying size),
 * and LIKE searches, which PostgreSQL must plan for each pattern (its literal start picks the
 * index range).
 */

class StatementNames {
  /** text → name, a memo of the hashes (cleared when full: it only saves hashing). */
  private readonly memo = new Map<string, string | null>();
  /** Texts renamed after a schema change, with their generation. */
  private readonly generations = new Map<string, number>();

  nameOf(text: string, parameters: number): string | undefined {
    if (parameters > 64) return undefined;
    const name = memoised(
      this.memo,
      text,
      () =>
        /^\s*(select|insert|update|delete|with)\b/i.test(text) && !/\blike\b/i.test(text)
          ? `certdesk_${createHash('sha256')
              .update(`${this.generations.get(text) ?? 0}:${text}`)
              .digest('base64url')
              .slice(0, 32)}`
          : null,
      10_000,
    );
    return name ?? undefined;
  }

  /** Gives `text` a new name: every connection parses it again on its next run. */
  rename(text: string): void {
    this.generations.set(text, (this.generations.get(text) ?? 0) + 1);
    this.memo.delete(text);
  }
}

export const statementNames = new StatementNames();

/** PostgreSQL's refusal to run a prepared statement whose result a schema change altered. */
export function isReplannedStatement(e: unknown): boolean {
  return (e as { code?: string }).code === '0A000' && /cached plan must not change result type/.test(String(e));
}
/** Prepared statements kept per connection: past this many, new texts run unnamed on it (until the pool replaces it). */
const MAX_PREPARED_PER_CONNECTION = 500;

/** A PostgreSQL connection's `query`, as pg gives it. */
export type Query = (...args: unknown[]) => Promise<pg.QueryResult>;
/**
 * Sends one statement of Kysely's call shape: its text and its values. `outside`: written outside
 * any transaction (decided when it is written: with pipelining, pg's view of the transaction may
 * already include what was written behind it when the answer comes).
 */
type Send = (text: string, values: unknown[], outside: boolean) => Promise<pg.QueryResult>;

/**
 * Runs the statements Kysely sends on `client` as named prepared statements, each parsed once
 * per connection. PostgreSQL parses and plans an unnamed statement on every execution: on the
 * inline order path that was a fifth of the throughput (bench `orderInlinePg`, ~390 → ~480
 * orders/s). PostgreSQL re-plans a prepared statement whose tables changed by itself; a schema
 * change that alters what a statement returns (a column added under `select *`, by a newer
 * version's migration) fails its next run with "cached plan must not change result type". The
 * text then gets a new name, and a run outside a transaction is retried at once; inside one, the
 * transaction has failed: `inTransaction` runs it again once.
 */
function preparing(client: pg.PoolClient, query: Query, names: StatementNames): Send {
  const prepared = new Set<string>();
  const run = async (text: string, values: unknown[], name: string, outside: boolean) => {
    try {
      const result = await query({ name, text, values });
      prepared.add(name);
      return result;
    } catch (e) {
      if (!isReplannedStatement(e)) throw e;
      names.rename(text);
      if (!outside) throw e;
      return query(text, values);
    }
  };
  return (text, values, outside) => {
    const name = names.nameOf(text, values.length);
    if (name === undefined || (!prepared.has(name) && prepared.size >= MAX_PREPARED_PER_CONNECTION))
      return query(text, values);
    return run(text, values, name, outside);
  };
}

/** pg's view of the connection's transaction: 'I' idle, 'T' in one, 'E' in a failed one. */
function transactionStatus(client: pg.PoolClient): string | null | undefined {
  return (client as unknown as { getTransactionStatus?: () => string | null }).getTransactionStatus?.();
}

/**
 * pg's own encoding of a parameter (what it does to each value as it writes a statement), loaded
 * at first use: a process on SQLite never loads pg (database.ts).
 */
let pgPrepareValue: ((value: unknown) => unknown) | undefined;
const prepareValue = (value: unknown): unknown =>
  (pgPrepareValue ??= (createRequire(import.meta.url)('pg/lib/utils.js') as { prepareValue(value: unknown): unknown })
    .prepareValue)(value);

/**
 * A transaction's id and backend, read with its BEGIN (`inTransaction` with `settleLostCommit`):
 * `ask` as its first statement is answered on this side and has the held BEGIN go with the id's
 * SELECT; `read` is answered on this side with that SELECT's row (none when nothing was sent).
 * No round trip of their own, but for a transaction that holds writes and has sent nothing else:
 * its BEGIN, id and writes would go with its COMMIT, the id's answer lost with the COMMIT's, so
 * `read` sends them first. `ask` reads the server's timeline too (`TIMELINE`), which tells a
 * promoted standby, which may give the same ids to other transactions, from the server that gave
 * this one; `askWithoutTimeline` is for servers that refuse to tell it (some managed services).
 */
export const transactionIdQueries = {
  ask: CompiledQuery.raw('/* transaction id: ask */'),
  askWithoutTimeline: CompiledQuery.raw('/* transaction id: ask, no timeline */'),
  read: CompiledQuery.raw('/* transaction id: read */'),
};
/** The timeline of the server's WAL, from its file names (a standby's promotion starts a new one). */
export const TIMELINE = 'substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8)';
const transactionIdQuery = (timeline: boolean) =>
  `SELECT txid_current()::text AS xid, pg_backend_pid() AS pid, ${timeline ? TIMELINE : 'NULL::text'} AS timeline`;

/** A COMMIT PostgreSQL answered with ROLLBACK (the transaction had failed): nothing of it was kept. */
export class NotCommitted extends Error {
  constructor(command: string | null) {
    super(`the transaction was not committed (${command})`);
    this.name = 'NotCommitted';
  }
}

/** What a write held for later answers at once: nothing (its caller reads nothing). */
const HELD: pg.QueryResult = { command: 'INSERT', rowCount: 0, rows: [], fields: [], oid: 0 };

/** What a statement held back answers at once: nothing was sent yet, and its caller reads nothing. */
const answered = (command: string): pg.QueryResult => ({ command, rowCount: null, rows: [], fields: [], oid: 0 });

/**
 * Installs `client.query` for Kysely's call shape (text and values; every other use of the client
 * passes through untouched): statements go through `names` (`preparing`) when given, and a
 * transaction's round trips are cut in three ways (the client runs in pg's pipeline mode, which
 * writes a statement without waiting for the answers before it):
 * - its BEGIN is held and goes in one write with its first statement, or with its COMMIT; a
 *   transaction that sends nothing sends neither;
 * - writes marked by `writeLater` are held and go in one write with the transaction's next
 *   statement or its COMMIT: folded into as few statements as they can be without meeting
 *   (`heldStatements`), the last of them in that statement itself when it is an INSERT they
 *   cannot meet (`carriesHeld`);
 * - what goes in one write is answered in order, and the caller's statement is answered with the
 *   first failure among them: PostgreSQL runs nothing of the transaction after it (a COMMIT after
 *   it rolls back), so the transaction rolls back whole. A held value pg refuses on this side
 *   (`takeHeld`) fails every later statement of the transaction too, its COMMIT included.
 * A held write never outlives its transaction: a rollback drops it, and so does a rollback to a
 * savepoint (everything held before the SAVEPOINT went with it). A write of a transaction's
 * that its caller did not await before the commit would be held past it, and dropped by the
 * connection's next BEGIN: the callers await each write.
 */
export function sendingLater(
  client: pg.PoolClient,
  names: StatementNames | undefined,
  cancelAfterMs = 0,
  paths?: SilentPaths,
): void {
  const stream = (
    client as unknown as { connection?: { stream?: { cork?(): void; uncork?(): void; destroyed?: boolean } } }
  ).connection?.stream;
  const query = answeredInTime(client, client.query.bind(client) as Query, stream, cancelAfterMs, paths);
  const send: Send = names === undefined ? (text, values) => query(text, values) : preparing(client, query, names);
  /** A BEGIN not sent yet: the transaction has sent nothing so far. */
  let begin: string | undefined;
  let held: LaterWrite[] = [];
  /** Why the transaction failed on this side (a held value pg refuses): every statement until its ROLLBACK fails with it. */
  let refused: Error | undefined;
  /** The SELECT of the transaction's id, asked for to go with its BEGIN; its row once sent. */
  let idAsked: string | undefined;
  let idRow: Promise<unknown> | undefined;
  const readId = (answer: Promise<pg.QueryResult>) => {
    idRow = answer.then((r) => r.rows[0]);
    idRow.catch(() => undefined);
    return answer;
  };
  const transacting = () => begin !== undefined || transactionStatus(client) !== 'I';

  /**
   * The held writes, their values encoded as pg will write them, and no longer held. A value pg
   * refuses fails the transaction here, before anything of it is written: refused on this side
   * alone, nothing would fail on the server, and a COMMIT written behind it would commit the rest.
   */
  const takeHeld = (): LaterWrite[] | Error => {
    try {
      const writes = held.map((w) => ({ ...w, values: w.values.map((v) => prepareValue(v)) }));
      held = [];
      return writes;
    } catch (e) {
      refused = e instanceof Error ? e : new Error(String(e));
      return refused;
    }
  };

  /**
   * The held BEGIN, the statements of the held writes (`heldStatements`) and then the caller's
   * statement `last`, in one write: answered with `last`'s result, or the first failure among them
   * (the ones after it fail for it, and are not reported). `last` given as `carrier` (an INSERT
   * that `carriesHeld`) carries the foldable writes held last in its own statement.
   */
  const withHeld = (
    last: ((outside: boolean) => Promise<pg.QueryResult>) | { readonly carrier: { text: string; values: unknown[] } },
  ): Promise<pg.QueryResult> => {
    const outside = !transacting();
    const parts: (() => Promise<pg.QueryResult>)[] = [];
    if (begin !== undefined) {
      const text = begin;
      parts.push(() => query(text));
      const asked = idAsked;
      if (asked !== undefined) parts.push(() => readId(query(asked, [])));
      idAsked = undefined;
    }
    const writes = takeHeld();
    if (writes instanceof Error) return Promise.reject(writes);
    let before = writes;
    let sendLast: (outside: boolean) => Promise<pg.QueryResult>;
    if (typeof last === 'function') sendLast = last;
    else {
      before = writes.slice(0, lastUnfoldable(writes) + 1);
      const carried = laterWritesStatement([...writes.slice(before.length), { table: '', ...last.carrier }]);
      sendLast = (out) => send(carried.text, carried.values, out);
    }
    for (const statement of heldStatements(before)) parts.push(() => send(statement.text, statement.values, false));
    begin = undefined;
    parts.push(() => sendLast(outside));
    if (parts.length === 1) return parts[0]!();
    stream?.cork?.();
    let answers: Promise<pg.QueryResult>[];
    try {
      answers = parts.map((part) => {
        try {
          return part();
        } catch (e) {
          return Promise.reject(e as Error);
        }
      });
    } finally {
      stream?.uncork?.();
    }
    for (const a of answers) a.catch(() => undefined);
    return answers.reduce((before, answer) => before.then(() => answer));
  };

  (client as { query: unknown }).query = (...args: unknown[]) => {
    const [text, values] = args;
    if (args.length !== 2 || typeof text !== 'string' || !Array.isArray(values)) {
      // Only Kysely uses these connections, always with text and values.
      if (held.length > 0 || begin !== undefined)
        throw new Error('a query of another shape while a transaction holds statements on the connection');
      return query(...args);
    }
    if (values.length === 0 && /^\s*rollback\s*$/i.test(text)) {
      held = [];
      refused = undefined;
      idAsked = undefined;
      // Nothing of the transaction was sent: there is nothing to roll back.
      if (begin !== undefined) {
        begin = undefined;
        return Promise.resolve(answered('ROLLBACK'));
      }
      // A connection that cannot carry the ROLLBACK is dropped by the pool, and the server ends the
      // transaction when it sees the connection go (at once on a close; on a path cut silently,
      // when its own keepalive gives up). Failed, Kysely would report this instead of what failed
      // the transaction.
      return query(text, values).catch((e: unknown) => {
        if (connectionLost(e)) return answered('ROLLBACK');
        throw e;
      });
    }
    if (refused !== undefined) return Promise.reject(refused);
    if (
      values.length === 0 &&
      (text === transactionIdQueries.ask.sql || text === transactionIdQueries.askWithoutTimeline.sql)
    ) {
      const select = transactionIdQuery(text === transactionIdQueries.ask.sql);
      idRow = undefined;
      if (begin !== undefined) {
        idAsked = select;
        return Promise.resolve(answered('SELECT'));
      }
      // The transaction has begun on the server already: the id costs a round trip.
      return readId(withHeld(() => query(select, [])));
    }
    if (values.length === 0 && text === transactionIdQueries.read.sql) {
      let sent: Promise<unknown> | undefined;
      const select = idAsked;
      if (select !== undefined && begin !== undefined && held.length > 0) {
        idAsked = undefined;
        sent = readId(withHeld(() => query(select, [])));
      }
      const row = idRow;
      return Promise.resolve(sent)
        .then(() => row)
        .then((r) => ({ ...answered('SELECT'), rows: r === undefined ? [] : [r] }));
    }
    if (text.startsWith(LATER)) {
      const end = text.indexOf(' */ ');
      const write = { table: text.slice(LATER.length, end), text: text.slice(end + 4), values };
      if (!transacting()) return withHeld((outside) => send(write.text, values, outside));
      held.push(write);
      return Promise.resolve(HELD);
    }
    if (values.length === 0 && /^\s*(begin|start transaction)\b/i.test(text) && !transacting()) {
      held = [];
      idAsked = undefined;
      idRow = undefined;
      begin = text;
      return Promise.resolve(answered('BEGIN'));
    }
    if (values.length === 0 && /^\s*commit\s*$/i.test(text)) {
      if (begin !== undefined && held.length === 0) {
        begin = undefined;
        return Promise.resolve(answered('COMMIT'));
      }
      // PostgreSQL answers the COMMIT of a failed transaction with ROLLBACK, not an error. One
      // pg would not send (its connection already gone) certainly kept nothing.
      return withHeld(() => query(text, values)).then(
        (r) => {
          if (r.command !== 'COMMIT') throw new NotCommitted(r.command);
          return r;
        },
        (e: unknown) => {
          throw notSent(e) ? new CommitNotSent(e) : e;
        },
      );
    }
    // What was written after a savepoint is undone by rolling back to it: held writes of that
    // stretch are dropped, not sent (the SAVEPOINT itself went with everything held before it).
    if (/^\s*rollback\s+to\b/i.test(text)) held = [];
    if (held.length > 0 && carriesHeld(text, held)) return withHeld({ carrier: { text, values } });
    return withHeld((outside) => send(text, values, outside));
  };
}
