import type { CustomerId, UserId } from '../core/index.js';
import { customerId, userId } from '../core/index.js';
import type { Db } from './database.js';

/** A live signed-in session. */
export interface WebSession {
  readonly id: number;
  readonly userId: UserId;
  readonly customerId: CustomerId;
  readonly csrf: string;
  readonly expiresAt: number;
  /** Past the password, not yet past the second factor: good for the code step only. */
  readonly secondFactorPending: boolean;
}

/** The signed-in browsers, known by the SHA-256 of their cookie. */
export class WebSessionsRepo {
  constructor(private readonly db: Db) {}

  async create(
    input: {
      tokenHash: string;
      userId: UserId;
      customerId: CustomerId;
      csrf: string;
      expiresAt: number;
      secondFactorPending: boolean;
    },
    now: number,
  ): Promise<void> {
    await this.db.kysely
      .insertInto('web_sessions')
      .values({
        token_hash: input.tokenHash,
        user_id: input.userId,
        customer_id: input.customerId,
        csrf: input.csrf,
        created_at: now,
        expires_at: input.expiresAt,
        revoked_at: null,
        second_factor_pending: input.secondFactorPending ? 1 : 0,
      })
      .execute();
  }

  /** The live session with this cookie hash: not revoked, not expired, its user active and not deleted, its customer not suspended. */
  async findLive(tokenHash: string, now: number): Promise<WebSession | undefined> {
    const row = await this.db.kysely
      .selectFrom('web_sessions as s')
      .innerJoin('users as u', 'u.id', 's.user_id')
      .innerJoin('customers as c', 'c.id', 's.customer_id')
      .where('c.suspended_at', 'is', null)
      .select(['s.id', 's.user_id', 's.customer_id', 's.csrf', 's.expires_at', 's.second_factor_pending'])
      .where('s.token_hash', '=', tokenHash)
      .where('s.revoked_at', 'is', null)
      .where('s.expires_at', '>', now)
      .where('u.active', '=', 1)
      .where('u.deleted_at', 'is', null)
      .executeTakeFirst();
    return row === undefined
      ? undefined
      : {
          id: row.id,
          userId: userId(row.user_id),
          customerId: customerId(row.customer_id),
          csrf: row.csrf,
          expiresAt: row.expires_at,
          secondFactorPending: row.second_factor_pending === 1,
        };
  }

  /** The second factor was shown: the session is a full one from now on. */
  async completeSecondFactor(id: number): Promise<void> {
    await this.db.kysely.updateTable('web_sessions').set({ second_factor_pending: 0 }).where('id', '=', id).execute();
  }

  /** Ends the session with this cookie hash (signing out). */
  async revoke(tokenHash: string, now: number): Promise<void> {
    await this.db.kysely
      .updateTable('web_sessions')
      .set({ revoked_at: now })
      .where('token_hash', '=', tokenHash)
      .where('revoked_at', 'is', null)
      .execute();
  }

  /** Ends every session of a user (a new password, deactivation). Returns how many. */
  async revokeAllOfUser(user: UserId, now: number): Promise<number> {
    const res = await this.db.kysely
      .updateTable('web_sessions')
      .set({ revoked_at: now })
      .where('user_id', '=', user)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return Number(res.numUpdatedRows);
  }
}
