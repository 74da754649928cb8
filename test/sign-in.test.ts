// People sign in and authorise applications (RFC 6749 §4.1, RFC 7636), driven over real HTTP
// as a browser and an application would: the authorize request sends the browser to the sign-in
// page, the consent form hands out a code, the application exchanges it for a token that acts for
// the person (/Profile says UI).
import { createHash, randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext, type TestCustomer } from './support/app.js';
import { browser as openBrowser, hiddenFields } from './support/browser.js';
import { testDialects } from './support/databases.js';

const PASSWORD = 'Saturn-vanilla-42-drift';

describe.each(testDialects())('sign-in and the authorization_code flow on $dialect', (dialect) => {
  let t: TestContext;
  let a: TestCustomer;
  let base: string;
  let username: string;
  let userId: number;
  let client: { id: string; secret: string; redirect: string };
  let other: { id: string; secret: string };

  beforeAll(async () => {
    t = await createTestContext(dialect, { CERTDESK_RATE_LIMIT: '1000000', CERTDESK_RATE_LIMIT_ANONYMOUS: '1000000' });
    a = await t.customer({ name: 'Alpha' });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    username = `ada-${randomBytes(3).toString('hex')}`;
    const user = await t.call(a.token, {
      method: 'POST',
      url: '/rest/v1/User',
      payload: {
        FullName: 'Ada Lovelace',
        Email: 'ada@customer.example',
        Username: username,
        Password: PASSWORD,
        Roles: ['ORDERS', 'READONLY'],
      },
    });
    userId = user.json().Id;
    const redirect = 'http://127.0.0.1:8400/callback?from=panel';
    const made = (
      await t.call(a.token, {
        method: 'POST',
        url: '/rest/v1/Application',
        payload: { Name: 'Panel', Scopes: 'profile read order', RedirectUris: [redirect] },
      })
    ).json();
    client = { id: made.ClientId, secret: made.ClientSecret, redirect };
    const second = (
      await t.call(a.token, {
        method: 'POST',
        url: '/rest/v1/Application',
        payload: { Name: 'Other', Scopes: 'read', RedirectUris: [redirect] },
      })
    ).json();
    other = { id: second.ClientId, secret: second.ClientSecret };
  }, 60_000);
  afterAll(async () => t.close());

  const browser = (headers: Record<string, string> = {}) => openBrowser(base, headers);
  const pkce = () => {
    const verifier = randomBytes(32).toString('base64url');
    return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
  };
  const authorizeUrl = (params: Record<string, string>) =>
    `/oauth2/authorize?${new URLSearchParams({ response_type: 'code', client_id: client.id, redirect_uri: client.redirect, state: 's-42', ...params })}`;
  const token = (form: Record<string, string>) =>
    fetch(`${base}/oauth2/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(form).toString(),
    });

  /** Signs in through the authorize request and allows it; returns the redirect's code and state. */
  async function consent(b: ReturnType<typeof browser>, params: Record<string, string>) {
    const start = await b.send('GET', authorizeUrl(params));
    expect(start.status).toBe(303);
    expect(start.location).toMatch(/^\/signin\?next=/);
    const form = await b.send('GET', start.location);
    expect(form.text).toContain('name="password"');
    const signedIn = await b.send('POST', '/signin', { username, password: PASSWORD, ...hiddenFields(form.text) });
    expect(signedIn.status).toBe(303);
    expect(b.cookie()).toMatch(/^certdesk_session=cdw_/);
    expect(signedIn.headers.get('set-cookie')).toMatch(/HttpOnly; SameSite=Lax/);
    const page = await b.send('GET', signedIn.location);
    expect(page.status).toBe(200);
    expect(page.text).toContain('Panel');
    const answer = await b.send('POST', '/oauth2/authorize', { ...hiddenFields(page.text), decision: 'allow' });
    expect(answer.status).toBe(302);
    const to = new URL(answer.location);
    expect(`${to.origin}${to.pathname}`).toBe('http://127.0.0.1:8400/callback');
    expect(to.searchParams.get('from')).toBe('panel');
    return { code: to.searchParams.get('code')!, state: to.searchParams.get('state') };
  }

  it('ok/sign in, consent, code, token with PKCE: /Profile says UI and names the person; the code is single-use', async () => {
    const { verifier, challenge } = pkce();
    const { code, state } = await consent(browser(), {
      scope: 'profile read',
      code_challenge: challenge,
      code_challenge_method: 'S256',
    });
    expect(state).toBe('s-42');
    const res = await token({
      grant_type: 'authorization_code',
      code,
      redirect_uri: client.redirect,
      client_id: client.id,
      code_verifier: verifier,
    });
    expect(res.status).toBe(200);
    const tokens = (await res.json()) as { access_token: string; refresh_token: string; scope: string };
    expect(tokens.scope).toBe('profile read');
    const profile = await (
      await fetch(`${base}/rest/v1/Profile`, { headers: { authorization: `Bearer ${tokens.access_token}` } })
    ).json();
    expect(profile).toMatchObject({ Scope: 'UI', AuthorizationID: userId, CustomerID: a.customerId });
    const refreshed = (await (
      await token({
        grant_type: 'refresh_token',
        refresh_token: tokens.refresh_token,
        client_id: client.id,
        client_secret: client.secret,
      })
    ).json()) as { access_token: string };
    const later = await (
      await fetch(`${base}/rest/v1/Profile`, { headers: { authorization: `Bearer ${refreshed.access_token}` } })
    ).json();
    expect(later).toMatchObject({ Scope: 'UI', AuthorizationID: userId });
    // The code presented again is refused, and what it gave is taken back (RFC 6749 §4.1.2).
    const again = await token({
      grant_type: 'authorization_code',
      code,
      redirect_uri: client.redirect,
      client_id: client.id,
      code_verifier: verifier,
    });
    expect([again.status, ((await again.json()) as { error: string }).error]).toEqual([400, 'invalid_grant']);
    const after = await fetch(`${base}/rest/v1/Profile`, {
      headers: { authorization: `Bearer ${refreshed.access_token}` },
    });
    expect(after.status).toBe(401);
  });

  it("ok/the original desktop client's request (no PKCE) is exchanged with the client secret, not without it", async () => {
    const first = await consent(browser(), {});
    const noSecret = await token({ grant_type: 'authorization_code', code: first.code, client_id: client.id });
    expect([noSecret.status, ((await noSecret.json()) as { error: string }).error]).toEqual([400, 'invalid_grant']);
    const second = await consent(browser(), {});
    const withSecret = await token({
      grant_type: 'authorization_code',
      code: second.code,
      client_id: client.id,
      client_secret: client.secret,
    });
    expect(withSecret.status).toBe(200);
    expect(((await withSecret.json()) as { scope: string }).scope).toBe('profile read order');
  });

  it('fail/a wrong verifier, another client or another redirect_uri get invalid_grant', async () => {
    for (const bad of [
      (c: string) => ({ code: c, client_id: client.id, code_verifier: pkce().verifier }),
      (c: string, v: string) => ({ code: c, client_id: other.id, client_secret: other.secret, code_verifier: v }),
      (c: string, v: string) => ({
        code: c,
        client_id: client.id,
        code_verifier: v,
        redirect_uri: 'http://127.0.0.1:8400/other',
      }),
    ]) {
      const { verifier, challenge } = pkce();
      const { code } = await consent(browser(), { code_challenge: challenge, code_challenge_method: 'S256' });
      const res = await token({ grant_type: 'authorization_code', ...bad(code, verifier) });
      expect([res.status, ((await res.json()) as { error: string }).error]).toEqual([400, 'invalid_grant']);
    }
  });

  it('fail/a wrong password and an unknown user get the same page; nothing says which part was wrong', async () => {
    const b = browser();
    const wrong = await b.send('POST', '/signin', { username, password: 'not-the-password-at-all' });
    const unknown = await b.send('POST', '/signin', { username: 'nobody-here', password: 'not-the-password-at-all' });
    expect([wrong.status, unknown.status]).toEqual([401, 401]);
    expect(wrong.text).toBe(unknown.text);
    expect(wrong.text).toContain('Sign-in failed');
    expect(b.cookie()).toBe('');
  });

  it('fail/a form from another site is refused; an unregistered redirect_uri is shown, never followed', async () => {
    const cross = await browser({ origin: 'https://evil.example' }).send('POST', '/signin', {
      username,
      password: PASSWORD,
    });
    expect(cross.status).toBe(403);
    const b = browser();
    const bad = await b.send('GET', authorizeUrl({ redirect_uri: 'https://evil.example/cb' }));
    expect(bad.status).toBe(400);
    expect(bad.location).toBe('');
    const unknownClient = await b.send('GET', authorizeUrl({ client_id: 'cdc_nobody' }));
    expect(unknownClient.status).toBe(400);
  });

  it('fail/a scope beyond the application or a denial goes back to the client with the error and the state', async () => {
    const b = browser();
    const wide = await b.send('GET', authorizeUrl({ scope: 'write' }));
    expect(wide.status).toBe(302);
    expect(new URL(wide.location).searchParams.get('error')).toBe('invalid_scope');
    expect(new URL(wide.location).searchParams.get('state')).toBe('s-42');
    const start = await b.send('GET', authorizeUrl({}));
    const form = await b.send('GET', start.location);
    const signedIn = await b.send('POST', '/signin', { username, password: PASSWORD, ...hiddenFields(form.text) });
    const page = await b.send('GET', signedIn.location);
    const denied = await b.send('POST', '/oauth2/authorize', { ...hiddenFields(page.text), decision: 'deny' });
    expect(new URL(denied.location).searchParams.get('error')).toBe('access_denied');
    const forged = await b.send('POST', '/oauth2/authorize', {
      ...hiddenFields(page.text),
      csrf: 'forged',
      decision: 'allow',
    });
    expect(forged.status).toBe(400);
  });

  it('ok/signing in never redirects off the site; German pages; signing out ends the session', async () => {
    const b = browser({ 'accept-language': 'de-DE,de;q=0.9' });
    const form = await b.send('GET', '/signin?next=//evil.example/x');
    expect(form.text).toContain('Anmelden');
    expect(form.text).toContain('lang="de"');
    const signedIn = await b.send('POST', '/signin', { username, password: PASSWORD, next: '//evil.example/x' });
    expect(signedIn.location).toBe('/');
    const account = await b.send('GET', '/account');
    expect(account.text).toContain('Angemeldet als');
    const out = await b.send('POST', '/signout', hiddenFields(account.text));
    expect(out.status).toBe(303);
    expect((await b.send('GET', '/account')).status).toBe(303);
  });

  it("ok/a new password ends the person's sessions", async () => {
    const b = browser();
    const form = await b.send('GET', '/signin');
    await b.send('POST', '/signin', { username, password: PASSWORD, ...hiddenFields(form.text) });
    expect((await b.send('GET', '/account')).status).toBe(200);
    const changed = await t.call(a.token, {
      method: 'POST',
      url: `/rest/v1/User/${userId}`,
      payload: { Password: PASSWORD },
    });
    expect(changed.statusCode).toBe(200);
    expect((await b.send('GET', '/account')).status).toBe(303);
  });
});
