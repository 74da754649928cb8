import type { ApplicationId, Application, CustomerId, Scope, UserId } from '../core/index.js';
import { applicationId, customerId, parseScopes, userId } from '../core/index.js';
import type { Db } from './database.js';

export interface NewApplication {
  readonly customerId: CustomerId;
  readonly userId: UserId;
  readonly name: string;
  readonly clientId: string;
  readonly secretHash: string;
  readonly scopes: readonly Scope[];
}

export interface ApplicationWithSecret extends Application {
  readonly secretHash: string;
  /** Whether the owning user is active and not deleted: tokens act for that user. */
  readonly ownerActive: boolean;
}

/** OAuth2 client applications of customers. */
export class ApplicationsRepo {
  constructor(private readonly db: Db) {}

  async create(input: NewApplication, now: number): Promise<Application> {
    const row = await this.db.kysely
      .insertInto('api_applications')
      .values({
        customer_id: input.customerId,
        user_id: input.userId,
        name: input.name,
        client_id: input.clientId,
        secret_hash: input.secretHash,
        scopes: input.scopes.join(' '),
        created_at: now,
        revoked_at: null,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    return {
      id: applicationId(row.id),
      customerId: input.customerId,
      userId: input.userId,
      name: input.name,
      clientId: input.clientId,
      scopes: [...input.scopes],
      revoked: false,
    };
  }

  /** The application for a client_id with its secret hash, for the token endpoint. */
  async byClientId(clientId: string): Promise<ApplicationWithSecret | undefined> {
    const row = await this.db.kysely
      .selectFrom('api_applications as a')
      .innerJoin('users as u', 'u.id', 'a.user_id')
      .select(['a.id', 'a.customer_id', 'a.user_id', 'a.name', 'a.client_id', 'a.secret_hash', 'a.scopes', 'a.revoked_at', 'u.active', 'u.deleted_at'])
      .where('a.client_id', '=', clientId)
      .executeTakeFirst();
    if (row === undefined) return undefined;
    return {
      id: applicationId(row.id),
      customerId: customerId(row.customer_id),
      userId: userId(row.user_id),
      name: row.name,
      clientId: row.client_id,
      secretHash: row.secret_hash,
      scopes: parseScopes(row.scopes).scopes,
      revoked: row.revoked_at !== null,
      ownerActive: row.active === 1 && row.deleted_at === null,
    };
  }

  /**
   * Revokes an application: the token lookup joins it, so its tokens stop working (at once in
   * the process that clears its principal cache, within the cache's time elsewhere).
   */
  async markRevoked(id: ApplicationId, now: number): Promise<boolean> {
    const res = await this.db.kysely
      .updateTable('api_applications')
      .set({ revoked_at: now })
      .where('id', '=', id)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return res.numUpdatedRows > 0n;
  }
}
