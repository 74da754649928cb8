import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDialects } from '../../../test/support/databases.js';
import { CertdeskError, FixedClock, customerId, type CustomerId } from '../../core/index.js';
import { AuditRepo, CustomersRepo, type Db } from '../../storage/index.js';
import { KvRepo } from '../../storage/kv-repo.js';
import { HashStore, checkHash, normalizeHostName } from './hash-store.js';
import { hashSecret } from '../accounts/secrets.js';

/** The CertdeskError a promise rejects with (fails the test when it resolves). */
async function rejection(p: Promise<unknown>): Promise<CertdeskError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  if (!(e instanceof CertdeskError)) throw new Error(`expected a CertdeskError, got ${String(e)}`);
  return e;
}

describe('normalizeHostName', () => {
  it.each([
    ['ok/lower-cases', 'WWW.Example.ORG', 'www.example.org'],
    ['ok/drops one trailing dot', 'example.org.', 'example.org'],
    ['ok/converts an IDN to punycode', 'bücher.example', 'xn--bcher-kva.example'],
    ['ok/keeps punycode', 'xn--bcher-kva.example', 'xn--bcher-kva.example'],
    [
      'ok/253 characters',
      `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(61)}`,
      `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(61)}`,
    ],
  ])('%s', (_case, input, expected) => {
    expect(normalizeHostName(input)).toBe(expected);
  });

  it.each([
    ['fail/wildcard', '*.example.org'],
    ['fail/inner wildcard', 'a*.example.org'],
    ['fail/empty', ''],
    ['fail/single label', 'localhost'],
    ['fail/IPv4', '192.0.2.1'],
    ['fail/IPv6', '2001:db8::1'],
    ['fail/bracketed IPv6', '[2001:db8::1]'],
    ['fail/port', 'example.org:8080'],
    ['fail/path', 'example.org/x'],
    ['fail/space', 'exa mple.org'],
    ['fail/underscore', '_acme.example.org'],
    ['fail/empty label', 'a..example.org'],
    ['fail/leading hyphen', '-a.example.org'],
    ['fail/label of 64', `${'a'.repeat(64)}.example.org`],
    ['fail/254 characters', `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(62)}`],
    ['fail/percent', 'ex%61mple.org'],
    ['fail/numeric TLD', 'example.123'],
    ['fail/control character', 'exa\u0000mple.org'],
    ['fail/line break', 'example.org\nx'],
    ['fail/huge', 'a.'.repeat(5000)],
  ])('%s', (_case, input) => {
    expect(() => normalizeHostName(input)).toThrow(expect.objectContaining({ kind: 'invalidInput', field: 'name' }));
  });
});

describe('checkHash', () => {
  it('ok/accepts 1 to 512 printable ASCII characters', () => {
    expect(checkHash('x')).toBe('x');
    expect(checkHash('~'.repeat(512))).toBe('~'.repeat(512));
    expect(checkHash('abc DEF 012 !"#')).toBe('abc DEF 012 !"#');
  });

  it.each([
    ['fail/empty', ''],
    ['fail/513 characters', 'a'.repeat(513)],
    ['fail/line break', 'abc\ndef'],
    ['fail/carriage return', 'abc\r'],
    ['fail/tab', 'a\tb'],
    ['fail/non-ASCII', 'hä'],
    ['fail/number', 42],
    ['fail/missing', undefined],
    ['fail/array', ['a']],
  ])('%s', (_case, input) => {
    expect(() => checkHash(input)).toThrow(expect.objectContaining({ kind: 'invalidInput', field: 'hash' }));
  });
});

