// The customer console over real HTTP, on both databases: a session's API token (made on its
// first screen, once even when two screens race), the same role checks as the API, CSRF and
// origin refusals that change nothing, bad input said plainly, another customer's orders unseen,
// sign-out and expiry ending the token. The browser tests (test/ui/console.test.ts) drive it in chromium.
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext, type TestCustomer } from './support/app.js';
import { browser as openBrowser, hiddenFields } from './support/browser.js';
import { testCsr } from './support/csr.js';
import { testDialects } from './support/databases.js';
import { ORDER_CONTACT } from './support/issuing-context.js';

const PASSWORD = 'Saturn-vanilla-42-drift';

describe.each(testDialects())('the customer console on $dialect', (dialect) => {
  let t: TestContext;
  let a: TestCustomer;
  let b: TestCustomer;
  let base: string;

  beforeAll(async () => {
    t = await createTestContext(dialect, { CERTDESK_RATE_LIMIT: '1000000', CERTDESK_RATE_LIMIT_ANONYMOUS: '1000000' });
    a = await t.customer({ name: 'Alpha' });
    b = await t.customer({ name: 'Beta' });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  }, 60_000);
  afterAll(async () => t.close());

  /** A signed-in person of customer `c` with `roles`, as a cookie-keeping HTTP client. */
  const person = async (c: TestCustomer, roles: string[]) => {
    const username = `p-${randomBytes(4).toString('hex')}`;
    const res = await t.call(c.token, {
      method: 'POST',
      url: '/rest/v1/User',
      payload: {
        FullName: 'Grace Hopper',
        Email: 'grace@customer.example',
        Username: username,
        Password: PASSWORD,
        Roles: roles,
      },
    });
    expect(res.statusCode, res.body).toBe(200);
    const web = openBrowser(base);
    const form = await web.send('GET', '/signin');
    const signedIn = await web.send('POST', '/signin', { username, password: PASSWORD, ...hiddenFields(form.text) });
    expect(signedIn.status).toBe(303);
    return { web, username, id: res.json().Id as number };
  };
  const csrfOf = (html: string) => hiddenFields(html).csrf!;
  const placeViaApi = async (c: TestCustomer) => {
    const res = await t.call(c.token, {
      method: 'POST',
      url: '/rest/v1/Order',
      payload: {
        OrderParameters: { ProductCode: 'TrustPoint.DV', ValidityPeriod: 12, CSR: testCsr().pem, DVAuthMethod: 'DNS' },
        AdminContact: ORDER_CONTACT,
        TechContact: ORDER_CONTACT,
      },
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json().ServiceOrderID as number;
  };
  const ordersOf = async (c: TestCustomer) =>
    (await t.call(c.token, { method: 'GET', url: '/rest/v1/Orders?ItemsPerPage=100' })).json().OrderInfos
      .length as number;

  it('ok/signed out, every screen leads to the sign-in page and back; signed in, the overview; strict headers', async () => {
    const anonymous = openBrowser(base);
    const res = await anonymous.send('GET', '/orders?status=PENDING');
    expect(res.status).toBe(303);
    expect(res.location).toBe('/signin?next=%2Forders%3Fstatus%3DPENDING');
    const p = await person(a, ['ADMIN']);
    const home = await p.web.send('GET', '/');
    expect(home.status).toBe(200);
    expect(home.text).toContain('<h1>Overview</h1>');
    expect(home.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(home.headers.get('content-security-policy')).not.toContain('unsafe-inline');
    expect(home.headers.get('x-frame-options')).toBe('DENY');
    expect(home.headers.get('cache-control')).toBe('no-store');
    // The session cookie is all the browser holds: HttpOnly, never a token in the page.
    expect(home.text).not.toMatch(/cdu_|cda_/);
  });

  it('ok/the session token is made once, even when the first two screens race; it is a UI token of the person', async () => {
    const p = await person(a, ['ORDERS']);
    const pages = await Promise.all(Array.from({ length: 6 }, () => p.web.send('GET', '/orders')));
    expect(pages.map((x) => x.status)).toEqual([200, 200, 200, 200, 200, 200]);
    const rows = await sql<{
      n: number | string;
    }>`select count(*) as n from oauth_tokens where user_id = ${p.id} and auth_type = 'UI' and application_id is null`.execute(
      t.db.kysely,
    );
    expect(Number(rows.rows[0]!.n)).toBe(1);
  });

  it('ok/order by form; fail/bad input is said as the API says it and places nothing', async () => {
    const p = await person(a, ['ORDERS']);
    const form = await p.web.send('GET', '/order/new');
    expect(form.status).toBe(200);
    const before = await ordersOf(a);
    const bad = await p.web.send('POST', '/order/new', {
      csrf: csrfOf(form.text),
      product: 'TrustPoint.DV',
      validity: '12',
      csr: 'not a request',
      method: 'DNS',
      firstName: 'Ada',
      lastName: 'Lovelace',
      email: 'ada@customer.example',
      phone: '+49 30 1234567',
    });
    expect(bad.status).toBe(400);
    expect(bad.text).toMatch(/class="error" role="alert">[^<]*CSR/);
    expect(await ordersOf(a)).toBe(before);
    const ok = await p.web.send('POST', '/order/new', {
      csrf: csrfOf(form.text),
      product: 'TrustPoint.DV',
      validity: '12',
      csr: testCsr().pem,
      method: 'DNS',
      firstName: 'Ada',
      lastName: 'Lovelace',
      email: 'ada@customer.example',
      phone: '+49 30 1234567',
    });
    expect(ok.status).toBe(303);
    const id = /\/orders\/(\d+)/.exec(ok.location)![1]!;
    const page = await p.web.send('GET', `/orders/${id}`);
    expect(page.status).toBe(200);
    // Exactly the record to publish, with copy buttons.
    expect(page.text).toMatch(/<code>TXT<\/code>/);
    expect(page.text).toContain('data-copy=');
    expect(page.text).toContain('Check now');
    const check = await p.web.send('POST', `/orders/${id}/check`, { csrf: csrfOf(page.text) });
    expect(check.status).toBe(303);
    const after = await p.web.send('GET', check.location);
    expect(after.text).toContain('Checked: see each name below.');
    expect(after.text).toMatch(/PENDING: [^<]*TXT/);
  });

  it('fail/a form without the session token, or from another site, is refused and changes nothing', async () => {
    const p = await person(a, ['ORDERS']);
    const id = await placeViaApi(a);
    const page = await p.web.send('GET', `/orders/${id}`);
    const noToken = await p.web.send('POST', `/orders/${id}/cancel`, {});
    expect(noToken.status).toBe(403);
    const res = await fetch(`${base}/orders/${id}/cancel`, {
      method: 'POST',
      redirect: 'manual',
      headers: {
        cookie: p.web.cookie(),
        origin: 'https://evil.example',
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: new URLSearchParams({ csrf: csrfOf(page.text) }).toString(),
    });
    expect(res.status).toBe(403);
    const status = (await t.call(a.token, { method: 'GET', url: `/rest/v1/Order/${id}` })).json().OrderInfo.OrderStatus;
    expect(status.MajorStatus).toBe('PENDING');
    // With both, it cancels (the refund rule shown first).
    expect(page.text).toContain('Cancelling now is free of charge');
    const done = await p.web.send('POST', `/orders/${id}/cancel`, { csrf: csrfOf(page.text) });
    expect(done.status).toBe(303);
    expect(
      (await t.call(a.token, { method: 'GET', url: `/rest/v1/Order/${id}` })).json().OrderInfo.OrderStatus.MajorStatus,
    ).toBe('CANCELLED');
  });

  it("fail/cross-customer: another customer's order is not found, not shown, not cancelled", async () => {
    const id = await placeViaApi(a);
    const p = await person(b, ['ADMIN']);
    const page = await p.web.send('GET', `/orders/${id}`);
    expect(page.status).toBe(404);
    expect(page.text).not.toContain('TXT');
    const own = await p.web.send('GET', '/orders');
    const cancel = await p.web.send('POST', `/orders/${id}/cancel`, { csrf: csrfOf(own.text) });
    expect(cancel.status).toBe(404);
    expect(
      (await t.call(a.token, { method: 'GET', url: `/rest/v1/Order/${id}` })).json().OrderInfo.OrderStatus.MajorStatus,
    ).toBe('PENDING');
    const download = await p.web.send('GET', `/orders/${id}/certificate.pem`);
    expect(download.status).toBe(404);
  });

  it('fail/roles: READONLY sees no ordering and is refused by the API when it posts anyway; BILLING sees no orders', async () => {
    const r = await person(a, ['READONLY']);
    const home = await r.web.send('GET', '/');
    expect(home.text).not.toContain('href="/order/new');
    expect(home.text).toContain('href="/orders?lang=en"');
    const form = await r.web.send('GET', '/order/new');
    expect(form.status).toBe(403);
    const before = await ordersOf(a);
    const posted = await r.web.send('POST', '/order/new', {
      csrf: csrfOf(home.text),
      product: 'TrustPoint.DV',
      validity: '12',
      csr: testCsr().pem,
      method: 'DNS',
      firstName: 'A',
      lastName: 'B',
      email: 'a@customer.example',
      phone: '+49 30 1234567',
    });
    expect(posted.status).toBe(403);
    expect(await ordersOf(a)).toBe(before);
    const billing = await person(a, ['BILLING']);
    const list = await billing.web.send('GET', '/orders');
    expect(list.status).toBe(403);
    const users = await billing.web.send('GET', '/users');
    expect(users.status).toBe(403);
  });

  it('ok/an application: the secret once, then never; it works at the token endpoint; fail/bad scopes say why', async () => {
    const p = await person(a, ['ADMIN']);
    const page = await p.web.send('GET', '/applications');
    const bad = await p.web.send('POST', '/applications', { csrf: csrfOf(page.text), name: 'x', scopes: 'nonsense' });
    expect(bad.status).toBe(400);
    expect(bad.text).toContain('role="alert"');
    const made = await p.web.send('POST', '/applications', {
      csrf: csrfOf(page.text),
      name: 'deploy bot',
      scopes: 'read',
    });
    expect(made.status).toBe(201);
    const secret = /<code id="secret">([^<]+)<\/code>/.exec(made.text)![1]!;
    const clientId = /Client ID <code>([^<]+)<\/code>/.exec(made.text)![1]!;
    const again = await p.web.send('GET', '/applications');
    expect(again.text).toContain(clientId);
    expect(again.text).not.toContain(secret);
    const token = await fetch(`${base}/oauth2/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        client_id: clientId,
        client_secret: secret,
      }).toString(),
    });
    expect(token.status).toBe(200);
  });

  it('ok/vouchers: create, a redemption link, void; fail/bad terms are refused', async () => {
    const p = await person(a, ['VOUCHERS']);
    const page = await p.web.send('GET', '/vouchers');
    const bad = await p.web.send('POST', '/vouchers', {
      csrf: csrfOf(page.text),
      product: 'TrustPoint.DV',
      validity: '12',
      sans: 'many',
    });
    expect(bad.status).toBe(400);
    const made = await p.web.send('POST', '/vouchers', {
      csrf: csrfOf(page.text),
      product: 'TrustPoint.DV',
      validity: '12',
      sans: '0',
    });
    expect(made.status).toBe(303);
    const list = await p.web.send('GET', '/vouchers');
    const code = /\/redeem#code=([A-Z0-9-]+)/.exec(list.text)![1]!;
    const voided = await p.web.send('POST', '/vouchers/void', { csrf: csrfOf(list.text), code });
    expect(voided.status).toBe(303);
    const again = await p.web.send('POST', '/vouchers/void', { csrf: csrfOf(list.text), code });
    expect(again.status).toBe(400);
  });

  it('ok/profile: language and time zone; fail/a wrong current password changes nothing; a new one ends the session', async () => {
    const p = await person(a, ['READONLY']);
    const page = await p.web.send('GET', '/profile');
    const saved = await p.web.send('POST', '/profile', {
      csrf: csrfOf(page.text),
      locale: 'de_DE',
      timezone: 'Europe/Berlin',
    });
    expect(saved.status).toBe(303);
    const german = await p.web.send('GET', '/profile');
    expect(german.text).toContain('<h1>Profil</h1>');
    expect(german.text).toContain('<option selected>Europe/Berlin</option>');
    const badZone = await p.web.send('POST', '/profile', {
      csrf: csrfOf(page.text),
      locale: 'de_DE',
      timezone: 'Mars/Olympus',
    });
    expect(badZone.status).toBe(400);
    const wrong = await p.web.send('POST', '/profile/password', {
      csrf: csrfOf(page.text),
      current: 'nope',
      new: 'Another-long-passphrase-77',
    });
    expect(wrong.status).toBe(400);
    expect((await p.web.send('GET', '/profile')).status).toBe(200);
    const changed = await p.web.send('POST', '/profile/password', {
      csrf: csrfOf(page.text),
      current: PASSWORD,
      new: 'Another-long-passphrase-77',
    });
    expect(changed.status).toBe(303);
    expect((await p.web.send('GET', '/profile')).status).toBe(303);
  });

  it('ok/a form sent twice (a double click, a resend) places one order; ?done= names only our notices', async () => {
    const p = await person(a, ['ORDERS']);
    const form = await p.web.send('GET', '/order/new');
    const fields = {
      ...hiddenFields(form.text),
      product: 'TrustPoint.DV',
      validity: '12',
      csr: testCsr().pem,
      method: 'DNS',
      firstName: 'Ada',
      lastName: 'Lovelace',
      email: 'ada@customer.example',
      phone: '+49 30 1234567',
    };
    expect(hiddenFields(form.text).partner).toMatch(/^web-/);
    const before = await ordersOf(a);
    const [one, two] = await Promise.all([
      p.web.send('POST', '/order/new', fields),
      p.web.send('POST', '/order/new', fields),
    ]);
    expect([one.status, two.status]).toEqual([303, 303]);
    expect(one.location.split('&')[0]).toBe(two.location.split('&')[0]);
    expect(await ordersOf(a)).toBe(before + 1);
    const odd = await p.web.send('GET', '/?done=constructor');
    expect(odd.status).toBe(200);
    expect(odd.text).not.toContain('native code');
  });

  it('fail/wrong current passwords on the profile are throttled like sign-ins, and audited', async () => {
    const p = await person(a, ['READONLY']);
    const page = await p.web.send('GET', '/profile');
    let last = '';
    for (let i = 0; i < 15 && !last.includes('Too many wrong passwords'); i++)
      last = (
        await p.web.send('POST', '/profile/password', {
          csrf: csrfOf(page.text),
          current: `guess-${i}`,
          new: 'Another-long-passphrase-77',
        })
      ).text;
    expect(last).toContain('Too many wrong passwords');
    const audited = await sql<{
      n: number | string;
    }>`select count(*) as n from audit_events where action = 'user.password-check-failed' and subject = ${`user:${p.id}`}`.execute(
      t.db.kysely,
    );
    expect(Number(audited.rows[0]!.n)).toBeGreaterThan(0);
  });

  it("ok/a signed-in person's pages count against the person, not the address's anonymous limit", async () => {
    const tight = await createTestContext(dialect, {
      CERTDESK_RATE_LIMIT: '1000000',
      CERTDESK_RATE_LIMIT_ANONYMOUS: '5',
    });
    try {
      const c = await tight.customer({ name: 'Tight' });
      await tight.app.listen({ port: 0, host: '127.0.0.1' });
      const tightBase = `http://127.0.0.1:${(tight.app.server.address() as AddressInfo).port}`;
      const username = `p-${randomBytes(4).toString('hex')}`;
      const made = await tight.call(c.token, {
        method: 'POST',
        url: '/rest/v1/User',
        payload: {
          FullName: 'Grace Hopper',
          Email: 'grace@customer.example',
          Username: username,
          Password: PASSWORD,
          Roles: ['ADMIN'],
        },
      });
      expect(made.statusCode).toBe(200);
      const web = openBrowser(tightBase);
      const form = await web.send('GET', '/signin');
      await web.send('POST', '/signin', { username, password: PASSWORD, ...hiddenFields(form.text) });
      const statuses = [];
      for (let i = 0; i < 12; i++) statuses.push((await web.send('GET', '/profile')).status);
      expect(statuses.every((s) => s === 200)).toBe(true);
      // Without a session the address's limit holds.
      const anonymous = openBrowser(tightBase);
      const answers = [];
      for (let i = 0; i < 8; i++) answers.push((await anonymous.send('GET', '/profile')).status);
      expect(answers).toContain(429);
    } finally {
      await tight.close();
    }
  });

  it('ok/sign-out ends the session and its token; expiry too', async () => {
    const p = await person(a, ['ADMIN']);
    const home = await p.web.send('GET', '/');
    const token = await sql<{
      n: number | string;
    }>`select count(*) as n from oauth_tokens where user_id = ${p.id} and revoked_at is null`.execute(t.db.kysely);
    expect(Number(token.rows[0]!.n)).toBe(1);
    await p.web.send('POST', '/signout', { csrf: csrfOf(home.text) });
    expect((await p.web.send('GET', '/')).status).toBe(303);
    const live = await sql<{
      n: number | string;
    }>`select count(*) as n from oauth_tokens where user_id = ${p.id} and revoked_at is null`.execute(t.db.kysely);
    expect(Number(live.rows[0]!.n)).toBe(0);
    const q = await person(a, ['ADMIN']);
    expect((await q.web.send('GET', '/')).status).toBe(200);
    t.clock.advance(8 * 3600 + 1);
    try {
      expect((await q.web.send('GET', '/')).status).toBe(303);
    } finally {
      t.clock.advance(-(8 * 3600 + 1));
    }
  });
});
