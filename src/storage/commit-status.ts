// A PostgreSQL COMMIT whose answer was lost (the connection dropped after it was sent): whether
// the server kept the transaction, found out on a connection of its own (`inTransaction` with
// `settleLostCommit`, database.ts; the id it asks about is read with the BEGIN, pg-connection.ts).
import { sql, type Kysely } from 'kysely';
import type pg from 'pg';
import { CommitOutcomeUnknown } from '../core/index.js';
import type { Db } from './database.js';
import { NotCommitted, TIMELINE } from './pg-connection.js';
import type { DB } from './schema.js';
import { CommitNotSent, CONNECTION_TROUBLE, fromServer } from './unavailable.js';

/** The pg module, as database.ts loads it at first use. */
type PgModule = typeof pg;

/** A PostgreSQL transaction as the server knows it: its id, the backend running it, the server's timeline (null: not told). */
export interface TransactionId {
  readonly xid: string;
  readonly pid: number;
  readonly timeline: string | null;
}

/** Whether the server tells its WAL timeline (`TIMELINE`): asked once per Db, when it first answers. */
const timelines = new WeakMap<Kysely<DB>, Promise<boolean>>();

export function timelineReadable(db: Db): Promise<boolean> {
  let known = timelines.get(db.kysely);
  if (known === undefined) {
    known = sql`SELECT ${sql.raw(TIMELINE)} AS timeline`.execute(db.kysely).then(
      () => true,
      (e: unknown) => {
        // Refused by the server (some managed services do): never. Not reached: ask again next time.
        if (fromServer(e)) return false;
        timelines.delete(db.kysely);
        return false;
      },
    );
    timelines.set(db.kysely, known);
  }
  return known;
}

/**
 * The server answered the COMMIT itself with a failure (a deferred constraint, a conflict, a
 * ROLLBACK for a transaction that had failed), or it was never sent (`CommitNotSent`): nothing
 * was kept, and there is nothing to ask.
 */
export function serverRefused(e: unknown): boolean {
  return e instanceof NotCommitted || e instanceof CommitNotSent || (fromServer(e) && !CONNECTION_TROUBLE.test(e.code));
}

/** How long finding out whether a transaction whose COMMIT's answer was lost was kept may take. */
const SETTLE_WAIT_MS = 5_000;

/**
 * Whether the transaction `ours`, whose COMMIT failed with `failure`, was kept: asked with
 * `txid_status` on a connection of its own (the pool's may all wait for the very locks that
 * transaction holds, or be dead paths), opened anew, within a deadline, until the server answers.
 * One still in progress on the server (its backend has not yet seen the connection go, or is
 * committing) is ended: its backend is terminated, if it still runs that transaction, and the
 * answer read again. 'aborted' when it was not kept, so the caller may run it again;
 * `CommitOutcomeUnknown` when that cannot be found out in time, the server refuses to say, or it
 * is not the one that gave the id (another timeline: a promoted standby may give the same ids
 * again; where the server does not tell its timeline, that cannot be seen).
 */
export async function commitStatus(
  pg: PgModule,
  db: Db,
  ours: TransactionId,
  failure: unknown,
): Promise<'committed' | 'aborted'> {
  if (db.url === undefined) throw new CommitOutcomeUnknown(failure);
  const deadline = Date.now() + SETTLE_WAIT_MS;
  const left = () => Math.max(1, deadline - Date.now());
  const timeline = ours.timeline === null ? 'NULL::text' : TIMELINE;
  let terminated = false;
  let last: unknown = failure;
  while (Date.now() < deadline) {
    const client = new pg.Client({ connectionString: db.url, connectionTimeoutMillis: left() });
    client.on('error', () => undefined);
    const query = <R extends pg.QueryResultRow>(text: string, values: unknown[]) =>
      client.query<R>({ text, values, query_timeout: left() } as pg.QueryConfig);
    try {
      await client.connect();
      for (;;) {
        const { rows } = await query<{ status: string | null; timeline: string | null }>(
          `SELECT txid_status($1::bigint) AS status, ${timeline} AS timeline`,
          [ours.xid],
        );
        const answer = rows[0]!;
        if (answer.timeline !== ours.timeline) break;
        if (answer.status === 'committed' || answer.status === 'aborted') return answer.status;
        if (answer.status !== 'in progress' || Date.now() >= deadline) break;
        if (!terminated) {
          // backend_xid is the id's low 32 bits: the backend is ours only while it runs our transaction.
          await query(
            `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
              WHERE pid = $1 AND backend_xid::text = ($2::bigint % 4294967296)::text`,
            [ours.pid, ours.xid],
          );
          terminated = true;
        } else await new Promise((resolve) => setTimeout(resolve, 20));
      }
      break;
    } catch (e) {
      last = e;
      // The server refused to say (an id it does not know, say): asking again will not change that.
      if (fromServer(e) && !CONNECTION_TROUBLE.test(e.code)) break;
      // Not reachable yet (a restart, a failover under way): again, until the deadline.
      await new Promise((resolve) => setTimeout(resolve, Math.min(100, left())));
    } finally {
      void client.end().catch(() => undefined);
    }
  }
  throw new CommitOutcomeUnknown(
    last === failure ? failure : new AggregateError([failure, last], 'the COMMIT failed, and so did asking about it'),
  );
}
