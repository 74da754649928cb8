import type { Brand, CustomerId } from '../core/index.js';
import { customerId } from '../core/index.js';
import type { Db } from './database.js';

/** Id of a hash-store API key (kv_keys.id). */
export type KvKeyId = Brand<number, 'KvKeyId'>;
export const kvKeyId = (n: number) => n as KvKeyId;

/** A live hash-store key, resolved from its hash. */
export interface KvKeyOwner {
  readonly keyId: KvKeyId;
  readonly customerId: CustomerId;
}

export interface KvKeyInfo extends KvKeyOwner {
  readonly label: string;
  readonly createdAt: number;
  readonly revokedAt: number | null;
}

/** One filed hash. */
export interface KvEntry {
  readonly name: string;
  readonly hash: string;
  readonly updatedAt: number;
}

/**
 * The auxiliary hash store (spec 4.35): API keys by their SHA-256, and one hash per
 * (customer, host name). Every entry read and write names the customer, so a caller holding
 * customer A's key cannot reach B's entries. Names and hashes are stored as given: the RA
 * validates and normalizes them.
 */
export class KvRepo {
  constructor(private readonly db: Db) {}

  /**
   * Stores a key for a customer. Returns the new key's id, or undefined when the customer does
   * not exist (nothing is written then). Throws on a duplicate key hash (never happens for
   * random 256-bit keys).
   */
  async createKey(customer: CustomerId, keyHash: string, label: string, now: number): Promise<KvKeyId | undefined> {
    // INSERT … SELECT from customers: an unknown customer inserts no row instead of tripping
    // the foreign key, on both dialects.
    const row = await this.db.kysely
      .insertInto('kv_keys')
      .columns(['customer_id', 'key_hash', 'label', 'created_at', 'revoked_at'])
      .expression((eb) =>
        eb
          .selectFrom('customers')
          .select((s) => [
            s.ref('customers.id').as('customer_id'),
            s.val(keyHash).as('key_hash'),
            s.val(label).as('label'),
            s.val(now).as('created_at'),
            s.val(null).as('revoked_at'),
          ])
          .where('customers.id', '=', customer),
      )
      .returning('id')
      .executeTakeFirst();
    return row === undefined ? undefined : kvKeyId(row.id);
  }

  /** The customer of a live (not revoked) key with this hash; undefined for unknown or revoked keys. */
  async customerForKey(keyHash: string): Promise<KvKeyOwner | undefined> {
    const row = await this.db.kysely
      .selectFrom('kv_keys')
      .select(['id', 'customer_id'])
      .where('key_hash', '=', keyHash)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return row === undefined ? undefined : { keyId: kvKeyId(row.id), customerId: customerId(row.customer_id) };
  }

  /**
   * Revokes a customer's key; it stops working at once. Returns false when the customer has no
   * such live key (unknown, another customer's, or already revoked).
   */
  async revokeKey(customer: CustomerId, id: KvKeyId, now: number): Promise<boolean> {
    const res = await this.db.kysely
      .updateTable('kv_keys')
      .set({ revoked_at: now })
      .where('id', '=', id)
      .where('customer_id', '=', customer)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return res.numUpdatedRows > 0n;
  }

  /** A customer's keys, newest first, revoked ones included. */
  async listKeys(customer: CustomerId): Promise<KvKeyInfo[]> {
    const rows = await this.db.kysely
      .selectFrom('kv_keys')
      .select(['id', 'customer_id', 'label', 'created_at', 'revoked_at'])
      .where('customer_id', '=', customer)
      .orderBy('id', 'desc')
      .execute();
    return rows.map((r) => ({
      keyId: kvKeyId(r.id),
      customerId: customerId(r.customer_id),
      label: r.label,
      createdAt: r.created_at,
      revokedAt: r.revoked_at,
    }));
  }

  /** Files `hash` for (customer, name), replacing any earlier hash (one upsert, both dialects). */
  async put(customer: CustomerId, name: string, hash: string, now: number): Promise<void> {
    await this.db.kysely
      .insertInto('kv_entries')
      .values({ customer_id: customer, name, hash, updated_at: now })
      .onConflict((oc) => oc.columns(['customer_id', 'name']).doUpdateSet({ hash, updated_at: now }))
      .execute();
  }

  /** The hash filed by this customer for `name`; undefined when there is none. */
  async get(customer: CustomerId, name: string): Promise<KvEntry | undefined> {
    const row = await this.db.kysely
      .selectFrom('kv_entries')
      .select(['name', 'hash', 'updated_at'])
      .where('customer_id', '=', customer)
      .where('name', '=', name)
      .executeTakeFirst();
    return row === undefined ? undefined : { name: row.name, hash: row.hash, updatedAt: row.updated_at };
  }
}
