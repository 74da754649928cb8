// The second factor of people (RFC 6238 TOTP) over real HTTP: enrolment with a QR code and a
// first code, ten single-use recovery codes, the code step of signing in (each code good once,
// also against a racing request), and an account that requires it before any consent.
import { createHash, randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { Secret, TOTP } from 'otpauth';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { customerId } from '../src/core/index.js';
import { createTestContext, type TestContext, type TestCustomer } from './support/app.js';
import { browser as openBrowser, hiddenFields } from './support/browser.js';
import { testDialects } from './support/databases.js';

const PASSWORD = 'Saturn-vanilla-42-drift';

describe.each(testDialects())('two-factor sign-in on $dialect', (dialect) => {
  let t: TestContext;
  let a: TestCustomer;
  let base: string;

  beforeAll(async () => {
    t = await createTestContext(dialect, { CERTDESK_RATE_LIMIT: '1000000', CERTDESK_RATE_LIMIT_ANONYMOUS: '1000000' });
    a = await t.customer({ name: 'Alpha' });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  }, 60_000);
  afterAll(async () => t.close());

  const person = async (c: TestCustomer = a) => {
    const username = `p-${randomBytes(4).toString('hex')}`;
    const res = await t.call(c.token, {
      method: 'POST',
      url: '/rest/v1/User',
      payload: {
        FullName: 'Grace Hopper',
        Email: 'grace@customer.example',
        Username: username,
        Password: PASSWORD,
        Roles: ['ORDERS'],
      },
    });
    expect(res.statusCode, res.body).toBe(200);
    return { username, id: res.json().Id as number, token: c.token };
  };
  /** The code an authenticator app shows for `secret` at the test clock's time, `steps` steps later. */
  const codeFor = (secret: string, steps = 0) =>
    new TOTP({ secret: Secret.fromBase32(secret) }).generate({ timestamp: (t.clock.nowSeconds() + steps * 30) * 1000 });
  const signInWithPassword = async (b: ReturnType<typeof openBrowser>, username: string) => {
    const form = await b.send('GET', '/signin');
    return b.send('POST', '/signin', { username, password: PASSWORD, ...hiddenFields(form.text) });
  };
  /** Enrols `username`: returns the secret and the recovery codes shown. */
  const enrol = async (username: string) => {
    const b = openBrowser(base);
    await signInWithPassword(b, username);
    const page = await b.send('GET', '/account/two-factor');
    expect(page.status).toBe(200);
    expect(page.text).toMatch(/<img alt="QR" width="220" height="220" src="data:image\/svg\+xml;base64,/);
    const secret = /<code>([A-Z2-7 ]+)<\/code>/.exec(page.text)![1]!.replace(/ /g, '');
    const done = await b.send('POST', '/account/two-factor', { ...hiddenFields(page.text), code: codeFor(secret) });
    expect(done.status).toBe(200);
    const recovery = [...done.text.matchAll(/<li><code>([a-z0-9]{5}-[a-z0-9]{5})<\/code><\/li>/g)].map((m) => m[1]!);
    return { secret, recovery };
  };

  it('ok/enrol with a QR code and a first code: TwoFactorEnabled, ten recovery codes, the seed sealed, an audit event', async () => {
    const p = await person();
    const { secret, recovery } = await enrol(p.username);
    expect(recovery).toHaveLength(10);
    // The seed is stored sealed (under a key derived from the key file), never as the app's key.
    const stored = await sql<{ totp_secret: string }>`select totp_secret from users where id = ${p.id}`.execute(
      t.db.kysely,
    );
    expect(stored.rows[0]!.totp_secret).not.toContain(secret);
    expect(stored.rows[0]!.totp_secret).not.toMatch(/^[A-Z2-7]+$/);
    expect(new Set(recovery).size).toBe(10);
    expect(
      (await t.call(p.token, { method: 'GET', url: `/rest/v1/User/${p.id}` })).json().UserInfo.TwoFactorEnabled,
    ).toBe(true);
    const events = await t.services.accounts.auditEvents(customerId(a.customerId), 50);
    expect(events.map((e) => [e.action, e.subject])).toContainEqual(['user.two-factor-enabled', `user:${p.id}`]);
  });

  it('fail/a wrong first code enrols nothing', async () => {
    const p = await person();
    const b = openBrowser(base);
    await signInWithPassword(b, p.username);
    const page = await b.send('GET', '/account/two-factor');
    const wrong = await b.send('POST', '/account/two-factor', { ...hiddenFields(page.text), code: '000000' });
    expect(wrong.status).toBe(400);
    expect(
      (await t.call(p.token, { method: 'GET', url: `/rest/v1/User/${p.id}` })).json().UserInfo.TwoFactorEnabled,
    ).toBe(false);
  });

  it('ok/signing in takes the password, then the code; the session is good for nothing before the code', async () => {
    const p = await person();
    const { secret } = await enrol(p.username);
    t.clock.set(t.clock.nowSeconds() + 60);
    const b = openBrowser(base);
    const first = await signInWithPassword(b, p.username);
    expect(first.status).toBe(303);
    expect(first.location).toMatch(/^\/signin\/code\?/);
    expect((await b.send('GET', '/account')).status).toBe(303);
    const form = await b.send('GET', first.location);
    const wrong = await b.send('POST', '/signin/code', { ...hiddenFields(form.text), code: '123456' });
    expect(wrong.status).toBe(401);
    expect(wrong.text).toContain('Sign-in failed');
    const right = await b.send('POST', '/signin/code', { ...hiddenFields(form.text), code: codeFor(secret) });
    expect([right.status, right.location]).toEqual([303, '/']);
    expect((await b.send('GET', '/account')).status).toBe(200);
  });

  it('fail/a code is good once: the same code again, or two requests racing with it, sign in once', async () => {
    const p = await person();
    const { secret } = await enrol(p.username);
    t.clock.set(t.clock.nowSeconds() + 120);
    const code = codeFor(secret);
    const browsers = [openBrowser(base), openBrowser(base), openBrowser(base)];
    const forms = await Promise.all(
      browsers.map(async (b) => {
        const first = await signInWithPassword(b, p.username);
        return (await b.send('GET', first.location)).text;
      }),
    );
    const answers = await Promise.all(
      browsers.map((b, i) => b.send('POST', '/signin/code', { ...hiddenFields(forms[i]!), code })),
    );
    expect(answers.map((x) => x.status).sort()).toEqual([303, 401, 401]);
  });

  it('ok/a recovery code signs in once, in any case and with or without its hyphen', async () => {
    const p = await person();
    const { recovery } = await enrol(p.username);
    const use = async (code: string) => {
      const b = openBrowser(base);
      const first = await signInWithPassword(b, p.username);
      const form = await b.send('GET', first.location);
      return (await b.send('POST', '/signin/code', { ...hiddenFields(form.text), code })).status;
    };
    expect(await use(recovery[0]!.toUpperCase().replace('-', ''))).toBe(303);
    expect(await use(recovery[0]!)).toBe(401);
    expect(await use(recovery[1]!)).toBe(303);
  });

  it('ok/one recovery code sent by three requests at once signs in once', async () => {
    const p = await person();
    const { recovery } = await enrol(p.username);
    const browsers = [openBrowser(base), openBrowser(base), openBrowser(base)];
    const forms = await Promise.all(
      browsers.map(async (b) => (await b.send('GET', (await signInWithPassword(b, p.username)).location)).text),
    );
    const answers = await Promise.all(
      browsers.map((b, i) => b.send('POST', '/signin/code', { ...hiddenFields(forms[i]!), code: recovery[2]! })),
    );
    expect(answers.map((x) => x.status).sort()).toEqual([303, 401, 401]);
  });

  it('ok/an account that requires a second factor sends a person without one to enrol before any consent', async () => {
    const strict = await t.customer({ name: 'Strict' });
    await t.services.accounts.setRequireTwoFactor(customerId(strict.customerId), true);
    const p = await person(strict);
    const app = (
      await t.call(strict.token, {
        method: 'POST',
        url: '/rest/v1/Application',
        payload: { Name: 'Panel', Scopes: 'read', RedirectUris: ['https://panel.example/cb'] },
      })
    ).json();
    const b = openBrowser(base);
    await signInWithPassword(b, p.username);
    expect((await b.send('GET', '/account')).location).toBe('/account/two-factor');
    const authorize = `/oauth2/authorize?response_type=code&client_id=${app.ClientId}&redirect_uri=${encodeURIComponent('https://panel.example/cb')}`;
    const asked = await b.send('GET', authorize);
    expect([asked.status, asked.location.startsWith('/account/two-factor?next=')]).toEqual([303, true]);
  });

  it('ok/end to end: password and TOTP, consent, a code raced by three exchanges (one wins), presented again after: refused, its token revoked', async () => {
    const p = await person();
    const { secret } = await enrol(p.username);
    t.clock.set(t.clock.nowSeconds() + 300);
    const redirect = 'http://127.0.0.1:8400/cb';
    const app = (
      await t.call(a.token, {
        method: 'POST',
        url: '/rest/v1/Application',
        payload: { Name: 'Desk', Scopes: 'profile read', RedirectUris: [redirect] },
      })
    ).json();
    const verifier = randomBytes(32).toString('base64url');
    const challenge = createHash('sha256').update(verifier).digest('base64url');
    const b = openBrowser(base);
    const query = new URLSearchParams({
      response_type: 'code',
      client_id: app.ClientId,
      redirect_uri: redirect,
      state: 'st',
      code_challenge: challenge,
      code_challenge_method: 'S256',
    });
    const start = await b.send('GET', `/oauth2/authorize?${query}`);
    const form = await b.send('GET', start.location);
    const password = await b.send('POST', '/signin', {
      username: p.username,
      password: PASSWORD,
      ...hiddenFields(form.text),
    });
    expect(password.location).toMatch(/^\/signin\/code\?/);
    const codeForm = await b.send('GET', password.location);
    const second = await b.send('POST', '/signin/code', { ...hiddenFields(codeForm.text), code: codeFor(secret) });
    expect(second.location).toMatch(/^\/oauth2\/authorize\?/);
    const consent = await b.send('GET', second.location);
    const allowed = await b.send('POST', '/oauth2/authorize', { ...hiddenFields(consent.text), decision: 'allow' });
    const code = new URL(allowed.location).searchParams.get('code')!;
    const exchange = () =>
      fetch(`${base}/oauth2/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({
          grant_type: 'authorization_code',
          code,
          client_id: app.ClientId,
          code_verifier: verifier,
          redirect_uri: redirect,
        }).toString(),
      });
    const answers = await Promise.all([exchange(), exchange(), exchange()]);
    expect(answers.map((r) => r.status).sort()).toEqual([200, 400, 400]);
    const won = (await answers.find((r) => r.status === 200)!.json()) as { access_token: string; scope: string };
    expect(won.scope).toBe('profile read');
    // The losers may have come before the winner stored its tokens or after (RFC 6749 §4.1.2
    // revocation reaches what exists): once more after the race, and the token is gone for sure.
    expect((await exchange()).status).toBe(400);
    const profile = await fetch(`${base}/rest/v1/Profile`, {
      headers: { authorization: `Bearer ${won.access_token}` },
    });
    expect(profile.status).toBe(401);
  });
});
