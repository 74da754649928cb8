import { sql, type RawBuilder } from 'kysely';
import type { Db } from './database.js';

/** Failed sign-ins per key (an account or a client address), for growing delays. */
export class SignInFailuresRepo {
  constructor(private readonly db: Db) {}

  /** The latest time until which any of `keys` is blocked (0 when none is). */
  async blockedUntil(keys: readonly string[], now: number): Promise<number> {
    if (keys.length === 0) return 0;
    const rows = await this.db.kysely
      .selectFrom('sign_in_failures')
      .select('blocked_until')
      .where('key', 'in', [...keys])
      .where('blocked_until', '>', now)
      .execute();
    return rows.reduce((m, r) => Math.max(m, Number(r.blocked_until)), 0);
  }

  /**
   * Counts one more failure of `key` (one atomic upsert: concurrent failures all count) and blocks
   * it for `delay(failures)` seconds; failures older than `forgetAfter` seconds start the count
   * afresh. Returns the count.
   */
  async recordFailure(
    key: string,
    now: number,
    forgetAfter: number,
    delay: (failures: number) => number,
  ): Promise<number> {
    const row = await this.db.kysely
      .insertInto('sign_in_failures')
      .values({ key, failures: 1, blocked_until: 0, updated_at: now })
      .onConflict((oc) =>
        oc.column('key').doUpdateSet({
          failures: sql`CASE WHEN sign_in_failures.updated_at < ${now - forgetAfter} THEN 1 ELSE sign_in_failures.failures + 1 END`,
          updated_at: now,
        }),
      )
      .returning('failures')
      .executeTakeFirstOrThrow();
    const failures = Number(row.failures);
    const wait = delay(failures);
    if (wait > 0)
      await this.db.kysely
        .updateTable('sign_in_failures')
        .set({ blocked_until: now + wait })
        .where('key', '=', key)
        .execute();
    return failures;
  }

  /**
   * Counts an attempt of `key` unless `key` is blocked, in one guarded UPDATE, so that attempts made
   * at once cannot all slip past the block before any of them is counted. The n-th attempt blocks
   * the key for `schedule[n - 1]` seconds (`beyond` past the schedule's end; 0: not blocked).
   * Attempts older than `forgetAfter` seconds start the count afresh. False (nothing counted)
   * while blocked. Undo an attempt that turned out to be no failure with `forgive`.
   */
  async admit(
    key: string,
    now: number,
    forgetAfter: number,
    schedule: readonly number[],
    beyond: number,
  ): Promise<boolean> {
    // One upsert: a new key counts its first attempt; a known one counts another unless it is
    // blocked (the WHERE of DO UPDATE), and then no row comes back. The schedule's numbers are ours
    // (integers): written as literals, so that both databases type the CASE as a number.
    const t = sql.table('sign_in_failures');
    const n = sql<number>`(CASE WHEN ${t}.updated_at < ${now - forgetAfter} THEN 1 ELSE ${t}.failures + 1 END)`;
    const waitAfter = (count: RawBuilder<number>) =>
      sql<number>`(CASE ${count} ${sql.join(
        schedule.map((s, i) => sql`WHEN ${sql.lit(i + 1)} THEN ${sql.lit(Math.trunc(s))}`),
        sql` `,
      )} ELSE ${sql.lit(Math.trunc(beyond))} END)`;
    const row = await this.db.kysely
      .insertInto('sign_in_failures')
      .values({ key, failures: 1, blocked_until: now + Math.trunc(schedule[0] ?? beyond), updated_at: now })
      .onConflict((oc) =>
        oc
          .column('key')
          .doUpdateSet({ failures: n, blocked_until: sql`CAST(${now} AS BIGINT) + ${waitAfter(n)}`, updated_at: now })
          .where('sign_in_failures.blocked_until', '<=', now),
      )
      .returning('failures')
      .executeTakeFirst();
    return row !== undefined;
  }

  /** Takes back one attempt counted by `admit` (it was no failure). */
  async forgive(key: string): Promise<void> {
    await this.db.kysely
      .updateTable('sign_in_failures')
      .set({ failures: sql`CASE WHEN failures > 0 THEN failures - 1 ELSE 0 END` })
      .where('key', '=', key)
      .execute();
  }

  /** Forgets the failures of `key` (its account signed in). */
  async reset(key: string): Promise<void> {
    await this.db.kysely.deleteFrom('sign_in_failures').where('key', '=', key).execute();
  }
}
