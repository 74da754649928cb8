import type { UserId } from '../core/index.js';
import type { Db } from './database.js';

/** A user's second factor: the TOTP secret (RFC 6238) and the recovery codes, stored hashed. */
export class TwoFactorRepo {
  constructor(private readonly db: Db) {}

  /** Keeps `secret` (sealed by the caller) as the one being enrolled, replacing any earlier attempt. */
  async setPending(user: UserId, secret: string): Promise<void> {
    await this.db.kysely.updateTable('users').set({ totp_pending: secret }).where('id', '=', user).execute();
  }

  /** The secret being enrolled and the one in use (after a verified enrolment), as stored (sealed), if any. */
  async secrets(user: UserId): Promise<{ pending: string | null; active: string | null }> {
    const row = await this.db.kysely
      .selectFrom('users')
      .select(['totp_pending', 'totp_secret'])
      .where('id', '=', user)
      .executeTakeFirst();
    return { pending: row?.totp_pending ?? null, active: row?.totp_secret ?? null };
  }

  /**
   * Makes the pending secret the user's, if it is still `secret` (a second enrolment meanwhile
   * wins), and marks the user enrolled; `step` is the time step of the code that proved it.
   */
  async enable(user: UserId, secret: string, step: number, now: number): Promise<boolean> {
    const res = await this.db.kysely
      .updateTable('users')
      .set({ totp_secret: secret, totp_pending: null, totp_last_step: step, two_factor_enabled: 1, updated_at: now })
      .where('id', '=', user)
      .where('totp_pending', '=', secret)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) === 1;
  }

  /**
   * Accepts a TOTP time step once: one guarded UPDATE that succeeds only for a step later than the
   * last one accepted, so a code (and any earlier one) cannot be used again, even by a racing request.
   */
  async acceptStep(user: UserId, step: number): Promise<boolean> {
    const res = await this.db.kysely
      .updateTable('users')
      .set({ totp_last_step: step })
      .where('id', '=', user)
      .where((eb) => eb.or([eb('totp_last_step', 'is', null), eb('totp_last_step', '<', step)]))
      .executeTakeFirst();
    return Number(res.numUpdatedRows) === 1;
  }

  /** Replaces the user's recovery codes by these (hashes). */
  async replaceRecoveryCodes(user: UserId, hashes: readonly string[], now: number): Promise<void> {
    await this.db.kysely.deleteFrom('recovery_codes').where('user_id', '=', user).execute();
    await this.db.kysely
      .insertInto('recovery_codes')
      .values(hashes.map((h) => ({ user_id: user, code_hash: h, created_at: now, used_at: null })))
      .execute();
  }

  /** Uses a recovery code once: true for exactly one caller while it is unused. */
  async useRecoveryCode(user: UserId, hash: string, now: number): Promise<boolean> {
    const res = await this.db.kysely
      .updateTable('recovery_codes')
      .set({ used_at: now })
      .where('user_id', '=', user)
      .where('code_hash', '=', hash)
      .where('used_at', 'is', null)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) === 1;
  }
}
