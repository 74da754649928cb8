// A NUL character (U+0000) in anything a client sends is refused with the route's usual 4xx
// answer and changes nothing. PostgreSQL stores no NUL in text (SQLSTATE 22021), so these
// requests used to end in a 500 there; SQLite must answer the same.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildKvApp, type KvApp } from '../../src/web/kv/server.js';
import { toCertdeskError } from '../../src/web/envelope.js';
import { createTestContext, type TestContext, type TestCustomer } from '../support/app.js';
import { testDialects } from '../support/databases.js';

const PASSWORD = 'Saturn-vanilla-42-drift';
const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

/** The tables a refused request could have written to. */
const WATCHED = [
  'users',
  'oauth_tokens',
  'web_sessions',
  'sign_in_failures',
  'audit_events',
  'kv_entries',
  'orders',
] as const;

describe.each(testDialects())('a NUL character in client input on $dialect', (dialect) => {
  let t: TestContext;
  let c: TestCustomer;
  let kv: KvApp;
  let kvKey: string;
  let username: string;

  beforeAll(async () => {
    t = await createTestContext(dialect, { CERTDESK_RATE_LIMIT: '1000000', CERTDESK_RATE_LIMIT_ANONYMOUS: '1000000' });
    c = await t.customer();
    username = `nul-${Date.now().toString(36)}`;
    const user = await t.call(c.token, {
      method: 'POST',
      url: '/rest/v1/User',
      payload: {
        FullName: 'Ada Lovelace',
        Email: 'ada@customer.example',
        Username: username,
        Password: PASSWORD,
        Roles: ['READONLY'],
      },
    });
    expect(user.statusCode, user.body).toBe(200);
    kv = await buildKvApp({ hashStore: t.services.hashStore, logger: false });
    kvKey = (await t.services.hashStore.createKey(c.customerId as never)).key;
  });
  afterAll(async () => {
    await kv?.close();
    await t?.close();
  });

  /** Every row of the watched tables, to show that a refused request wrote nothing. */
  const snapshot = async () =>
    Object.fromEntries(
      await Promise.all(
        WATCHED.map(async (table) => [
          table,
          (await sql`SELECT * FROM ${sql.table(table)} ORDER BY 1`.execute(t.db.kysely)).rows,
        ]),
      ),
    );

  /** Sends `request`, checks that the watched tables are unchanged, and returns the response. */
  const unchanged = async <R>(request: () => Promise<R>): Promise<R> => {
    const before = await snapshot();
    const res = await request();
    expect(await snapshot()).toEqual(before);
    return res;
  };

  const expectEnvelope = (res: { statusCode: number; body: string; json(): unknown }, field: string) => {
    expect(res.statusCode, res.body).toBe(417);
    expect(res.json()).toEqual({
      success: false,
      ErrorId: -1001,
      ErrorField: field,
      Message: expect.stringContaining('NUL character (U+0000)'),
    });
  };

  describe('REST', () => {
    it.each([
      ['GET', undefined],
      ['POST', { FullName: 'Renamed' }],
      ['DELETE', undefined],
    ] as const)('fail/%s /User/a<NUL>b: a path parameter → 417 naming it', async (method, payload) => {
      const res = await unchanged(() =>
        t.call(c.token, { method, url: '/rest/v1/User/a%00b', ...(payload === undefined ? {} : { payload }) }),
      );
      expectEnvelope(res, 'UsernameOrId');
      expect(res.json().Message).toBe('The path parameter UsernameOrId must not contain a NUL character (U+0000).');
    });

    it('fail/GET /Orders?CommonName=a<NUL>b: a query parameter → 417 naming it', async () => {
      const res = await unchanged(() => t.call(c.token, { method: 'GET', url: '/rest/v1/Orders?CommonName=a%00b' }));
      expectEnvelope(res, 'CommonName');
    });

    it('fail/POST /User with a NUL in a JSON member → 417 naming the member; no user', async () => {
      const res = await unchanged(() =>
        t.call(c.token, {
          method: 'POST',
          url: '/rest/v1/User',
          payload: {
            FullName: 'Grace',
            Email: 'g@customer.example',
            Username: 'gr\u0000ace',
            Password: PASSWORD,
            Roles: ['ORDERS'],
          },
        }),
      );
      expectEnvelope(res, 'Username');
    });

    it('fail/a NUL in a nested JSON member is named by its path', async () => {
      const res = await unchanged(() =>
        t.call(c.token, {
          method: 'POST',
          url: '/rest/v1/User',
          payload: {
            FullName: 'Grace',
            Email: 'g@customer.example',
            Username: 'grace-nested',
            Password: PASSWORD,
            Roles: ['ORDERS', 'READ\u0000ONLY'],
          },
        }),
      );
      expectEnvelope(res, 'Roles.1');
    });

    it('fail/a NUL written as \\u0000 in JSON text and one in a form body alike', async () => {
      const json = await unchanged(() =>
        t.call(c.token, {
          method: 'POST',
          url: `/rest/v1/User/${username}`,
          headers: { 'content-type': 'application/json' },
          payload: '{"FullName":"A\\u0000B"}',
        }),
      );
      expectEnvelope(json, 'FullName');
      const form = await unchanged(() =>
        t.call(c.token, { method: 'POST', url: `/rest/v1/User/${username}`, headers: FORM, payload: 'FullName=A%00B' }),
      );
      expectEnvelope(form, 'FullName');
    });

    it('ok/the same requests without the NUL still work', async () => {
      const res = await t.call(c.token, { method: 'GET', url: `/rest/v1/User/${username}` });
      expect(res.statusCode, res.body).toBe(200);
      const orders = await t.call(c.token, { method: 'GET', url: '/rest/v1/Orders?CommonName=ab' });
      expect(orders.statusCode, orders.body).toBe(200);
    });
  });

  describe('OAuth (RFC 6749 bodies)', () => {
    it.each([
      ['a form body', FORM, 'grant_type=client_credentials&client_id=a%00b&client_secret=x'],
      [
        'a JSON body',
        { 'content-type': 'application/json' },
        '{"grant_type":"client_credentials","client_id":"a\\u0000b","client_secret":"x"}',
      ],
    ])('fail/POST /oauth2/token, client_id with a NUL in %s → 400 invalid_request', async (_name, headers, payload) => {
      const res = await unchanged(() => t.app.inject({ method: 'POST', url: '/oauth2/token', headers, payload }));
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json()).toEqual({ error: 'invalid_request', error_description: expect.stringContaining('client_id') });
      expect(res.headers['cache-control']).toBe('no-store');
    });

    it('fail/POST /oauth2/token with a NUL in the Basic credentials → 401 invalid_client', async () => {
      const basic = Buffer.from(`a%00b:${c.clientSecret}`).toString('base64');
      const res = await unchanged(() =>
        t.app.inject({
          method: 'POST',
          url: '/oauth2/token',
          headers: { ...FORM, authorization: `Basic ${basic}` },
          payload: 'grant_type=client_credentials',
        }),
      );
      expect(res.statusCode, res.body).toBe(401);
      expect(res.json()).toMatchObject({ error: 'invalid_client' });
    });

    it('fail/POST /oauth2/revoke with a NUL in the token → 400 invalid_request; the token still works', async () => {
      const res = await unchanged(() =>
        t.app.inject({
          method: 'POST',
          url: '/oauth2/revoke',
          headers: FORM,
          payload: `token=${encodeURIComponent(c.token)}%00&client_id=${c.clientId}&client_secret=${c.clientSecret}`,
        }),
      );
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json()).toEqual({ error: 'invalid_request', error_description: expect.stringContaining('token') });
      const still = await t.call(c.token, { method: 'GET', url: '/rest/v1/Profile' });
      expect(still.statusCode).toBe(200);
    });
  });

  describe('sign-in page', () => {
    it('fail/POST /signin with a NUL in the username → a 400 page, no session, no failure counted', async () => {
      const res = await unchanged(() =>
        t.app.inject({ method: 'POST', url: '/signin', headers: FORM, payload: `username=a%00b&password=x` }),
      );
      expect(res.statusCode, res.body).toBe(400);
      expect(res.headers['content-type']).toMatch(/^text\/html/);
      expect(res.headers['set-cookie']).toBeUndefined();
      expect(res.body).toContain('username must not contain a NUL character (U+0000).');
    });

    it('ok/a wrong password is still the 401 sign-in page', async () => {
      const res = await t.app.inject({
        method: 'POST',
        url: '/signin',
        headers: FORM,
        payload: `username=${username}&password=wrong-password-here`,
      });
      expect(res.statusCode).toBe(401);
      expect(res.headers['content-type']).toMatch(/^text\/html/);
    });
  });

  describe('hash store', () => {
    it.each([
      ['the name (path)', '/a%00b.example.com', { hash: 'abc' }],
      ['the hash (JSON body)', '/nul.example.com', { hash: 'a\u0000b' }],
    ])('fail/a NUL in %s → 400 {message}', async (_name, url, payload) => {
      const res = await unchanged(() => kv.inject({ method: 'POST', url, headers: { 'x-api-key': kvKey }, payload }));
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json()).toEqual({ message: expect.stringContaining('NUL character (U+0000)') });
    });
  });

  describe('PKI', () => {
    it('fail/GET /crl/<a NUL>.crl → 4xx, never a 500', async () => {
      const res = await t.app.inject({ method: 'GET', url: '/crl/a%00b.crl' });
      expect(res.statusCode).toBeGreaterThanOrEqual(400);
      expect(res.statusCode).toBeLessThan(500);
    });
  });

  describe('defence in depth', () => {
    it("ok/the database's own refusal of a NUL (22021, 22P05) is the client's 417, not a 500", async () => {
      let error: unknown;
      try {
        await sql`SELECT ${'a\u0000b'} AS v`.execute(t.db.kysely);
      } catch (e) {
        error = e;
      }
      // SQLite stores NULs; only PostgreSQL raises.
      if (dialect.dialect === 'postgres') expect((error as { code?: string }).code).toBe('22021');
      for (const e of [...(error === undefined ? [] : [error]), { code: '22021' }, { code: '22P05' }]) {
        const mapped = toCertdeskError(e);
        expect(mapped.kind).toBe('invalidInput');
        expect(mapped.message).toContain('NUL character (U+0000)');
      }
    });
  });
});
