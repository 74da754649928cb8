import type { Customer, CustomerId } from '../core/index.js';
import { customerId } from '../core/index.js';
import type { Db } from './database.js';
import type { CustomersTable } from './schema.js';
import type { Selectable } from 'kysely';

export interface NewCustomer {
  readonly name: string;
  readonly email: string;
  readonly currency: string;
  readonly creditLimitMinor: number;
  readonly country: string;
  readonly locale: string;
  readonly timezone: string;
}

const COLUMNS = [
  'id',
  'name',
  'email',
  'currency',
  'credit_limit_minor',
  'used_minor',
  'country',
  'locale',
  'timezone',
  'created_at',
  'password_min_length',
  'require_two_factor',
] as const;

function toCustomer(row: Pick<Selectable<CustomersTable>, (typeof COLUMNS)[number]>): Customer {
  return {
    id: customerId(row.id),
    name: row.name,
    email: row.email,
    currency: row.currency,
    creditLimitMinor: row.credit_limit_minor,
    usedMinor: row.used_minor,
    country: row.country,
    locale: row.locale,
    timezone: row.timezone,
    createdAt: row.created_at,
    passwordMinLength: row.password_min_length,
    requireTwoFactor: row.require_two_factor === 1,
  };
}

/** Customers (accounts) and their credit. */
export class CustomersRepo {
  constructor(private readonly db: Db) {}

  async create(input: NewCustomer, now: number): Promise<Customer> {
    const row = await this.db.kysely
      .insertInto('customers')
      .values({
        name: input.name,
        email: input.email,
        currency: input.currency,
        credit_limit_minor: input.creditLimitMinor,
        country: input.country,
        locale: input.locale,
        timezone: input.timezone,
        created_at: now,
        updated_at: now,
      })
      .returning(COLUMNS)
      .executeTakeFirstOrThrow();
    return toCustomer(row);
  }

  async byId(id: CustomerId): Promise<Customer | undefined> {
    const row = await this.db.kysely.selectFrom('customers').select(COLUMNS).where('id', '=', id).executeTakeFirst();
    return row === undefined ? undefined : toCustomer(row);
  }

  /**
   * Serialises changes of one customer that must see each other (the last-ADMIN rule of its users;
   * a PartnerOrderID taken by an order or a voucher) in the calling transaction: a write on the
   * customer row, so a concurrent transaction on the same customer waits
   * (a row lock on PostgreSQL, the write lock on SQLite). False when there is no such customer.
   */
  async lock(id: CustomerId, now: number): Promise<boolean> {
    const res = await this.db.kysely
      .updateTable('customers')
      .set({ updated_at: now })
      .where('id', '=', id)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) === 1;
  }

  /** Sets the least password length of the customer's users. False when there is no such customer. */
  async setPasswordMinLength(id: CustomerId, length: number, now: number): Promise<boolean> {
    const res = await this.db.kysely
      .updateTable('customers')
      .set({ password_min_length: length, updated_at: now })
      .where('id', '=', id)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) === 1;
  }

  /** Whether every user of the customer must sign in with a second factor. False when there is no such customer. */
  async setRequireTwoFactor(id: CustomerId, required: boolean, now: number): Promise<boolean> {
    const res = await this.db.kysely
      .updateTable('customers')
      .set({ require_two_factor: required ? 1 : 0, updated_at: now })
      .where('id', '=', id)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) === 1;
  }

  async list(): Promise<Customer[]> {
    const rows = await this.db.kysely.selectFrom('customers').select(COLUMNS).orderBy('id').execute();
    return rows.map(toCustomer);
  }

  /**
   * Sets the credit limit, guarded by the limit the operator saw (`from`): false, changing
   * nothing, when there is no such customer or its limit changed meanwhile.
   */
  async setCreditLimit(id: CustomerId, from: number, to: number, now: number): Promise<boolean> {
    const res = await this.db.kysely
      .updateTable('customers')
      .set({ credit_limit_minor: to, updated_at: now })
      .where('id', '=', id)
      .where('credit_limit_minor', '=', from)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) === 1;
  }

  /** Suspends a customer that is not suspended. False, changing nothing, otherwise. */
  async suspend(id: CustomerId, now: number): Promise<boolean> {
    const res = await this.db.kysely
      .updateTable('customers')
      .set({ suspended_at: now, updated_at: now })
      .where('id', '=', id)
      .where('suspended_at', 'is', null)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) === 1;
  }

  /** Lifts the suspension of a suspended customer. False, changing nothing, otherwise. */
  async unsuspend(id: CustomerId, now: number): Promise<boolean> {
    const res = await this.db.kysely
      .updateTable('customers')
      .set({ suspended_at: null, updated_at: now })
      .where('id', '=', id)
      .where('suspended_at', 'is not', null)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) === 1;
  }

  /** Every customer with when it was suspended (null: it is not), by id; for operators. */
  async listWithSuspension(): Promise<{ customer: Customer; suspendedAt: number | null }[]> {
    const rows = await this.db.kysely
      .selectFrom('customers')
      .select([...COLUMNS, 'suspended_at'])
      .orderBy('id')
      .execute();
    return rows.map((r) => ({
      customer: toCustomer(r),
      suspendedAt: r.suspended_at === null ? null : Number(r.suspended_at),
    }));
  }
}
