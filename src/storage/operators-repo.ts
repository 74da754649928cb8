import type { Db } from './database.js';

/** An operator account (not a customer's user). */
export interface Operator {
  readonly id: number;
  readonly username: string;
  readonly createdAt: number;
  readonly disabledAt: number | null;
}

/** A live operator session, with its operator. */
export interface OperatorSession {
  readonly id: number;
  readonly operator: Operator;
  readonly csrf: string;
  readonly createdAt: number;
  readonly expiresAt: number;
  /** Past the password, not yet past the TOTP code: good for the code step only. */
  readonly secondFactorPending: boolean;
}

const OPERATOR_COLUMNS = ['o.id', 'o.username', 'o.created_at', 'o.disabled_at'] as const;

const toOperator = (r: { id: number; username: string; created_at: number; disabled_at: number | null }) => ({
  id: Number(r.id),
  username: r.username,
  createdAt: Number(r.created_at),
  disabledAt: r.disabled_at === null ? null : Number(r.disabled_at),
});

/** Operators and their sessions (known by the SHA-256 of their cookie). */
export class OperatorsRepo {
  constructor(private readonly db: Db) {}

  /** Creates an operator. False, creating nothing, when the username is taken. */
  async create(
    input: { username: string; passwordHash: string; sealedTotpSecret: string },
    now: number,
  ): Promise<boolean> {
    const row = await this.db.kysely
      .insertInto('operators')
      .values({
        username: input.username,
        password_hash: input.passwordHash,
        totp_secret: input.sealedTotpSecret,
        totp_last_step: null,
        created_at: now,
        disabled_at: null,
      })
      .onConflict((oc) => oc.column('username').doNothing())
      .returning('id')
      .executeTakeFirst();
    return row !== undefined;
  }

  /** Every operator, disabled ones included, by id. */
  async list(): Promise<Operator[]> {
    const rows = await this.db.kysely.selectFrom('operators as o').select(OPERATOR_COLUMNS).orderBy('o.id').execute();
    return rows.map(toOperator);
  }

  /** An enabled operator by username, with its password hash and sealed TOTP seed, for signing in. */
  async credentials(
    username: string,
  ): Promise<{ operator: Operator; passwordHash: string; sealedTotpSecret: string } | undefined> {
    const row = await this.db.kysely
      .selectFrom('operators as o')
      .select([...OPERATOR_COLUMNS, 'o.password_hash', 'o.totp_secret'])
      .where('o.username', '=', username)
      .where('o.disabled_at', 'is', null)
      .executeTakeFirst();
    return row === undefined
      ? undefined
      : { operator: toOperator(row), passwordHash: row.password_hash, sealedTotpSecret: row.totp_secret };
  }

  /** Records that the TOTP code of `step` was used: false when that step (or a later one) was already. */
  async acceptStep(operatorId: number, step: number): Promise<boolean> {
    const res = await this.db.kysely
      .updateTable('operators')
      .set({ totp_last_step: step })
      .where('id', '=', operatorId)
      .where((eb) => eb.or([eb('totp_last_step', 'is', null), eb('totp_last_step', '<', step)]))
      .executeTakeFirst();
    return Number(res.numUpdatedRows) === 1;
  }

  /** Disables an enabled operator and ends its sessions. False when there is no such enabled operator. */
  async disable(username: string, now: number): Promise<boolean> {
    const row = await this.db.kysely
      .updateTable('operators')
      .set({ disabled_at: now })
      .where('username', '=', username)
      .where('disabled_at', 'is', null)
      .returning('id')
      .executeTakeFirst();
    if (row === undefined) return false;
    await this.db.kysely
      .updateTable('operator_sessions')
      .set({ revoked_at: now })
      .where('operator_id', '=', row.id)
      .where('revoked_at', 'is', null)
      .execute();
    return true;
  }

  async createSession(
    input: { tokenHash: string; operatorId: number; csrf: string; expiresAt: number },
    now: number,
  ): Promise<void> {
    await this.db.kysely
      .insertInto('operator_sessions')
      .values({
        token_hash: input.tokenHash,
        operator_id: input.operatorId,
        csrf: input.csrf,
        created_at: now,
        last_seen_at: now,
        expires_at: input.expiresAt,
        revoked_at: null,
        second_factor_pending: 1,
      })
      .execute();
  }

  /**
   * The live session with this cookie hash: not revoked, not expired, used after `idleSince`, its
   * operator enabled. Undefined otherwise.
   */
  async findLiveSession(tokenHash: string, now: number, idleSince: number): Promise<OperatorSession | undefined> {
    const row = await this.db.kysely
      .selectFrom('operator_sessions as s')
      .innerJoin('operators as o', 'o.id', 's.operator_id')
      .select([
        ...OPERATOR_COLUMNS,
        's.id as session_id',
        's.csrf',
        's.created_at as session_created_at',
        's.expires_at',
        's.second_factor_pending',
      ])
      .where('s.token_hash', '=', tokenHash)
      .where('s.revoked_at', 'is', null)
      .where('s.expires_at', '>', now)
      .where('s.last_seen_at', '>', idleSince)
      .where('o.disabled_at', 'is', null)
      .executeTakeFirst();
    return row === undefined
      ? undefined
      : {
          id: Number(row.session_id),
          operator: toOperator(row),
          csrf: row.csrf,
          createdAt: Number(row.session_created_at),
          expiresAt: Number(row.expires_at),
          secondFactorPending: row.second_factor_pending === 1,
        };
  }

  /** Notes a request of the session (the idle limit counts from it). */
  async touchSession(id: number, now: number): Promise<void> {
    await this.db.kysely
      .updateTable('operator_sessions')
      .set({ last_seen_at: now })
      .where('id', '=', id)
      .where('last_seen_at', '<', now)
      .execute();
  }

  /** The TOTP code was right: the session is a full one until `expiresAt`. False when it was not pending. */
  async completeSecondFactor(id: number, expiresAt: number, now: number): Promise<boolean> {
    const res = await this.db.kysely
      .updateTable('operator_sessions')
      .set({ second_factor_pending: 0, expires_at: expiresAt, last_seen_at: now })
      .where('id', '=', id)
      .where('second_factor_pending', '=', 1)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) === 1;
  }

  /** Ends the session with this cookie hash (signing out). */
  async revokeSession(tokenHash: string, now: number): Promise<void> {
    await this.db.kysely
      .updateTable('operator_sessions')
      .set({ revoked_at: now })
      .where('token_hash', '=', tokenHash)
      .where('revoked_at', 'is', null)
      .execute();
  }
}
