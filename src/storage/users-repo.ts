import type { Selectable, Updateable } from 'kysely';
import type { CustomerId, Role, User, UserId } from '../core/index.js';
import { customerId, isRole, userId } from '../core/index.js';
import type { Db } from './database.js';
import type { UsersTable } from './schema.js';

export interface NewUser {
  readonly customerId: CustomerId;
  readonly username: string;
  readonly fullName: string;
  readonly email: string;
  readonly mobile?: string | null;
  readonly passwordHash: string;
  readonly roles: readonly Role[];
  readonly timezone?: string | null;
  readonly locale?: string | null;
}

/** What POST /User/{id} may change; undefined members stay as they are. */
export interface UserChanges {
  readonly fullName?: string;
  readonly email?: string;
  readonly mobile?: string | null;
  readonly roles?: readonly Role[];
  readonly active?: boolean;
  readonly timezone?: string | null;
  readonly locale?: string | null;
  readonly passwordHash?: string;
}

const COLUMNS = [
  'id',
  'customer_id',
  'username',
  'full_name',
  'email',
  'mobile',
  'roles',
  'active',
  'timezone',
  'locale',
  'special_product_availability',
  'two_factor_enabled',
  'created_at',
  'updated_at',
  'password_changed_at',
] as const;

type Row = Pick<Selectable<UsersTable>, (typeof COLUMNS)[number]>;

export function parseRoles(text: string): Role[] {
  return text.split(',').filter(isRole);
}

function toUser(row: Row): User {
  return {
    id: userId(row.id),
    customerId: customerId(row.customer_id),
    username: row.username,
    fullName: row.full_name,
    email: row.email,
    mobile: row.mobile,
    roles: parseRoles(row.roles),
    active: row.active === 1,
    timezone: row.timezone,
    locale: row.locale,
    specialProductAvailability: row.special_product_availability === 1,
    twoFactorEnabled: row.two_factor_enabled === 1,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    passwordChangedAt: row.password_changed_at,
  };
}

/** Users of customers. Deleted users are kept (audit) but never returned. */
export class UsersRepo {
  constructor(private readonly db: Db) {}

  /** Creates a user. Throws when the username is taken (usernames are global). */
  async create(input: NewUser, now: number): Promise<User> {
    const row = await this.db.kysely
      .insertInto('users')
      .values({
        customer_id: input.customerId,
        username: input.username,
        full_name: input.fullName,
        email: input.email,
        mobile: input.mobile ?? null,
        password_hash: input.passwordHash,
        roles: input.roles.join(','),
        active: 1,
        timezone: input.timezone ?? null,
        locale: input.locale ?? null,
        created_at: now,
        updated_at: now,
        password_changed_at: now,
        deleted_at: null,
      })
      .returning(COLUMNS)
      .executeTakeFirstOrThrow();
    return toUser(row);
  }

  async usernameTaken(username: string): Promise<boolean> {
    const row = await this.db.kysely
      .selectFrom('users')
      .select('id')
      .where('username', '=', username)
      .executeTakeFirst();
    return row !== undefined;
  }

  /** The user with this id within the customer; another customer's user is never returned. */
  async byId(customer: CustomerId, id: UserId): Promise<User | undefined> {
    const row = await this.db.kysely
      .selectFrom('users')
      .select(COLUMNS)
      .where('id', '=', id)
      .where('customer_id', '=', customer)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    return row === undefined ? undefined : toUser(row);
  }

  /**
   * A live, active user by username (usernames are global) with its password hash, for signing in;
   * undefined for an unknown, inactive or deleted user, or one of a suspended customer.
   */
  async credentials(username: string): Promise<{ user: User; passwordHash: string } | undefined> {
    const row = await this.db.kysely
      .selectFrom('users')
      .select([...COLUMNS, 'password_hash'])
      .where('username', '=', username)
      .where('active', '=', 1)
      .where('deleted_at', 'is', null)
      .where('customer_id', 'not in', (eb) =>
        eb.selectFrom('customers').select('id').where('suspended_at', 'is not', null),
      )
      .executeTakeFirst();
    return row === undefined ? undefined : { user: toUser(row), passwordHash: row.password_hash };
  }

  /** The user with this username within the customer; another customer's user is never returned. */
  async byUsername(customer: CustomerId, username: string): Promise<User | undefined> {
    const row = await this.db.kysely
      .selectFrom('users')
      .select(COLUMNS)
      .where('username', '=', username)
      .where('customer_id', '=', customer)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    return row === undefined ? undefined : toUser(row);
  }

  /**
   * Applies the given changes to a live user of the customer (a new password sets its change
   * time). Returns the user as it is now, or undefined when there is no such user.
   */
  async update(customer: CustomerId, id: UserId, changes: UserChanges, now: number): Promise<User | undefined> {
    const set: Updateable<UsersTable> = { updated_at: now };
    if (changes.fullName !== undefined) set.full_name = changes.fullName;
    if (changes.email !== undefined) set.email = changes.email;
    if (changes.mobile !== undefined) set.mobile = changes.mobile;
    if (changes.roles !== undefined) set.roles = changes.roles.join(',');
    if (changes.active !== undefined) set.active = changes.active ? 1 : 0;
    if (changes.timezone !== undefined) set.timezone = changes.timezone;
    if (changes.locale !== undefined) set.locale = changes.locale;
    if (changes.passwordHash !== undefined) {
      set.password_hash = changes.passwordHash;
      set.password_changed_at = now;
    }
    const row = await this.db.kysely
      .updateTable('users')
      .set(set)
      .where('id', '=', id)
      .where('customer_id', '=', customer)
      .where('deleted_at', 'is', null)
      .returning(COLUMNS)
      .executeTakeFirst();
    return row === undefined ? undefined : toUser(row);
  }

  /** Marks a live user of the customer deleted (kept for the audit trail; its username stays taken). */
  async markDeleted(customer: CustomerId, id: UserId, now: number): Promise<boolean> {
    const res = await this.db.kysely
      .updateTable('users')
      .set({ deleted_at: now, active: 0, updated_at: now })
      .where('id', '=', id)
      .where('customer_id', '=', customer)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) === 1;
  }

  async listByCustomer(customer: CustomerId): Promise<User[]> {
    const rows = await this.db.kysely
      .selectFrom('users')
      .select(COLUMNS)
      .where('customer_id', '=', customer)
      .where('deleted_at', 'is', null)
      .orderBy('id')
      .execute();
    return rows.map(toUser);
  }
}
