// Deleting what has outlived its use (expired tokens, DCV values, sessions, authorization codes,
// sign-in failures long forgotten; finished jobs), a batch at a time: for housekeeping.
import { sql, type RawBuilder } from 'kysely';
import type { Db } from './database.js';
import type { DB } from './schema.js';

/**
 * Rows one statement of a purge deletes at most: on SQLite as many as take a few milliseconds
 * (each holds the event loop: 900,000 expired tokens in 1,000s, median 1.8 ms a batch), on
 * PostgreSQL more, each batch's commit being a WAL flush.
 */
export const PURGE_BATCH = { sqlite: 1_000, postgres: 10_000 } as const;

/**
 * Deletes the rows of `table` for which `where` holds, at most `batch` per statement, until a
 * statement finds fewer; returns how many it deleted. One statement for all held SQLite's write
 * lock, and the event loop of a process on SQLite, for as long as it ran: 2.1 s for 810,000
 * expired tokens (measured), while every request waited and other processes' writes past the
 * busy timeout failed; on PostgreSQL such a statement may outlast the bound on an answer. Each batch commits on its own
 * and the event loop serves what waits between two. A row is picked by its physical address
 * (SQLite's rowid, PostgreSQL's ctid), so any table qualifies whatever its key. Two purges at
 * once delete each row once: a row the other deleted first is skipped, and the loop may end
 * early, leaving the rest to the other or the next run.
 */
export async function deleteInBatches(
  db: Db,
  table: keyof DB & string,
  where: RawBuilder<unknown>,
  batch: number = PURGE_BATCH[db.dialect],
): Promise<number> {
  const name = sql.table(table);
  const statement =
    db.dialect === 'postgres'
      ? sql`DELETE FROM ${name} WHERE ctid = ANY(ARRAY(SELECT ctid FROM ${name} WHERE ${where} LIMIT ${batch}))`
      : sql`DELETE FROM ${name} WHERE rowid IN (SELECT rowid FROM ${name} WHERE ${where} LIMIT ${batch})`;
  let deleted = 0;
  for (;;) {
    const n = Number((await statement.execute(db.kysely)).numAffectedRows ?? 0);
    deleted += n;
    if (n < batch) return deleted;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/**
 * The rows of each table whose use ended before `before` (seconds): past their expiry, or, for
 * sign-in failures, no longer counted (the throttles forget after an hour) nor blocking.
 */
const ENDED = {
  oauth_tokens: (before: number) => sql`expires_at < ${before}`,
  oauth_codes: (before: number) => sql`expires_at < ${before}`,
  web_sessions: (before: number) => sql`expires_at < ${before}`,
  operator_sessions: (before: number) => sql`expires_at < ${before}`,
  dcv_values: (before: number) => sql`expires_at < ${before}`,
  sign_in_failures: (before: number) => sql`updated_at < ${before} AND blocked_until < ${before}`,
} satisfies Partial<Record<keyof DB & string, (before: number) => RawBuilder<unknown>>>;

/** What has expired, in every table that keeps rows with an end: for housekeeping. */
export class ExpiredRows {
  constructor(private readonly db: Db) {}

  /**
   * Deletes the rows whose use ended before `before`, table after table. Each row of these is
   * made by a request, several by anonymous ones (a failed sign-in, a guessed voucher code), so
   * kept for ever they grew with every attempt. Returns how many, by table.
   */
  async purge(before: number): Promise<Record<keyof typeof ENDED, number>> {
    const deleted = {} as Record<keyof typeof ENDED, number>;
    for (const [table, ended] of Object.entries(ENDED) as [
      keyof typeof ENDED,
      (before: number) => RawBuilder<unknown>,
    ][])
      deleted[table] = await deleteInBatches(this.db, table, ended(before));
    return deleted;
  }
}
