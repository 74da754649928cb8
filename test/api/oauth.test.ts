import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext, type TestCustomer } from '../support/app.js';
import { testDialects } from '../support/databases.js';

describe.each(testDialects())('OAuth2 on $dialect', (dialect) => {
  let t: TestContext;
  let c: TestCustomer;
  beforeAll(async () => {
    t = await createTestContext(dialect);
    c = await t.customer();
  });
  afterAll(async () => t.close());

  const profile = (token: string) => t.call(token, { method: 'GET', url: '/rest/v1/Profile' });

  describe('POST /oauth2/token', () => {
    it('ok/client_credentials as a form body', async () => {
      const res = await t.app.inject({
        method: 'POST',
        url: '/oauth2/token',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: `grant_type=client_credentials&client_id=${c.clientId}&client_secret=${encodeURIComponent(c.clientSecret)}&scope=read%20order`,
      });
      expect(res.statusCode).toBe(200);
      const body = res.json();
      expect(body).toMatchObject({ token_type: 'Bearer', expires_in: 86400, scope: 'read order' });
      expect(body.access_token).toMatch(/^cda_[\w-]{43}$/);
      expect(body.refresh_token).toMatch(/^cdr_/);
      expect(res.headers['cache-control']).toBe('no-store');
    });

    it('ok/client_credentials as JSON and with HTTP Basic client authentication', async () => {
      const basic = Buffer.from(`${c.clientId}:${c.clientSecret}`).toString('base64');
      const res = await t.app.inject({
        method: 'POST',
        url: '/oauth2/token',
        headers: { authorization: `Basic ${basic}` },
        payload: { grant_type: 'client_credentials' },
      });
      expect(res.statusCode).toBe(200);
      expect(res.json().scope).toBe('profile limit read quote order voucher write');
    });

    it.each([
      [
        'fail/wrong secret',
        { grant_type: 'client_credentials', client_id: 'x', client_secret: 'y' },
        401,
        'invalid_client',
      ],
      ['fail/no client', { grant_type: 'client_credentials' }, 401, 'invalid_client'],
      [
        'fail/unknown grant',
        { grant_type: 'password', client_id: 'x', client_secret: 'y' },
        400,
        'unsupported_grant_type',
      ],
      ['fail/no grant', { client_id: 'x' }, 400, 'invalid_request'],
    ])('%s', async (_name, payload, status, error) => {
      const res = await t.app.inject({ method: 'POST', url: '/oauth2/token', payload });
      expect(res.statusCode).toBe(status);
      expect(res.json()).toMatchObject({ error });
    });

    it('fail/a scope the application does not hold', async () => {
      const narrow = await t.token(c, 'read');
      expect(narrow).toBeTruthy();
      const res = await t.app.inject({
        method: 'POST',
        url: '/oauth2/token',
        payload: {
          grant_type: 'client_credentials',
          client_id: c.clientId,
          client_secret: c.clientSecret,
          scope: 'read admin',
        },
      });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({ error: 'invalid_scope' });
    });

    it('fail/Basic credentials with broken percent-encoding → invalid_client, never a 500', async () => {
      const basic = Buffer.from('client%zz:secret%').toString('base64');
      const res = await t.app.inject({
        method: 'POST',
        url: '/oauth2/token',
        headers: { authorization: `Basic ${basic}` },
        payload: { grant_type: 'client_credentials' },
      });
      expect(res.statusCode).toBe(401);
      expect(res.json().error).toBe('invalid_client');
    });

    it('fail/an application whose user is inactive gets no token', async () => {
      const other = await t.customer({ name: 'Inactive owner' });
      const app = await t.db.kysely
        .selectFrom('api_applications')
        .select('user_id')
        .where('client_id', '=', other.clientId)
        .executeTakeFirstOrThrow();
      await t.db.kysely.updateTable('users').set({ active: 0 }).where('id', '=', app.user_id).execute();
      const res = await t.app.inject({
        method: 'POST',
        url: '/oauth2/token',
        payload: { grant_type: 'client_credentials', client_id: other.clientId, client_secret: other.clientSecret },
      });
      expect(res.statusCode).toBe(401);
      expect(res.json().error).toBe('invalid_client');
    });

    it('fail/malformed body is invalid_request, never a 500', async () => {
      const res = await t.app.inject({
        method: 'POST',
        url: '/oauth2/token',
        headers: { 'content-type': 'application/json' },
        payload: '{"grant_type":',
      });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({ error: 'invalid_request' });
    });

    it('ok/refresh_token rotates; a reused refresh token ends the family', async () => {
      const first = (
        await t.app.inject({
          method: 'POST',
          url: '/oauth2/token',
          payload: {
            grant_type: 'client_credentials',
            client_id: c.clientId,
            client_secret: c.clientSecret,
            scope: 'profile read',
          },
        })
      ).json();
      const refreshed = await t.app.inject({
        method: 'POST',
        url: '/oauth2/token',
        payload: {
          grant_type: 'refresh_token',
          refresh_token: first.refresh_token,
          client_id: c.clientId,
          client_secret: c.clientSecret,
        },
      });
      expect(refreshed.statusCode).toBe(200);
      const second = refreshed.json();
      expect(second.scope).toBe('profile read');
      expect((await profile(second.access_token)).statusCode).toBe(200);

      const reused = await t.app.inject({
        method: 'POST',
        url: '/oauth2/token',
        payload: {
          grant_type: 'refresh_token',
          refresh_token: first.refresh_token,
          client_id: c.clientId,
          client_secret: c.clientSecret,
        },
      });
      expect(reused.statusCode).toBe(400);
      expect(reused.json().error).toBe('invalid_grant');
      expect((await profile(second.access_token)).statusCode).toBe(401);
    });

    it('fail/refresh token of another client', async () => {
      const other = await t.customer({ name: 'Other' });
      const mine = (
        await t.app.inject({
          method: 'POST',
          url: '/oauth2/token',
          payload: { grant_type: 'client_credentials', client_id: c.clientId, client_secret: c.clientSecret },
        })
      ).json();
      const res = await t.app.inject({
        method: 'POST',
        url: '/oauth2/token',
        payload: {
          grant_type: 'refresh_token',
          refresh_token: mine.refresh_token,
          client_id: other.clientId,
          client_secret: other.clientSecret,
        },
      });
      expect(res.json().error).toBe('invalid_grant');
    });
  });

  describe('bearer tokens', () => {
    it('fail/expired token → 401 with the spec message', async () => {
      const token = await t.token(c, 'profile');
      t.clock.advance(86400);
      try {
        const res = await profile(token);
        expect(res.statusCode).toBe(401);
        expect(res.json()).toEqual({
          success: false,
          Message: 'The access token is incorrect or has expired.',
          ErrorId: -2001,
        });
      } finally {
        t.clock.advance(-86400);
      }
    });

    it('fail/access token used as refresh token and refresh token used as bearer', async () => {
      const pair = (
        await t.app.inject({
          method: 'POST',
          url: '/oauth2/token',
          payload: { grant_type: 'client_credentials', client_id: c.clientId, client_secret: c.clientSecret },
        })
      ).json();
      expect((await profile(pair.refresh_token)).statusCode).toBe(401);
      const res = await t.app.inject({
        method: 'POST',
        url: '/oauth2/token',
        payload: {
          grant_type: 'refresh_token',
          refresh_token: pair.access_token,
          client_id: c.clientId,
          client_secret: c.clientSecret,
        },
      });
      expect(res.json().error).toBe('invalid_grant');
    });
  });

  describe('POST /oauth2/revoke', () => {
    it('ok/revokes an access token at once', async () => {
      const token = await t.token(c, 'profile');
      expect((await profile(token)).statusCode).toBe(200);
      const res = await t.app.inject({
        method: 'POST',
        url: '/oauth2/revoke',
        payload: { token, client_id: c.clientId, client_secret: c.clientSecret },
      });
      expect(res.statusCode).toBe(200);
      expect((await profile(token)).statusCode).toBe(401);
    });

    it('ok/unknown token is not an error (RFC 7009 §2.2)', async () => {
      const res = await t.app.inject({
        method: 'POST',
        url: '/oauth2/revoke',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: `token=nothing&client_id=${c.clientId}&client_secret=${encodeURIComponent(c.clientSecret)}`,
      });
      expect(res.statusCode).toBe(200);
    });

    it('fail/another client cannot revoke my token', async () => {
      const other = await t.customer({ name: 'Other2' });
      const token = await t.token(c, 'profile');
      const res = await t.app.inject({
        method: 'POST',
        url: '/oauth2/revoke',
        payload: { token, client_id: other.clientId, client_secret: other.clientSecret },
      });
      expect(res.statusCode).toBe(200);
      expect((await profile(token)).statusCode).toBe(200);
    });

    it('fail/without client authentication', async () => {
      const res = await t.app.inject({ method: 'POST', url: '/oauth2/revoke', payload: { token: 'x' } });
      expect(res.statusCode).toBe(401);
      expect(res.json().error).toBe('invalid_client');
    });
  });
});
