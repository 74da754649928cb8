import type { ApplicationId, CustomerId, Principal, Scope, UserId } from '../core/index.js';
import { applicationId, customerId, parseScopes, userId } from '../core/index.js';
import type { Db } from './database.js';
import { parseRoles } from './users-repo.js';

export interface NewToken {
  readonly hash: string;
  readonly kind: 'access' | 'refresh';
  readonly family: string;
  readonly applicationId: ApplicationId | null;
  readonly userId: UserId;
  readonly customerId: CustomerId;
  readonly scopes: readonly Scope[];
  readonly authType: 'API' | 'UI';
  readonly expiresAt: number;
}

export interface StoredToken extends Principal {
  readonly kind: 'access' | 'refresh';
  readonly family: string;
}

/** OAuth2 tokens, stored only as SHA-256 hashes. */
export class TokensRepo {
  constructor(private readonly db: Db) {}

  async insert(tokens: readonly NewToken[], now: number): Promise<void> {
    await this.insertQuery(tokens, now).execute();
  }

  /** Inserts a token unless one with its hash exists (live or revoked: a revoked one stays revoked). */
  async insertOnce(token: NewToken, now: number): Promise<void> {
    await this.insertQuery([token], now)
      .onConflict((oc) => oc.column('token_hash').doNothing())
      .execute();
  }

  private insertQuery(tokens: readonly NewToken[], now: number) {
    return this.db.kysely.insertInto('oauth_tokens').values(
      tokens.map((t) => ({
        token_hash: t.hash,
        kind: t.kind,
        family: t.family,
        application_id: t.applicationId,
        user_id: t.userId,
        customer_id: t.customerId,
        scopes: t.scopes.join(' '),
        auth_type: t.authType,
        expires_at: t.expiresAt,
        created_at: now,
        revoked_at: null,
      })),
    );
  }

  /**
   * The live token with this hash: not revoked, not expired, its user active and not deleted,
   * its customer not suspended, its application not revoked and its application's owner active;
   * the user and the application of the token's own customer. With the account settings. One
   * query: this runs on every authenticated request that misses the principal cache.
   */
  async findLive(hash: string, now: number): Promise<StoredToken | undefined> {
    const row = await this.db.kysely
      .selectFrom('oauth_tokens as t')
      .innerJoin('users as u', 'u.id', 't.user_id')
      .innerJoin('customers as c', 'c.id', 't.customer_id')
      .leftJoin('api_applications as a', 'a.id', 't.application_id')
      .leftJoin('users as o', 'o.id', 'a.user_id')
      .select([
        't.kind',
        't.family',
        't.application_id',
        't.user_id',
        't.customer_id',
        't.scopes',
        't.auth_type',
        't.expires_at',
        'u.roles',
        'a.revoked_at as app_revoked_at',
        'a.scopes as app_scopes',
        'a.customer_id as app_customer_id',
        'o.active as owner_active',
        'o.deleted_at as owner_deleted_at',
        'u.locale as user_locale',
        'u.timezone as user_timezone',
        'c.currency',
        'c.country',
        'c.locale',
        'c.timezone',
      ])
      .where('t.token_hash', '=', hash)
      .where('t.revoked_at', 'is', null)
      .where('t.expires_at', '>', now)
      .where('u.active', '=', 1)
      .where('u.deleted_at', 'is', null)
      .where('c.suspended_at', 'is', null)
      .whereRef('u.customer_id', '=', 't.customer_id')
      .executeTakeFirst();
    if (row === undefined || row.app_revoked_at !== null) return undefined;
    // A token of an application acts within the application's customer, while its owner is active.
    if (
      row.application_id !== null &&
      (row.app_customer_id !== row.customer_id || row.owner_active !== 1 || row.owner_deleted_at !== null)
    )
      return undefined;
    // A token holds no scope its application no longer has: narrowing an application revokes its
    // live tokens, but one granted while that ran (its application read just before) would keep
    // the scope taken away.
    const granted = parseScopes(row.scopes).scopes;
    const allowed = row.app_scopes === null ? undefined : new Set(parseScopes(row.app_scopes).scopes);
    return {
      kind: row.kind,
      family: row.family,
      applicationId: row.application_id === null ? null : applicationId(row.application_id),
      userId: userId(row.user_id),
      customerId: customerId(row.customer_id),
      scopes: allowed === undefined ? granted : granted.filter((scope) => allowed.has(scope)),
      roles: parseRoles(row.roles),
      authType: row.auth_type,
      expiresAt: row.expires_at,
      account: {
        currency: row.currency,
        country: row.country,
        locale: row.user_locale ?? row.locale,
        timezone: row.user_timezone ?? row.timezone,
      },
    };
  }

  /**
   * Revokes the token with this hash, and with it every token of its family (a refresh token
   * and the access tokens it minted). Returns how many tokens were revoked.
   */
  async revokeFamilyOf(hash: string, now: number, onlyApplication?: ApplicationId): Promise<number> {
    let q = this.db.kysely.selectFrom('oauth_tokens').select('family').where('token_hash', '=', hash);
    if (onlyApplication !== undefined) q = q.where('application_id', '=', onlyApplication);
    const row = await q.executeTakeFirst();
    return row === undefined ? 0 : this.revokeFamily(row.family, now);
  }

  /** Revokes every live token of a family. Returns how many. */
  async revokeFamily(family: string, now: number): Promise<number> {
    const res = await this.db.kysely
      .updateTable('oauth_tokens')
      .set({ revoked_at: now })
      .where('family', '=', family)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return Number(res.numUpdatedRows);
  }

  /** Revokes one token, if live. Returns whether it was (the refresh grant consumes tokens with it). */
  async revokeOne(hash: string, now: number): Promise<boolean> {
    const res = await this.db.kysely
      .updateTable('oauth_tokens')
      .set({ revoked_at: now })
      .where('token_hash', '=', hash)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return res.numUpdatedRows > 0n;
  }

  /**
   * Revokes every live token a user holds: those minted for the person (`UI`) and for the
   * applications it owns (`API`), or only those of `authType`. Returns how many.
   */
  async revokeAllOfUser(user: UserId, now: number, authType?: 'API' | 'UI'): Promise<number> {
    let q = this.db.kysely
      .updateTable('oauth_tokens')
      .set({ revoked_at: now })
      .where('user_id', '=', user)
      .where('revoked_at', 'is', null);
    if (authType !== undefined) q = q.where('auth_type', '=', authType);
    return Number((await q.executeTakeFirst()).numUpdatedRows);
  }

  /** Revokes every live token of an application (its scopes narrowed, or it was revoked). Returns how many. */
  async revokeAllOfApplication(application: ApplicationId, now: number): Promise<number> {
    const res = await this.db.kysely
      .updateTable('oauth_tokens')
      .set({ revoked_at: now })
      .where('application_id', '=', application)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return Number(res.numUpdatedRows);
  }
}
