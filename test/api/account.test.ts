import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { customerId, userId, type Role } from '../../src/core/index.js';
import { createTestContext, type TestContext, type TestCustomer } from '../support/app.js';
import { testDialects } from '../support/databases.js';

describe.each(testDialects())('account endpoints on $dialect', (dialect) => {
  let t: TestContext;
  let a: TestCustomer;
  let b: TestCustomer;
  beforeAll(async () => {
    t = await createTestContext(dialect);
    a = await t.customer({ name: 'Alpha', creditLimit: 1234.5 });
    b = await t.customer({ name: 'Beta', currency: 'JPY', creditLimit: 100000 });
  });
  afterAll(async () => t.close());

  /** A token for a new user of `c` holding `roles`, through an application with every scope. */
  async function tokenWithRoles(c: TestCustomer, roles: Role[]): Promise<string> {
    const created = await t.call(c.token, {
      method: 'POST',
      url: '/rest/v1/User',
      payload: {
        Username: `u${Math.random().toString(36).slice(2)}`,
        FullName: 'Sub User',
        Email: 'sub@customer.example',
        Password: 'correct horse battery',
        Roles: roles,
      },
    });
    const user = { id: userId(created.json().Id as number) };
    const { application, clientSecret } = await t.services.accounts.createApplication({
      customerId: customerId(c.customerId),
      userId: user.id,
      scopes: ['profile', 'limit', 'read', 'quote', 'order', 'voucher', 'write'],
    });
    return t.token({ clientId: application.clientId, clientSecret });
  }

  describe('GET /Profile', () => {
    it('ok/returns the caller’s own profile (spec 2.1)', async () => {
      const res = await t.call(a.token, { method: 'GET', url: '/rest/v1/Profile' });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({
        success: true,
        AuthType: 'OAUTH2',
        AuthorizationID: expect.any(Number),
        Country: 'DE',
        Currency: 'EUR',
        CustomerID: a.customerId,
        Locale: 'de_DE',
        OAuth2_Token: a.token,
        Scope: 'API',
        Timezone: 'Europe/Berlin',
      });
      expect(res.headers['content-length']).toBe(String(Buffer.byteLength(res.body)));
    });

    it('ok/each customer sees only itself', async () => {
      const res = await t.call(b.token, { method: 'GET', url: '/rest/v1/Profile' });
      expect(res.json().CustomerID).toBe(b.customerId);
      expect(res.json().Currency).toBe('JPY');
    });

    it('fail/no token, a malformed header and an unknown token → 401', async () => {
      for (const headers of [
        {},
        { authorization: 'Basic abc' },
        { authorization: 'Bearer' },
        { authorization: 'Bearer cda_nothing' },
      ]) {
        const res = await t.app.inject({ method: 'GET', url: '/rest/v1/Profile', headers });
        expect(res.statusCode).toBe(401);
        expect(res.json()).toMatchObject({
          success: false,
          ErrorId: -2001,
          Message: 'The access token is incorrect or has expired.',
        });
      }
    });

    it('fail/a token without the profile or read scope → 403', async () => {
      const token = await t.token(a, 'limit');
      const res = await t.call(token, { method: 'GET', url: '/rest/v1/Profile' });
      expect(res.statusCode).toBe(403);
      expect(res.json()).toMatchObject({ success: false, ErrorId: -2004 });
    });

    it('ok/the read scope opens every GET', async () => {
      const token = await t.token(a, 'read');
      expect((await t.call(token, { method: 'GET', url: '/rest/v1/Profile' })).statusCode).toBe(200);
      expect((await t.call(token, { method: 'GET', url: '/rest/v1/Limit' })).statusCode).toBe(200);
    });
  });

  describe('GET /Limit', () => {
    it('ok/limit and used in the account currency with its decimals', async () => {
      const res = await t.call(a.token, { method: 'GET', url: '/rest/v1/Limit' });
      expect(res.json()).toEqual({ success: true, LimitInfo: { Limit: 1234.5, Used: 0 } });
      const yen = await t.call(b.token, { method: 'GET', url: '/rest/v1/Limit' });
      expect(yen.json()).toEqual({ success: true, LimitInfo: { Limit: 100000, Used: 0 } });
    });

    it('fail/profile scope alone → 403', async () => {
      const token = await t.token(a, 'profile');
      expect((await t.call(token, { method: 'GET', url: '/rest/v1/Limit' })).statusCode).toBe(403);
    });

    it('fail/wrong method → 404 JSON', async () => {
      const res = await t.call(a.token, { method: 'POST', url: '/rest/v1/Limit', payload: {} });
      expect(res.statusCode).toBe(404);
      expect(res.json()).toMatchObject({ success: false });
    });
  });

  describe('roles (effective rights = token scopes ∩ user roles)', () => {
    it.each([
      ['ok/BILLING reads the limit', ['BILLING'], '/rest/v1/Limit', 200],
      ['fail/ORDERS cannot read the limit', ['ORDERS'], '/rest/v1/Limit', 403],
      ['ok/ORDERS reads the profile', ['ORDERS'], '/rest/v1/Profile', 200],
      ['ok/READONLY reads the limit', ['READONLY'], '/rest/v1/Limit', 200],
      ['fail/VOUCHERS cannot read the limit', ['VOUCHERS'], '/rest/v1/Limit', 403],
    ] as [string, Role[], string, number][])('%s', async (_name, roles, url, status) => {
      const token = await tokenWithRoles(a, roles);
      const res = await t.call(token, { method: 'GET', url });
      expect(res.statusCode).toBe(status);
      if (status === 403) expect(res.json().ErrorId).toBe(-2004);
    });
  });
});
