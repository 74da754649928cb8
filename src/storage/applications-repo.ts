import type { ApplicationId, Application, CustomerId, Scope, UserId } from '../core/index.js';
import { applicationId, customerId, parseScopes, userId } from '../core/index.js';
import type { Selectable, Updateable } from 'kysely';
import type { Db } from './database.js';
import type { ApiApplicationsTable } from './schema.js';

export interface NewApplication {
  readonly customerId: CustomerId;
  readonly userId: UserId;
  readonly name: string;
  readonly clientId: string;
  readonly secretHash: string;
  readonly scopes: readonly Scope[];
  readonly redirectUris?: readonly string[];
}

/** What an application's manager may change; undefined members stay as they are. */
export interface ApplicationChanges {
  readonly name?: string;
  readonly scopes?: readonly Scope[];
  readonly redirectUris?: readonly string[];
}

const COLUMNS = [
  'id',
  'customer_id',
  'user_id',
  'name',
  'client_id',
  'scopes',
  'redirect_uris',
  'created_at',
  'revoked_at',
] as const;
type Row = Pick<Selectable<ApiApplicationsTable>, (typeof COLUMNS)[number]>;

function toApplication(row: Row): Application {
  return {
    id: applicationId(row.id),
    customerId: customerId(row.customer_id),
    userId: userId(row.user_id),
    name: row.name,
    clientId: row.client_id,
    scopes: parseScopes(row.scopes).scopes,
    redirectUris: row.redirect_uris.split(' ').filter(Boolean),
    createdAt: row.created_at,
    revoked: row.revoked_at !== null,
  };
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
        redirect_uris: (input.redirectUris ?? []).join(' '),
        created_at: now,
        revoked_at: null,
      })
      .returning(COLUMNS)
      .executeTakeFirstOrThrow();
    return toApplication(row);
  }

  /** The application for a client_id with its secret hash, for the token endpoint. */
  async byClientId(clientId: string): Promise<ApplicationWithSecret | undefined> {
    const row = await this.db.kysely
      .selectFrom('api_applications as a')
      .innerJoin('users as u', 'u.id', 'a.user_id')
      .select([...COLUMNS.map((c) => `a.${c}` as const), 'a.secret_hash', 'u.active', 'u.deleted_at'])
      .where('a.client_id', '=', clientId)
      .executeTakeFirst();
    if (row === undefined) return undefined;
    return {
      ...toApplication(row),
      secretHash: row.secret_hash,
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

  /** Revokes every application a user owns (the user is deleted). Returns how many. */
  async revokeAllOfUser(user: UserId, now: number): Promise<number> {
    const res = await this.db.kysely
      .updateTable('api_applications')
      .set({ revoked_at: now })
      .where('user_id', '=', user)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return Number(res.numUpdatedRows);
  }

  /** The customer's applications, revoked ones included, by id. */
  async listByCustomer(customer: CustomerId): Promise<Application[]> {
    const rows = await this.db.kysely
      .selectFrom('api_applications')
      .select(COLUMNS)
      .where('customer_id', '=', customer)
      .orderBy('id')
      .execute();
    return rows.map(toApplication);
  }

  /** One application of the customer; another customer's is never returned. */
  async byId(customer: CustomerId, id: ApplicationId): Promise<Application | undefined> {
    const row = await this.db.kysely
      .selectFrom('api_applications')
      .select(COLUMNS)
      .where('id', '=', id)
      .where('customer_id', '=', customer)
      .executeTakeFirst();
    return row === undefined ? undefined : toApplication(row);
  }

  /** Applies the changes to a live (not revoked) application of the customer; undefined when there is none. */
  async update(customer: CustomerId, id: ApplicationId, changes: ApplicationChanges): Promise<Application | undefined> {
    const set: Updateable<ApiApplicationsTable> = {};
    if (changes.name !== undefined) set.name = changes.name;
    if (changes.scopes !== undefined) set.scopes = changes.scopes.join(' ');
    if (changes.redirectUris !== undefined) set.redirect_uris = changes.redirectUris.join(' ');
    if (Object.keys(set).length === 0) return this.byId(customer, id);
    const row = await this.db.kysely
      .updateTable('api_applications')
      .set(set)
      .where('id', '=', id)
      .where('customer_id', '=', customer)
      .where('revoked_at', 'is', null)
      .returning(COLUMNS)
      .executeTakeFirst();
    return row === undefined ? undefined : toApplication(row);
  }
}