describe.each(testDialects())('HashStore on $dialect', ({ open }) => {
  let db: Db;
  let store: HashStore;
  let audit: AuditRepo;
  const clock = new FixedClock(1_800_000_000);
  let a: CustomerId;
  let b: CustomerId;
  beforeAll(async () => {
    db = await open();
    audit = new AuditRepo(db);
    store = new HashStore({ kv: new KvRepo(db), audit, clock });
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

  describe('createKey', () => {
    it('ok/returns a cdk_ key with 256 random bits, stores only its hash and audits', async () => {
      const { key, id } = await store.createKey(a, 'web01');
      expect(key).toMatch(/^cdk_[A-Za-z0-9_-]{43}$/);
      const rows = await db.kysely.selectFrom('kv_keys').select(['key_hash', 'label']).where('id', '=', id).execute();
      expect(rows).toEqual([{ key_hash: hashSecret(key), label: 'web01' }]);
      expect(JSON.stringify(await db.kysely.selectFrom('kv_keys').selectAll().execute())).not.toContain(key);
      expect(await audit.listByCustomer(a)).toContainEqual(
        expect.objectContaining({ action: 'kv.key.created', subject: `kvkey:${id}`, actor: 'operator' }),
      );
    });

    it('fail/an unknown customer → notFound', async () => {
      expect((await rejection(store.createKey(customerId(424_242)))).kind).toBe('notFound');
    });
  });

  describe('file and lookup', () => {
    it('ok/files a hash under the normalized name and reads it back; audits with the address', async () => {
      const { key, id } = await store.createKey(a);
      await store.file(key, 'WWW.Example.ORG.', 'hash-1', '192.0.2.7');
      expect(await store.lookup(key, 'www.example.org')).toBe('hash-1');
      expect(await store.lookup(key, 'WWW.EXAMPLE.ORG')).toBe('hash-1');
      expect(await audit.listByCustomer(a)).toContainEqual(
        expect.objectContaining({
          action: 'kv.hash.filed',
          actor: `kvkey:${id}`,
          clientAddress: '192.0.2.7',
          subject: 'name:www.example.org',
        }),
      );
    });

    it('ok/filing again replaces the hash', async () => {
      const { key } = await store.createKey(a);
      await store.file(key, 'again.example.org', 'old', null);
      await store.file(key, 'again.example.org', 'new', null);
      expect(await store.lookup(key, 'again.example.org')).toBe('new');
    });

    it('ok/every key of a customer sees the customer’s entries', async () => {
      const one = await store.createKey(a);
      const two = await store.createKey(a);
      await store.file(one.key, 'both.example.org', 'shared', null);
      expect(await store.lookup(two.key, 'both.example.org')).toBe('shared');
    });

    it('fail/customer B’s key never reads customer A’s hash', async () => {
      const ka = await store.createKey(a);
      const kb = await store.createKey(b);
      await store.file(ka.key, 'scoped.example.org', 'only-a', null);
      expect(await store.lookup(kb.key, 'scoped.example.org')).toBeUndefined();
      await store.file(kb.key, 'scoped.example.org', 'only-b', null);
      expect(await store.lookup(ka.key, 'scoped.example.org')).toBe('only-a');
      expect(await store.lookup(kb.key, 'scoped.example.org')).toBe('only-b');
    });

    it('fail/missing, unknown and revoked keys → unauthenticated, nothing written', async () => {
      const { key, id } = await store.createKey(a);
      await store.revokeKey(a, id);
      for (const bad of [undefined, '', '   ', 'cdk_unknown', key, 'x'.repeat(10_000)]) {
        expect((await rejection(store.file(bad, 'revoked.example.org', 'h', null))).kind).toBe('unauthenticated');
        expect((await rejection(store.lookup(bad, 'revoked.example.org'))).kind).toBe('unauthenticated');
      }
      expect(
        await db.kysely.selectFrom('kv_entries').select('hash').where('name', '=', 'revoked.example.org').execute(),
      ).toEqual([]);
      expect(await audit.listByCustomer(a)).toContainEqual(
        expect.objectContaining({ action: 'kv.key.revoked', subject: `kvkey:${id}` }),
      );
    });

    it('fail/the key is checked before the input: a wrong key with a bad name is unauthenticated', async () => {
      expect((await rejection(store.file('cdk_wrong', '*.example.org', '', null))).kind).toBe('unauthenticated');
    });

    it('fail/revoking another customer’s key → notFound, and the key keeps working', async () => {
      const { key, id } = await store.createKey(a);
      expect((await rejection(store.revokeKey(b, id))).kind).toBe('notFound');
      expect(await store.lookup(key, 'nothing.example.org')).toBeUndefined();
    });

    it('fail/bad name or hash → invalidInput with the field, nothing written', async () => {
      const { key } = await store.createKey(a);
      expect(await rejection(store.file(key, '*.bad.example.org', 'h', null))).toMatchObject({
        kind: 'invalidInput',
        field: 'name',
      });
      expect(await rejection(store.file(key, 'bad.example.org', 'two\nlines', null))).toMatchObject({
        kind: 'invalidInput',
        field: 'hash',
      });
      expect(await rejection(store.file(key, 'bad.example.org', { hash: 'x' }, null))).toMatchObject({
        kind: 'invalidInput',
        field: 'hash',
      });
      expect(await rejection(store.lookup(key, 'bad_name'))).toMatchObject({ kind: 'invalidInput', field: 'name' });
      expect(await store.lookup(key, 'bad.example.org')).toBeUndefined();
    });
  });
});
