// Where an authorization-code token may act (RFC 6749 §4.1, RFC 7636), over real HTTP: only the
// people of the account an application belongs to can authorise it; a token never acts in one
// account for a person of another, nor outlives its application's owner; a code presented twice
// takes back what it gave; redirect_uri is required where the request had to name it.
import { createHash, randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applicationId, customerId, userId } from '../src/core/index.js';
import { hashSecret } from '../src/ra/accounts/secrets.js';
import { OauthCodesRepo, TokensRepo } from '../src/storage/index.js';
import { createTestContext, type TestContext, type TestCustomer } from './support/app.js';
import { browser as openBrowser, hiddenFields } from './support/browser.js';
import { testDialects } from './support/databases.js';

const PASSWORD = 'Saturn-vanilla-42-drift';
const CALLBACK = 'http://127.0.0.1:8400/callback';
const SECOND_CALLBACK = 'http://127.0.0.1:8400/second';

describe.each(testDialects())('authorization-code tokens stay within their account on $dialect', (dialect) => {
  let t: TestContext;
  let a: TestCustomer;
  let b: TestCustomer;
  let base: string;
  const people: Record<'ada' | 'bob' | 'owner', { username: string; id: number }> = {} as never;
  let panel: { id: string; secret: string; appId: number };
  let twoUris: { id: string; secret: string };

  const makeUser = async (c: TestCustomer, roles: string[]) => {
    const username = `u-${randomBytes(4).toString('hex')}`;
    const res = await t.call(c.token, {
      method: 'POST',
      url: '/rest/v1/User',
      payload: {
        FullName: 'Test Person',
        Email: 'p@customer.example',
        Username: username,
        Password: PASSWORD,
        Roles: roles,
      },
    });
    expect(res.statusCode).toBe(200);
    return { username, id: res.json().Id as number };
  };
  beforeAll(async () => {
    t = await createTestContext(dialect, { CERTDESK_RATE_LIMIT: '1000000', CERTDESK_RATE_LIMIT_ANONYMOUS: '1000000' });
    a = await t.customer({ name: 'Alpha' });
    b = await t.customer({ name: 'Bravo' });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    people.ada = await makeUser(a, ['ORDERS', 'READONLY']);
    people.bob = await makeUser(b, ['ADMIN']);
    people.owner = await makeUser(a, ['ADMIN']);
    const made = async (payload: Record<string, unknown>) => {
      const res = await t.call(a.token, { method: 'POST', url: '/rest/v1/Application', payload });
      expect(res.statusCode).toBe(200);
      return res.json();
    };
    const p = await made({ Name: 'Panel', Scopes: 'profile read order write', RedirectUris: [CALLBACK] });
    panel = { id: p.ClientId, secret: p.ClientSecret, appId: p.Id };
    const two = await made({ Name: 'Two', Scopes: 'profile read', RedirectUris: [CALLBACK, SECOND_CALLBACK] });
    twoUris = { id: two.ClientId, secret: two.ClientSecret };
  }, 60_000);
  afterAll(async () => t.close());

  const pkce = () => {
    const verifier = randomBytes(32).toString('base64url');
    return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
  };
  const token = async (form: Record<string, string>) => {
    const res = await fetch(`${base}/oauth2/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(form).toString(),
    });
    return { status: res.status, body: (await res.json()) as Record<string, string> };
  };
  const profile = async (access: string) =>
    fetch(`${base}/rest/v1/Profile`, { headers: { authorization: `Bearer ${access}` } });

  /** Signs `username` in through the authorize request; returns the browser and the page it lands on. */
  async function signedInAt(username: string, params: Record<string, string>) {
    const br = openBrowser(base);
    const query = new URLSearchParams({ response_type: 'code', state: 's-1', ...params });
    const start = await br.send('GET', `/oauth2/authorize?${query}`);
    expect(start.status).toBe(303);
    const form = await br.send('GET', start.location);
    const signedIn = await br.send('POST', '/signin', { username, password: PASSWORD, ...hiddenFields(form.text) });
    expect(signedIn.status).toBe(303);
    return { br, page: await br.send('GET', signedIn.location) };
  }

  /** The code `username` gets by allowing `params`' request. */
  async function codeFor(username: string, params: Record<string, string>): Promise<string> {
    const { br, page } = await signedInAt(username, params);
    expect(page.status).toBe(200);
    const answer = await br.send('POST', '/oauth2/authorize', { ...hiddenFields(page.text), decision: 'allow' });
    expect(answer.status).toBe(302);
    return new URL(answer.location).searchParams.get('code')!;
  }

  it("fail/a person of another account cannot authorise the application: no consent form, no code, the account's data untouched", async () => {
    const { verifier, challenge } = pkce();
    const params = {
      client_id: panel.id,
      redirect_uri: CALLBACK,
      code_challenge: challenge,
      code_challenge_method: 'S256',
    };
    const { br, page } = await signedInAt(people.bob.username, params);
    expect(page.status).toBe(400);
    expect(page.text).toContain('This application belongs to another account');
    expect(page.text).not.toContain('name="decision"');
    // The consent form posted anyway (its fields rebuilt by hand, the session's CSRF token from /account).
    const account = await br.send('GET', '/account');
    const csrf = /name="csrf" value="([^"]+)"/.exec(account.text)?.[1];
    expect(csrf).toBeDefined();
    const posted = await br.send('POST', '/oauth2/authorize', {
      response_type: 'code',
      state: 's-1',
      ...params,
      csrf: csrf!,
      decision: 'allow',
    });
    expect(posted.status).toBe(400);
    expect(posted.location).toBe('');
    expect(posted.text).toContain('This application belongs to another account');
    const codes = await t.services.db.kysely
      .selectFrom('oauth_codes')
      .select('id')
      .where('user_id', '=', people.bob.id)
      .execute();
    expect(codes).toEqual([]);
    // A code made for such a pair anyway (as before this check) gives no token.
    const forged = randomBytes(32).toString('base64url');
    await new OauthCodesRepo(t.db).create(
      {
        codeHash: hashSecret(forged),
        applicationId: applicationId(panel.appId),
        userId: userId(people.bob.id),
        customerId: customerId(b.customerId),
        redirectUri: CALLBACK,
        scopes: ['profile', 'read', 'order', 'write'],
        codeChallenge: challenge,
        expiresAt: t.clock.nowSeconds() + 60,
      },
      t.clock.nowSeconds(),
    );
    const res = await token({
      grant_type: 'authorization_code',
      code: forged,
      client_id: panel.id,
      code_verifier: verifier,
    });
    expect([res.status, res.body.error]).toEqual([400, 'invalid_grant']);
    // The account's own person still can.
    const own = await codeFor(people.ada.username, params);
    const ok = await token({
      grant_type: 'authorization_code',
      code: own,
      client_id: panel.id,
      code_verifier: verifier,
    });
    expect(ok.status).toBe(200);
    expect(await (await profile(ok.body.access_token!)).json()).toMatchObject({
      CustomerID: a.customerId,
      AuthorizationID: people.ada.id,
    });
  });

  it('fail/a stored token naming a person of another account than its own is refused (such tokens were minted before the check)', async () => {
    const access = `cda_${randomBytes(24).toString('base64url')}`;
    const now = t.clock.nowSeconds();
    await new TokensRepo(t.db).insert(
      [
        {
          hash: hashSecret(access),
          kind: 'access',
          family: randomBytes(16).toString('hex'),
          applicationId: applicationId(panel.appId),
          userId: userId(people.bob.id),
          customerId: customerId(a.customerId),
          scopes: ['profile', 'read'],
          authType: 'UI',
          expiresAt: now + 3600,
        },
      ],
      now,
    );
    expect((await profile(access)).status).toBe(401);
  });

  it("fail/a person's token for an application ends when the application's owner is deactivated", async () => {
    const made = await t.services.accounts.createApplication({
      customerId: customerId(a.customerId),
      userId: userId(people.owner.id),
      scopes: ['profile', 'read'],
      name: 'Owned',
    });
    await t.db.kysely
      .updateTable('api_applications')
      .set({ redirect_uris: CALLBACK })
      .where('id', '=', made.application.id)
      .execute();
    const app = { id: made.application.clientId, secret: made.clientSecret };
    const code = await codeFor(people.ada.username, { client_id: app.id, redirect_uri: CALLBACK });
    const got = await token({ grant_type: 'authorization_code', code, client_id: app.id, client_secret: app.secret });
    expect(got.status).toBe(200);
    expect((await profile(got.body.access_token!)).status).toBe(200);
    const off = await t.call(a.token, {
      method: 'POST',
      url: `/rest/v1/User/${people.owner.id}`,
      payload: { Active: false },
    });
    expect(off.statusCode).toBe(200);
    expect((await profile(got.body.access_token!)).status).toBe(401);
    const refreshed = await token({
      grant_type: 'refresh_token',
      refresh_token: got.body.refresh_token!,
      client_id: app.id,
      client_secret: app.secret,
    });
    expect(refreshed.status).toBe(401);
  });

  it('fail/a code presented a second time is refused and the tokens it gave are revoked, their refreshes included', async () => {
    const code = await codeFor(people.ada.username, { client_id: panel.id, redirect_uri: CALLBACK });
    const form = { grant_type: 'authorization_code', code, client_id: panel.id, client_secret: panel.secret };
    const first = await token(form);
    expect(first.status).toBe(200);
    const refreshed = await token({
      grant_type: 'refresh_token',
      refresh_token: first.body.refresh_token!,
      client_id: panel.id,
      client_secret: panel.secret,
    });
    expect(refreshed.status).toBe(200);
    expect((await profile(refreshed.body.access_token!)).status).toBe(200);
    const again = await token(form);
    expect([again.status, again.body.error]).toEqual([400, 'invalid_grant']);
    expect((await profile(first.body.access_token!)).status).toBe(401);
    expect((await profile(refreshed.body.access_token!)).status).toBe(401);
  });

  it('fail/redirect_uri is required at the token endpoint when the application registers several; ok when it registers one', async () => {
    const code = await codeFor(people.ada.username, { client_id: twoUris.id, redirect_uri: SECOND_CALLBACK });
    const without = await token({
      grant_type: 'authorization_code',
      code,
      client_id: twoUris.id,
      client_secret: twoUris.secret,
    });
    expect([without.status, without.body.error]).toEqual([400, 'invalid_grant']);
    const next = await codeFor(people.ada.username, { client_id: twoUris.id, redirect_uri: SECOND_CALLBACK });
    const named = await token({
      grant_type: 'authorization_code',
      code: next,
      client_id: twoUris.id,
      client_secret: twoUris.secret,
      redirect_uri: SECOND_CALLBACK,
    });
    expect(named.status).toBe(200);
    const single = await codeFor(people.ada.username, { client_id: panel.id });
    const one = await token({
      grant_type: 'authorization_code',
      code: single,
      client_id: panel.id,
      client_secret: panel.secret,
    });
    expect(one.status).toBe(200);
  });
});
