// Operators over real HTTP on both dialects: their own sign-in (password, then always a TOTP
// code), sessions apart from customers' users, CSRF, every screen's action (credit limit,
// suspension, vetting, job retry) with bad input refused and races won once, and session expiry.
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jobId } from '../src/core/index.js';
import { createWorker } from '../src/main.js';
import { totpOf } from '../src/ra/accounts/two-factor.js';
import type { CreatedOperator } from '../src/ra/operators/operators.js';
import type { TestContext, TestCustomer } from './support/app.js';
import { browser as openBrowser, hiddenFields } from './support/browser.js';
import { testDialects } from './support/databases.js';
import {
  dnsOrderBody,
  issuingContext,
  ORG_ADDRESS,
  ORG_CONTACT,
  type IssuingContext,
} from './support/issuing-context.js';

const PASSWORD = 'Saturn-vanilla-42-drift';

describe.each(testDialects())('operators on $dialect', (dialect) => {
  let context: IssuingContext;
  let t: TestContext;
  let c: TestCustomer;
  let base: string;
  let alice: CreatedOperator;
  let bob: CreatedOperator;

  beforeAll(async () => {
    context = await issuingContext(dialect, 'Operated');
    ({ t, c } = context);
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    alice = await t.services.operators.add('alice');
    bob = await t.services.operators.add('bob');
  }, 120_000);
  afterAll(async () => context?.close());

  /** The code the operator's app shows now (the project's TOTP); the clock moves on a step first, as a code is good once. */
  const codeFor = (op: CreatedOperator) => {
    t.clock.set(t.clock.nowSeconds() + 30);
    return totpOf(op.totpSecret, op.username).generate({ timestamp: t.clock.nowSeconds() * 1000 });
  };
  const signIn = async (op: CreatedOperator) => {
    const b = openBrowser(base);
    const first = await b.send('POST', '/operator/signin', { username: op.username, password: op.password });
    expect([first.status, first.location]).toEqual([303, '/operator/signin/code?lang=en']);
    expect(first.headers.get('set-cookie')).toMatch(
      /^certdesk_operator=cdo_[\w-]+; Path=\/operator; HttpOnly; SameSite=Strict; Max-Age=28800$/,
    );
    const form = await b.send('GET', first.location);
    const done = await b.send('POST', '/operator/signin/code', { ...hiddenFields(form.text), code: codeFor(op) });
    expect([done.status, done.location]).toEqual([303, '/operator?lang=en']);
    return b;
  };
  type Browser = Awaited<ReturnType<typeof signIn>>;
  /** Posts a form of `page` (its CSRF token included) to `path`. */
  const post = async (b: Browser, page: string, path: string, fields: Record<string, string>) => {
    const form = await b.send('GET', page);
    return b.send('POST', path, { csrf: hiddenFields(form.text).csrf!, ...fields });
  };
  const customerRow = async (id: number) =>
    t.db.kysely
      .selectFrom('customers')
      .select(['credit_limit_minor', 'suspended_at'])
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
  const profile = async (token = c.token) =>
    (await t.call(token, { method: 'GET', url: '/rest/v1/Profile' })).statusCode;
  /** An OV order placed over the API, waiting for vetting (the DNS proof is in place). */
  const ovOrder = async () => {
    const res = await t.call(c.token, {
      method: 'POST',
      url: '/rest/v1/Order',
      payload: {
        ...dnsOrderBody({ ProductCode: 'TrustPoint.OV' }),
        AdminContact: ORG_CONTACT,
        TechContact: ORG_CONTACT,
        OrganizationInfo: { OrganizationName: ORG_CONTACT.OrganizationName, OrganizationAddress: ORG_ADDRESS },
      },
    });
    expect(res.statusCode, res.body).toBe(200);
    const id = res.json().ServiceOrderID as number;
    // The worker's DCV check finds the proof in place: the order then waits for vetting.
    const worker = createWorker(t.services, pino({ level: 'silent' }));
    for (let i = 0; i < 5 && (await worker.runOnce()) > 0; i++);
    expect((await t.services.vetting.list()).map((v) => v.order.id)).toContain(id);
    return id;
  };
  const minorStatus = async (id: number) =>
    await t.db.kysely
      .selectFrom('orders')
      .select(['major_status', 'minor_status'])
      .where('id', '=', id)
      .executeTakeFirstOrThrow();

  describe('sign-in', () => {
    it('ok/password then TOTP code: the screens open; every step is an audit event', async () => {
      const b = await signIn(alice);
      const overview = await b.send('GET', '/operator');
      expect(overview.status).toBe(200);
      expect(overview.text).toContain('Signed in as <strong>alice</strong>');
      for (const path of [
        '/operator/customers',
        '/operator/vetting',
        '/operator/ca',
        '/operator/mail',
        '/operator/jobs',
      ])
        expect((await b.send('GET', path)).status, path).toBe(200);
      const events = await t.db.kysely
        .selectFrom('audit_events')
        .select(['action', 'actor'])
        .where('subject', '=', 'operator:alice')
        .execute();
      expect(events).toContainEqual({ action: 'operator.signed-in', actor: 'operator:alice' });
      expect(overview.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    });

    it('fail/a wrong password: 401, no cookie, an audit event', async () => {
      const b = openBrowser(base);
      const res = await b.send('POST', '/operator/signin', { username: 'alice', password: 'not-her-password' });
      expect(res.status).toBe(401);
      expect(res.text).toContain('Sign-in failed');
      expect(b.cookie()).toBe('');
      expect((await b.send('GET', '/operator')).location).toBe('/operator/signin?lang=en');
    });

    it('fail/a wrong TOTP code: 401, and the half-signed-in session opens nothing', async () => {
      const b = openBrowser(base);
      const first = await b.send('POST', '/operator/signin', { username: 'bob', password: bob.password });
      expect(first.status).toBe(303);
      expect((await b.send('GET', '/operator')).status).toBe(303);
      const form = await b.send('GET', first.location);
      const wrong = await b.send('POST', '/operator/signin/code', { ...hiddenFields(form.text), code: '000000' });
      expect(wrong.status).toBe(401);
      expect(wrong.text).toContain('the code is not right');
      expect((await b.send('GET', '/operator/customers')).status).toBe(303);
    });

    it("fail/a customer's session does not open /operator, an operator's does not open customer pages", async () => {
      const username = `ada-${Date.now().toString(36)}`;
      const made = await t.call(c.token, {
        method: 'POST',
        url: '/rest/v1/User',
        payload: {
          FullName: 'Ada',
          Email: 'ada@customer.example',
          Username: username,
          Password: PASSWORD,
          Roles: ['ADMIN'],
        },
      });
      expect(made.statusCode, made.body).toBe(200);
      const person = openBrowser(base);
      const signedIn = await person.send('POST', '/signin', { username, password: PASSWORD });
      expect(signedIn.status).toBe(303);
      expect((await person.send('GET', '/account')).status).toBe(200);
      const customerCookie = person.cookie().split('=').slice(1).join('=');
      expect((await person.send('GET', '/operator')).location).toBe('/operator/signin?lang=en');
      const forged = await fetch(`${base}/operator`, {
        redirect: 'manual',
        headers: { cookie: `certdesk_operator=${customerCookie}` },
      });
      expect(forged.status).toBe(303);
      // And the other way round: an operator's cookie is no customer session.
      const op = await signIn(alice);
      const operatorCookie = op.cookie().split('=').slice(1).join('=');
      for (const cookie of [`certdesk_operator=${operatorCookie}`, `certdesk_session=${operatorCookie}`]) {
        const res = await fetch(`${base}/account`, { redirect: 'manual', headers: { cookie } });
        expect(res.status, cookie).toBe(303);
      }
      // Nor is a customer's user an operator: the operator sign-in does not know it.
      expect((await openBrowser(base).send('POST', '/operator/signin', { username, password: PASSWORD })).status).toBe(
        401,
      );
    });
  });

  describe('forms', () => {
    it("fail/CSRF: without the token, with another session's, or from another origin a POST is refused (403) and changes nothing", async () => {
      const b = await signIn(alice);
      const before = await customerRow(c.customerId);
      const other = await signIn(bob);
      const otherCsrf = hiddenFields((await other.send('GET', '/operator/customers')).text).csrf!;
      const fields = { customer: String(c.customerId), was: String(before.credit_limit_minor), limit: '1' };
      expect((await b.send('POST', '/operator/customers/credit-limit', fields)).status).toBe(403);
      expect((await b.send('POST', '/operator/customers/credit-limit', { ...fields, csrf: otherCsrf })).status).toBe(
        403,
      );
      const csrf = hiddenFields((await b.send('GET', '/operator/customers')).text).csrf!;
      const cross = await fetch(`${base}/operator/customers/suspend`, {
        method: 'POST',
        redirect: 'manual',
        headers: {
          cookie: b.cookie(),
          origin: 'https://evil.example',
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: new URLSearchParams({ csrf, customer: String(c.customerId) }).toString(),
      });
      expect(cross.status).toBe(403);
      expect(await customerRow(c.customerId)).toEqual(before);
      // No session at all: to the sign-in page.
      const none = await openBrowser(base).send('POST', '/operator/customers/suspend', {
        customer: String(c.customerId),
      });
      expect([none.status, none.location]).toEqual([303, '/operator/signin?lang=en']);
    });

    it('fail/bad input gets a clear error page and changes nothing', async () => {
      const b = await signIn(alice);
      const before = await customerRow(c.customerId);
      const was = String(before.credit_limit_minor);
      const cases: [string, Record<string, string>, number, RegExp][] = [
        [
          '/operator/customers/credit-limit',
          { customer: String(c.customerId), was, limit: 'lots' },
          400,
          /not an amount/,
        ],
        [
          '/operator/customers/credit-limit',
          { customer: String(c.customerId), was, limit: '-5' },
          400,
          /not an amount/,
        ],
        ['/operator/customers/credit-limit', { customer: '999999', was, limit: '10' }, 404, /No customer 999999/],
        ['/operator/customers/suspend', { customer: '999999' }, 404, /No customer 999999/],
        ['/operator/vetting/reject', { order: String(await ovOrder()), reason: '  ' }, 400, /needs a reason/],
        ['/operator/vetting/approve', { order: '999999' }, 404, /No order 999999/],
        ['/operator/jobs/retry', { job: 'x' }, 400, /No job was named/],
      ];
      for (const [path, fields, status, message] of cases) {
        const res = await post(b, '/operator/customers', path, fields);
        expect(res.status, `${path} ${JSON.stringify(fields)}`).toBe(status);
        expect(res.text).toContain('Nothing changed');
        expect(res.text).toMatch(message);
      }
      expect(await customerRow(c.customerId)).toEqual(before);
      expect((await t.services.vetting.list()).length).toBeGreaterThan(0);
    });

    it('ok/the credit limit changes (guarded by the limit the operator saw) and an audit event names the operator', async () => {
      const b = await signIn(alice);
      const before = await customerRow(c.customerId);
      const res = await post(b, '/operator/customers', '/operator/customers/credit-limit', {
        customer: String(c.customerId),
        was: String(before.credit_limit_minor),
        limit: '2500.50',
      });
      expect([res.status, res.location]).toEqual([303, '/operator/customers?lang=en&done=limit']);
      expect((await customerRow(c.customerId)).credit_limit_minor).toBe(250050);
      expect((await b.send('GET', res.location)).text).toContain('The credit limit was changed.');
      expect((await t.call(c.token, { method: 'GET', url: '/rest/v1/Limit' })).json().LimitInfo.Limit).toBe(2500.5);
      // A form showing the old limit no longer applies.
      const stale = await post(b, '/operator/customers', '/operator/customers/credit-limit', {
        customer: String(c.customerId),
        was: String(before.credit_limit_minor),
        limit: '1',
      });
      expect(stale.status).toBe(409);
      expect((await customerRow(c.customerId)).credit_limit_minor).toBe(250050);
      const event = await t.db.kysely
        .selectFrom('audit_events')
        .select(['actor', 'details'])
        .where('action', '=', 'operator.credit-limit-set')
        .executeTakeFirstOrThrow();
      expect(event.actor).toBe('operator:alice');
      await t.db.kysely.updateTable('customers').set({ credit_limit_minor: before.credit_limit_minor }).execute();
    });

    it("ok/suspension refuses the customer's bearer token at once and its users' sign-in; lifting it restores both", async () => {
      const b = await signIn(alice);
      const username = `sus-${Date.now().toString(36)}`;
      await t.call(c.token, {
        method: 'POST',
        url: '/rest/v1/User',
        payload: {
          FullName: 'Sue',
          Email: 'sue@customer.example',
          Username: username,
          Password: PASSWORD,
          Roles: ['ORDERS'],
        },
      });
      const person = openBrowser(base);
      expect((await person.send('POST', '/signin', { username, password: PASSWORD })).status).toBe(303);
      expect(await profile()).toBe(200);
      const suspended = await post(b, '/operator/customers', '/operator/customers/suspend', {
        customer: String(c.customerId),
      });
      expect([suspended.status, suspended.location]).toEqual([303, '/operator/customers?lang=en&done=suspended']);
      expect(await profile()).toBe(401);
      expect((await openBrowser(base).send('POST', '/signin', { username, password: PASSWORD })).status).toBe(401);
      expect((await person.send('GET', '/account')).status).toBe(303);
      const again = await post(b, '/operator/customers', '/operator/customers/suspend', {
        customer: String(c.customerId),
      });
      expect(again.status).toBe(409);
      const lifted = await post(b, '/operator/customers', '/operator/customers/unsuspend', {
        customer: String(c.customerId),
      });
      expect(lifted.status).toBe(303);
      expect(await profile()).toBe(200);
      expect((await openBrowser(base).send('POST', '/signin', { username, password: PASSWORD })).status).toBe(303);
    });

    it('ok/creating a customer shows its ADMIN password and client secret once; they work', async () => {
      const b = await signIn(bob);
      const res = await post(b, '/operator/customers', '/operator/customers', {
        name: 'Made By Operator',
        email: 'ops@made.example',
        currency: 'EUR',
        limit: '1000',
        country: 'DE',
      });
      expect(res.status).toBe(201);
      expect(res.headers.get('cache-control')).toBe('no-store');
      const secret = /client_secret<\/dt><dd><code>([^<]+)</.exec(res.text)![1]!;
      const clientId = /client_id<\/dt><dd><code>([^<]+)</.exec(res.text)![1]!;
      expect(await profile(await t.token({ clientId, clientSecret: secret }))).toBe(200);
    });
  });

  describe('vetting and jobs, with racing operators', () => {
    it('ok/approve from the queue: the order is issued and leaves the queue', async () => {
      const b = await signIn(alice);
      const id = await ovOrder();
      expect((await b.send('GET', '/operator/vetting')).text).toContain(`Order ${id}`);
      const res = await post(b, '/operator/vetting', '/operator/vetting/approve', { order: String(id) });
      expect([res.status, res.location]).toEqual([303, `/operator/vetting?lang=en&done=approved&order=${id}`]);
      expect(await minorStatus(id)).toEqual({ major_status: 'COMPLETE', minor_status: 'COMPLETED' });
      const after = await b.send('GET', res.location);
      expect(after.text).toContain(`Order ${id} was approved and left the queue.`);
      expect(after.text).not.toContain(`id="order-${id}"`);
      const event = await t.db.kysely
        .selectFrom('audit_events')
        .select('actor')
        .where('action', '=', 'vetting.approved')
        .where('subject', '=', String(id))
        .executeTakeFirstOrThrow();
      expect(event.actor).toBe('operator:alice');
    });

    it('ok/two operators approving and rejecting the same OV order at once: exactly one wins', async () => {
      const a = await signIn(alice);
      const b = await signIn(bob);
      for (let round = 0; round < 3; round++) {
        const id = await ovOrder();
        const [approved, rejected] = await Promise.all([
          post(a, '/operator/vetting', '/operator/vetting/approve', { order: String(id) }),
          post(b, '/operator/vetting', '/operator/vetting/reject', { order: String(id), reason: 'no such company' }),
        ]);
        const statuses = [approved.status, rejected.status].sort();
        expect(statuses, `${approved.text} ${rejected.text}`).toEqual([303, 409]);
        const final = await minorStatus(id);
        expect(final).toEqual(
          approved.status === 303
            ? { major_status: 'COMPLETE', minor_status: 'COMPLETED' }
            : { major_status: 'FAILED', minor_status: 'REJECTED' },
        );
        const decisions = await t.db.kysely
          .selectFrom('audit_events')
          .select('action')
          .where('subject', '=', String(id))
          .where('action', 'in', ['vetting.approved', 'vetting.rejected'])
          .execute();
        expect(decisions).toHaveLength(1);
      }
    });

    it('ok/a dead job retried once runs; two retries at once queue it once', async () => {
      const b = await signIn(alice);
      const now = t.clock.nowSeconds();
      const { id } = await t.services.jobs.enqueue({ name: 'ca.refresh-crls', payload: {}, runAt: now }, now);
      await t.db.kysely
        .updateTable('jobs')
        .set({ status: 'dead', attempts: 10, last_error: 'the HSM was unplugged' })
        .where('id', '=', id)
        .execute();
      const list = await b.send('GET', '/operator/jobs');
      expect(list.text).toContain('the HSM was unplugged');
      const [one, two] = await Promise.all([
        post(b, '/operator/jobs', '/operator/jobs/retry', { job: String(id) }),
        post(b, '/operator/jobs', '/operator/jobs/retry', { job: String(id) }),
      ]);
      expect([one.status, two.status].sort()).toEqual([303, 409]);
      expect([one, two].find((r) => r.status === 409)!.text).toMatch(
        new RegExp(`Job ${id} is not dead .*nothing changed`),
      );
      expect(await t.services.jobs.byId(jobId(id))).toMatchObject({
        status: 'queued',
        attempts: 0,
        runAt: t.clock.nowSeconds(),
      });
      const worker = createWorker(t.services, pino({ level: 'silent' }));
      for (let i = 0; i < 5 && (await worker.runOnce()) > 0; i++);
      expect((await t.services.jobs.byId(jobId(id)))!.status).toBe('done');
      expect((await post(b, '/operator/jobs', '/operator/jobs/retry', { job: String(id) })).status).toBe(409);
    });
  });

  describe('sessions', () => {
    it('ok/signing out ends the session', async () => {
      const b = await signIn(alice);
      const out = await post(b, '/operator', '/operator/signout', {});
      expect(out.status).toBe(303);
      expect(out.headers.get('set-cookie')).toMatch(/^certdesk_operator=; Path=\/operator;.*Max-Age=0/);
    });

    it('fail/a session ends after 30 minutes without use, and after 8 hours whatever the use', async () => {
      const idle = await signIn(alice);
      t.clock.set(t.clock.nowSeconds() + 29 * 60);
      expect((await idle.send('GET', '/operator')).status).toBe(200);
      t.clock.set(t.clock.nowSeconds() + 31 * 60);
      expect((await idle.send('GET', '/operator')).location).toBe('/operator/signin?lang=en');
      const busy = await signIn(bob);
      for (let i = 0; i < 16; i++) {
        t.clock.set(t.clock.nowSeconds() + 29 * 60);
        expect((await busy.send('GET', '/operator')).status).toBe(200);
      }
      t.clock.set(t.clock.nowSeconds() + 29 * 60);
      expect((await busy.send('GET', '/operator')).status).toBe(303);
    });
  });
});
