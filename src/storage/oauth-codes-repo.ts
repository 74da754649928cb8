import type { ApplicationId, CustomerId, Scope, UserId } from '../core/index.js';
import { applicationId, customerId, parseScopes, userId } from '../core/index.js';
import type { Db } from './database.js';

/** An authorization code as issued (RFC 6749 §4.1.2). */
export interface AuthorizationCode {
  readonly applicationId: ApplicationId;
  readonly userId: UserId;
  readonly customerId: CustomerId;
  readonly redirectUri: string;
  readonly scopes: readonly Scope[];
  readonly codeChallenge: string | null;
}

/** Authorization codes, stored hashed; each is redeemed at most once. */
export class OauthCodesRepo {
  constructor(private readonly db: Db) {}

  async create(input: AuthorizationCode & { codeHash: string; expiresAt: number }, now: number): Promise<void> {
    await this.db.kysely
      .insertInto('oauth_codes')
      .values({
        code_hash: input.codeHash,
        application_id: input.applicationId,
        user_id: input.userId,
        customer_id: input.customerId,
        redirect_uri: input.redirectUri,
        scopes: input.scopes.join(' '),
        code_challenge: input.codeChallenge,
        created_at: now,
        expires_at: input.expiresAt,
        used_at: null,
      })
      .execute();
  }

  /**
   * Redeems the code with this hash: one guarded UPDATE that exactly one caller wins while the code
   * is unused and unexpired. The code as issued, or undefined (unknown, used, expired or lost race).
   */
  async redeem(codeHash: string, now: number): Promise<AuthorizationCode | undefined> {
    const res = await this.db.kysely
      .updateTable('oauth_codes')
      .set({ used_at: now })
      .where('code_hash', '=', codeHash)
      .where('used_at', 'is', null)
      .where('expires_at', '>', now)
      .executeTakeFirst();
    if (Number(res.numUpdatedRows) !== 1) return undefined;
    const row = await this.db.kysely
      .selectFrom('oauth_codes')
      .select(['application_id', 'user_id', 'customer_id', 'redirect_uri', 'scopes', 'code_challenge'])
      .where('code_hash', '=', codeHash)
      .executeTakeFirstOrThrow();
    return {
      applicationId: applicationId(row.application_id),
      userId: userId(row.user_id),
      customerId: customerId(row.customer_id),
      redirectUri: row.redirect_uri,
      scopes: parseScopes(row.scopes).scopes,
      codeChallenge: row.code_challenge,
    };
  }

  /** The application of a code with this hash that was redeemed already, or undefined. */
  async usedBy(codeHash: string): Promise<ApplicationId | undefined> {
    const row = await this.db.kysely
      .selectFrom('oauth_codes')
      .select('application_id')
      .where('code_hash', '=', codeHash)
      .where('used_at', 'is not', null)
      .executeTakeFirst();
    return row === undefined ? undefined : applicationId(row.application_id);
  }
}
