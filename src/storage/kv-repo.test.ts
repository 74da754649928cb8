import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDialects } from '../../test/support/databases.js';
import { customerId, type CustomerId } from '../core/index.js';
import { CustomersRepo } from './customers-repo.js';
import type { Db } from './database.js';
import { KvRepo, kvKeyId } from './kv-repo.js';

describe.each(testDialects())('KvRepo on $dialect', ({ open }) => {
  let db: Db;
  let kv: KvRepo;
  let a: CustomerId;
  let b: CustomerId;
  beforeAll(async () => {
    db = await open();
    kv = new KvRepo(db);
    const customers = new CustomersRepo(db);
    const base = {
      email: 'ops@acme.test',
      currency: 'EUR',
      creditLimitMinor: 0,
      country: 'DE',
      locale: 'de_DE',
      timezone: 'UTC',
    };
    a = (await customers.create({ ...base, name: 'A' }, 1)).id;
    b = (await customers.create({ ...base, name: 'B' }, 1)).id;
  });
  afterAll(async () => {
    await db.close();
  });

  describe('keys', () => {
    it('ok/finds the customer of a live key by its hash', async () => {
      const id = await kv.createKey(a, 'hash-a1', 'web01', 100);
      expect(id).toEqual(expect.any(Number));
      expect(await kv.customerForKey('hash-a1')).toEqual({ keyId: id, customerId: a });
      expect(await kv.listKeys(a)).toContainEqual({
        keyId: id,
        customerId: a,
        label: 'web01',
        createdAt: 100,
        revokedAt: null,
      });
    });

    it('fail/an unknown hash finds nobody', async () => {
      expect(await kv.customerForKey('no-such-hash')).toBeUndefined();
    });

    it('fail/creates nothing for an unknown customer', async () => {
      expect(await kv.createKey(customerId(999_999), 'hash-x', 'x', 100)).toBeUndefined();
      expect(await kv.customerForKey('hash-x')).toBeUndefined();
    });

    it('fail/refuses a duplicate key hash', async () => {
      await kv.createKey(a, 'hash-dup', 'one', 100);
      await expect(kv.createKey(b, 'hash-dup', 'two', 100)).rejects.toThrow();
    });

    it('ok/a revoked key stops resolving; revoking twice or as another customer changes nothing', async () => {
      const id = await kv.createKey(b, 'hash-b1', 'web02', 100);
      if (id === undefined) throw new Error('key not created');
      expect(await kv.revokeKey(a, id, 150)).toBe(false);
      expect(await kv.customerForKey('hash-b1')).toEqual({ keyId: id, customerId: b });
      expect(await kv.revokeKey(b, id, 200)).toBe(true);
      expect(await kv.customerForKey('hash-b1')).toBeUndefined();
      expect(await kv.revokeKey(b, id, 300)).toBe(false);
      expect(await kv.revokeKey(b, kvKeyId(999_999), 300)).toBe(false);
      expect((await kv.listKeys(b)).find((k) => k.keyId === id)?.revokedAt).toBe(200);
    });
  });

  describe('entries', () => {
    it('ok/put then get returns the hash and its time', async () => {
      await kv.put(a, 'www.example.org', 'h1', 500);
      expect(await kv.get(a, 'www.example.org')).toEqual({ name: 'www.example.org', hash: 'h1', updatedAt: 500 });
    });

    it('ok/a second put replaces the hash (upsert)', async () => {
      await kv.put(a, 'upsert.example.org', 'first', 500);
      await kv.put(a, 'upsert.example.org', 'second', 600);
      expect(await kv.get(a, 'upsert.example.org')).toEqual({
        name: 'upsert.example.org',
        hash: 'second',
        updatedAt: 600,
      });
      const rows = await db.kysely
        .selectFrom('kv_entries')
        .select('hash')
        .where('name', '=', 'upsert.example.org')
        .execute();
      expect(rows).toHaveLength(1);
    });

    it('ok/concurrent puts of one name leave exactly one row', async () => {
      await Promise.all(Array.from({ length: 20 }, (_, i) => kv.put(a, 'race.example.org', `h${i}`, 700 + i)));
      const rows = await db.kysely
        .selectFrom('kv_entries')
        .select('hash')
        .where('customer_id', '=', a)
        .where('name', '=', 'race.example.org')
        .execute();
      expect(rows).toHaveLength(1);
    });

    it('fail/never returns another customer’s entry; the same name is kept apart per customer', async () => {
      await kv.put(a, 'shared.example.org', 'hash-of-a', 800);
      expect(await kv.get(b, 'shared.example.org')).toBeUndefined();
      await kv.put(b, 'shared.example.org', 'hash-of-b', 900);
      expect((await kv.get(a, 'shared.example.org'))?.hash).toBe('hash-of-a');
      expect((await kv.get(b, 'shared.example.org'))?.hash).toBe('hash-of-b');
    });

    it('fail/an unknown name has no entry', async () => {
      expect(await kv.get(a, 'nothing.example.org')).toBeUndefined();
    });
  });
});
