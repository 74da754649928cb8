// The users of a customer (spec §2.12, §4.24–4.27; DESIGN §5.3): people with roles, managed by
// ADMIN users only, the last active ADMIN kept, tokens ended when a user is deactivated or deleted.
import { randomBytes } from 'node:crypto';
import { dictionary } from '@zxcvbn-ts/language-common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { customerId, userId, type Role } from '../../src/core/index.js';
import { caKeyFile, createServices, createWebApp } from '../../src/main.js';
import { hashSecret } from '../../src/ra/accounts/secrets.js';
import { TokensRepo } from '../../src/storage/index.js';
import { createTestContext, type TestContext, type TestCustomer } from '../support/app.js';
import { testCsr } from '../support/csr.js';
import { testDialects } from '../support/databases.js';

const PASSWORD = 'Saturn-vanilla-42-drift';
const common = dictionary['passwords-common'].find((p) => p.length >= 12 && /^[a-z0-9]+$/.test(p))!;

describe.each(testDialects())('users on $dialect', (dialect) => {
  let t: TestContext;
  let a: TestCustomer;
  let b: TestCustomer;
  beforeAll(async () => {
    t = await createTestContext(dialect, { CERTDESK_RATE_LIMIT: '1000000' });
    a = await t.customer({ name: 'Alpha' });
    b = await t.customer({ name: 'Beta' });
  });
  afterAll(async () => t.close());

  const unique = (prefix: string) => `${prefix}-${randomBytes(4).toString('hex')}`;
  const body = (over: Record<string, unknown> = {}) => ({
    FullName: 'Grace Hopper',
    Email: 'grace@customer.example',
    Username: unique('grace'),
    Password: PASSWORD,
    Roles: ['ORDERS'],
    ...over,
  });
  const call = (token: string, method: 'GET' | 'POST' | 'DELETE', url: string, payload?: unknown) =>
    t.call(token, { method, url: `/rest/v1${url}`, ...(payload === undefined ? {} : { payload: payload as object }) });
  /** A user of `c` with `roles`, and a token of an application it owns (every scope). */
  async function member(c: TestCustomer, roles: Role[]) {
    const created = await call(c.token, 'POST', '/User', body({ Roles: roles }));
    expect(created.statusCode, created.body).toBe(200);
    const id = created.json().Id as number;
    const { application, clientSecret } = await t.services.accounts.createApplication({
      customerId: customerId(c.customerId),
      userId: userId(id),
      scopes: ['profile', 'limit', 'read', 'quote', 'order', 'voucher', 'write'],
    });
    const app = { clientId: application.clientId, clientSecret };
    return { id, username: created.json().Username as string, app, token: await t.token(app) };
  }
  const profile = (token: string) => call(token, 'GET', '/Profile');

  describe('POST /User and GET /User', () => {
    it('ok/creates a user and shows every field of spec 2.12, by id and by username', async () => {
      const sent = body({
        Roles: ['ORDERS', 'billing'],
        Mobile: '+49 170 1234567',
        Timezone: 'Europe/Paris',
        Locale: 'fr_FR',
      });
      const res = await call(a.token, 'POST', '/User', sent);
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toEqual({
        success: true,
        Id: expect.any(Number),
        FullName: 'Grace Hopper',
        Username: sent.Username,
        Roles: ['ORDERS', 'BILLING'],
      });
      const id = res.json().Id as number;
      const info = (await call(a.token, 'GET', `/User/${id}`)).json().UserInfo;
      expect(info).toEqual({
        Id: id,
        Username: sent.Username,
        FullName: 'Grace Hopper',
        Email: 'grace@customer.example',
        Mobile: '+49 170 1234567',
        Scope: 'UI',
        Active: true,
        Roles: ['ORDERS', 'BILLING'],
        Timezone: 'Europe/Paris',
        Locale: 'fr_FR',
        Language: 'fr_FR',
        SpecialProductAvailability: false,
        TwoFactorEnabled: false,
        InsertDate: t.clock.nowSeconds(),
        LastUpdateDate: t.clock.nowSeconds(),
        LastPasswordChangeDate: t.clock.nowSeconds(),
      });
      expect((await call(a.token, 'GET', `/User/${sent.Username}`)).json().UserInfo).toEqual(info);
      const all = (await call(a.token, 'GET', '/User')).json().UserInfos as { Id: number }[];
      expect(all.map((u) => u.Id)).toContain(id);
      expect(JSON.stringify(all)).not.toContain(PASSWORD);
    });

    it('ok/a username that looks like a number resolves', async () => {
      const username = String(900_000_000 + Math.floor(Math.random() * 1000));
      const id = (await call(a.token, 'POST', '/User', body({ Username: username }))).json().Id as number;
      expect((await call(a.token, 'GET', `/User/${username}`)).json().UserInfo.Id).toBe(id);
    });

    it.each([
      ['shorter than 12 characters', 'Tiny-pw-1', /at least 12 characters/],
      ['containing the username', 'zz-USERNAME-zz-91', /must not contain the username/],
      ["containing the e-mail's local part", 'xx-Grace-x-817-y', /local part/],
      ['a common password', common, /most common passwords/],
    ])('fail/a password %s is refused, naming the rule, with ErrorField Password', async (_case, password, message) => {
      const username = unique('pw');
      const res = await call(
        a.token,
        'POST',
        '/User',
        body({ Username: username, Password: password.replace('USERNAME', username) }),
      );
      expect(res.statusCode).toBe(417);
      expect(res.json()).toMatchObject({ success: false, ErrorField: 'Password' });
      expect(res.json().Message).toMatch(message);
      expect((await call(a.token, 'GET', `/User/${username}`)).statusCode).toBe(404);
    });

    it("ok/the customer's least length applies to its users only", async () => {
      const strict = await t.customer({ name: 'Strict' });
      await t.services.accounts.setPasswordMinLength(customerId(strict.customerId), 30);
      const refused = await call(strict.token, 'POST', '/User', body());
      expect(refused.json()).toMatchObject({
        ErrorField: 'Password',
        Message: 'Password must have at least 30 characters.',
      });
      expect(
        (await call(strict.token, 'POST', '/User', body({ Password: `${PASSWORD}-${PASSWORD}` }))).statusCode,
      ).toBe(200);
      expect((await call(a.token, 'POST', '/User', body())).statusCode).toBe(200);
    });

    it('fail/bad input: every faulty member at once, nothing created', async () => {
      const before = (await call(a.token, 'GET', '/User')).json().UserInfos.length;
      const res = await call(a.token, 'POST', '/User', {
        FullName: ' ',
        Email: 'not-an-address',
        Username: 'x',
        Roles: ['ADMIN', 'SUPERUSER'],
        Locale: 'German',
        Timezone: 'Mars/Olympus',
      });
      expect(res.statusCode).toBe(417);
      expect(
        res
          .json()
          .Errors.map((e: { ErrorField: string }) => e.ErrorField)
          .sort(),
      ).toEqual(['Email', 'FullName', 'Locale', 'Password', 'Roles', 'Timezone', 'Username'].sort());
      expect((await call(a.token, 'GET', '/User')).json().UserInfos.length).toBe(before);
    });

    it('ok/ten creations of one username at once: one user, the others told it is taken (417, was a 500)', async () => {
      const username = `race-${randomBytes(3).toString('hex')}`;
      const answers = await Promise.all(
        Array.from({ length: 10 }, () => call(a.token, 'POST', '/User', body({ Username: username }))),
      );
      expect(answers.map((r) => r.statusCode).sort()).toEqual([200, ...Array(9).fill(417)]);
      for (const r of answers.filter((x) => x.statusCode === 417))
        expect(r.json()).toMatchObject({ ErrorField: 'Username', Message: `Username ${username} is taken.` });
    });

    it("fail/usernames are unique across the service: another customer's is taken", async () => {
      const taken = (await member(a, ['ORDERS'])).username;
      const res = await call(b.token, 'POST', '/User', body({ Username: taken }));
      expect(res.statusCode).toBe(417);
      expect(res.json()).toMatchObject({ ErrorField: 'Username', Message: `Username ${taken} is taken.` });
    });

    it('fail/only ADMIN manages users: ORDERS and READONLY get 403, a token without write scope too', async () => {
      for (const roles of [['ORDERS'], ['READONLY'], ['BILLING', 'VOUCHERS']] as Role[][]) {
        const m = await member(a, roles);
        expect((await call(m.token, 'GET', '/User')).statusCode).toBe(403);
        expect((await call(m.token, 'POST', '/User', body())).statusCode).toBe(403);
        expect((await call(m.token, 'DELETE', `/User/${m.id}`)).statusCode).toBe(403);
      }
      const readOnly = await t.token(a, 'read');
      expect((await call(readOnly, 'GET', '/User')).statusCode).toBe(200);
      expect((await call(readOnly, 'POST', '/User', body())).statusCode).toBe(403);
    });

    it('fail/POST /DNSData and /FileData store a DCV value: a READONLY person and a read-only token get 403 and nothing is stored; ORDERS may', async () => {
      const dcv = { CSR: testCsr().pem, ProductCode: 'TrustPoint.DV' };
      const values = async () =>
        (await t.db.kysely.selectFrom('dcv_values').select('value').where('customer_id', '=', a.customerId).execute())
          .length;
      const before = await values();
      const readOnlyPerson = await member(a, ['READONLY']);
      const readOnlyToken = await t.token(a, 'read');
      for (const token of [readOnlyPerson.token, readOnlyToken])
        for (const path of ['/DNSData', '/FileData'])
          expect((await call(token, 'POST', path, dcv)).statusCode).toBe(403);
      expect(await values()).toBe(before);
      expect(
        (
          await call(
            readOnlyPerson.token,
            'GET',
            '/ApproverList?CommonName=www.certdesk-test.com&ProductCode=TrustPoint.DV',
          )
        ).statusCode,
      ).toBe(200);
      const orders = await member(a, ['ORDERS']);
      expect((await call(orders.token, 'POST', '/DNSData', dcv)).statusCode).toBe(200);
      expect((await call(await t.token(a, 'order'), 'POST', '/FileData', dcv)).statusCode).toBe(200);
    });

    it("fail/another customer's user, by id and by username: 404 everywhere, nothing changed", async () => {
      const m = await member(a, ['ORDERS']);
      for (const key of [String(m.id), m.username]) {
        expect((await call(b.token, 'GET', `/User/${key}`)).statusCode).toBe(404);
        expect((await call(b.token, 'POST', `/User/${key}`, { FullName: 'Mallory' })).statusCode).toBe(404);
        expect((await call(b.token, 'DELETE', `/User/${key}`)).statusCode).toBe(404);
      }
      expect((await call(b.token, 'GET', '/User')).json().UserInfos.map((u: { Id: number }) => u.Id)).not.toContain(
        m.id,
      );
      expect((await call(a.token, 'GET', `/User/${m.id}`)).json().UserInfo).toMatchObject({
        FullName: 'Grace Hopper',
        Active: true,
      });
      expect((await profile(m.token)).statusCode).toBe(200);
    });
  });

  describe('POST /User/{UsernameOrId}', () => {
    it('ok/changes only what is given; Language is taken for Locale; the username may be repeated', async () => {
      const m = await member(a, ['ORDERS']);
      t.clock.set(t.clock.nowSeconds() + 60);
      const res = await call(a.token, 'POST', `/User/${m.username}`, {
        FullName: 'Grace B. Hopper',
        Language: 'de_DE',
        Username: m.username,
      });
      expect(res.json()).toEqual({ success: true, Id: m.id });
      const info = (await call(a.token, 'GET', `/User/${m.id}`)).json().UserInfo;
      expect(info).toMatchObject({
        FullName: 'Grace B. Hopper',
        Locale: 'de_DE',
        Email: 'grace@customer.example',
        Roles: ['ORDERS'],
      });
      expect(info.LastUpdateDate).toBe(info.InsertDate + 60);
    });

    it('fail/the username cannot change; a bad member is refused and nothing changes', async () => {
      const m = await member(a, ['ORDERS']);
      const res = await call(a.token, 'POST', `/User/${m.id}`, { Username: 'renamed-user', FullName: 'Changed' });
      expect(res.statusCode).toBe(417);
      expect(res.json()).toMatchObject({
        ErrorField: 'Username',
        Message: 'Username cannot be changed after the user is created.',
      });
      expect((await call(a.token, 'POST', `/User/${m.id}`, { Roles: ['ROOT'] })).json().ErrorField).toBe('Roles');
      expect((await call(a.token, 'GET', `/User/${m.id}`)).json().UserInfo).toMatchObject({
        FullName: 'Grace Hopper',
        Roles: ['ORDERS'],
      });
    });

    it("ok/a new password ends the user's sign-in sessions, not its applications' tokens", async () => {
      const m = await member(a, ['ORDERS']);
      const session = `cda_${randomBytes(32).toString('base64url')}`;
      await new TokensRepo(t.db).insert(
        [
          {
            hash: hashSecret(session),
            kind: 'access',
            family: randomBytes(16).toString('hex'),
            applicationId: null,
            userId: userId(m.id),
            customerId: customerId(a.customerId),
            scopes: ['read'],
            authType: 'UI',
            expiresAt: t.clock.nowSeconds() + 3600,
          },
        ],
        t.clock.nowSeconds(),
      );
      expect((await profile(session)).json().Scope).toBe('UI');
      const res = await call(a.token, 'POST', `/User/${m.id}`, { Password: 'Neptune-cobalt-77-shift' });
      expect(res.statusCode, res.body).toBe(200);
      expect((await profile(session)).statusCode).toBe(401);
      expect((await profile(m.token)).statusCode).toBe(200);
      const info = (await call(a.token, 'GET', `/User/${m.id}`)).json().UserInfo;
      expect(info.LastPasswordChangeDate).toBe(t.clock.nowSeconds());
    });

    it('ok/deactivating ends every token of the user and its applications at once; reactivating revives none', async () => {
      const m = await member(a, ['ORDERS']);
      expect((await profile(m.token)).statusCode).toBe(200);
      expect((await call(a.token, 'POST', `/User/${m.id}`, { Active: false })).statusCode).toBe(200);
      expect((await profile(m.token)).statusCode).toBe(401);
      expect((await call(a.token, 'GET', `/User/${m.id}`)).json().UserInfo.Active).toBe(false);
      expect((await call(a.token, 'POST', `/User/${m.id}`, { Active: 'True' })).statusCode).toBe(200);
      expect((await profile(m.token)).statusCode).toBe(401);
      expect((await profile(await t.token(m.app))).statusCode).toBe(200);
    });
  });

  describe('DELETE /User/{UsernameOrId}', () => {
    it('ok/deletes, answers with the id and the path as given; tokens and applications end; the username stays taken', async () => {
      const m = await member(a, ['ORDERS']);
      const res = await call(a.token, 'DELETE', `/User/${m.username}`);
      expect(res.json()).toEqual({ success: true, Id: m.id, UserNameOrUserId: m.username });
      expect((await call(a.token, 'GET', `/User/${m.id}`)).statusCode).toBe(404);
      expect((await profile(m.token)).statusCode).toBe(401);
      await expect(t.token(m.app)).rejects.toThrow(/401/);
      expect((await call(a.token, 'POST', '/User', body({ Username: m.username }))).json().ErrorField).toBe('Username');
      expect((await call(a.token, 'DELETE', `/User/${m.id}`)).statusCode).toBe(404);
    });
  });

  describe('the last active ADMIN', () => {
    it('fail/can be neither deleted, deactivated nor demoted; with a second ADMIN it can', async () => {
      const c = await t.customer({ name: 'Solo' });
      const admin = (await call(c.token, 'GET', '/User')).json().UserInfos[0] as { Id: number };
      for (const [method, change] of [
        ['DELETE', undefined],
        ['POST', { Active: false }],
        ['POST', { Roles: ['ORDERS'] }],
      ] as const) {
        const res = await call(c.token, method, `/User/${admin.Id}`, change);
        expect(res.statusCode).toBe(409);
        expect(res.json().Message).toMatch(/last active ADMIN/);
      }
      expect((await call(c.token, 'GET', `/User/${admin.Id}`)).json().UserInfo).toMatchObject({
        Active: true,
        Roles: ['ADMIN'],
      });
      const second = await member(c, ['ADMIN']);
      expect((await call(second.token, 'POST', `/User/${admin.Id}`, { Roles: ['ORDERS'] })).statusCode).toBe(200);
      expect((await call(second.token, 'DELETE', `/User/${second.id}`)).statusCode).toBe(409);
    });

    it('ok/two ADMINs demoting each other at once: one wins, one ADMIN stays (five rounds)', async () => {
      for (let round = 0; round < 5; round++) {
        const c = await t.customer({ name: `Demote race ${round}` });
        const first = (await call(c.token, 'GET', '/User')).json().UserInfos[0].Id as number;
        const second = await member(c, ['ADMIN']);
        const [x, y] = await Promise.all([
          call(c.token, 'POST', `/User/${second.id}`, { Roles: ['ORDERS'] }),
          call(second.token, 'POST', `/User/${first}`, { Roles: ['ORDERS'] }),
        ]);
        // The loser is refused either by the last-ADMIN rule (409) or, when the winner committed
        // before the loser's token was read, because the loser is no longer an ADMIN (403).
        expect([x.statusCode, y.statusCode].filter((s) => s === 200)).toHaveLength(1);
        expect([x.statusCode, y.statusCode].find((s) => s !== 200)).toBeOneOf([403, 409]);
        const left = await t.services.users.listUsers({ customerId: customerId(c.customerId) } as never);
        expect(left.filter((u) => u.active && u.roles.includes('ADMIN'))).toHaveLength(1);
      }
    });

    it('ok/two ADMINs deleting each other at once: one wins, one ADMIN stays (five rounds)', async () => {
      for (let round = 0; round < 5; round++) {
        const c = await t.customer({ name: `Race ${round}` });
        const first = (await call(c.token, 'GET', '/User')).json().UserInfos[0].Id as number;
        const second = await member(c, ['ADMIN']);
        const [x, y] = await Promise.all([
          call(c.token, 'DELETE', `/User/${second.id}`),
          call(second.token, 'DELETE', `/User/${first}`),
        ]);
        // The loser gets 409 (last ADMIN), or 401 when its own deletion committed before its token was read.
        expect([x.statusCode, y.statusCode].filter((s) => s === 200)).toHaveLength(1);
        expect([x.statusCode, y.statusCode].find((s) => s !== 200)).toBeOneOf([401, 409]);
        const left = await t.services.users.listUsers({ customerId: customerId(c.customerId) } as never);
        expect(left.filter((u) => u.active && u.roles.includes('ADMIN'))).toHaveLength(1);
      }
    });
  });

  describe('a second process', () => {
    it("refuses a deactivated user's token at once on PostgreSQL (LISTEN/NOTIFY), on SQLite within its principal cache's time", async () => {
      const other = await createServices(
        loadConfig({
          CERTDESK_DATA_DIR: '/nonexistent-test-data',
          CERTDESK_DNS_SERVERS: '127.0.0.1:9',
          CERTDESK_AUTH_CACHE_SECONDS: '30',
          CERTDESK_CA_KEY_FILE: caKeyFile(t.services.config),
        }),
        { clock: t.clock, db: t.db },
      );
      const app = await createWebApp(other, false);
      // The caches keep time in real milliseconds (the clock only bounds it below): run at real time.
      const saved = t.clock.nowSeconds();
      t.clock.set(Math.floor(Date.now() / 1000));
      try {
        const admin = await t.token(a);
        const m = await member({ ...a, token: admin }, ['ORDERS']);
        const there = () =>
          app.inject({ method: 'GET', url: '/rest/v1/Profile', headers: { authorization: `Bearer ${m.token}` } });
        expect((await there()).statusCode).toBe(200);
        expect((await call(admin, 'POST', `/User/${m.id}`, { Active: false })).statusCode).toBe(200);
        expect((await profile(m.token)).statusCode).toBe(401);
        if (dialect.dialect === 'postgres') {
          // The news went out before the change was answered; the other process hears it on its own
          // LISTEN connection a moment later (not necessarily before its next request): within a
          // second, far inside its cache's 30 s.
          const heardBy = Date.now() + 1000;
          let status = (await there()).statusCode;
          while (status !== 401 && Date.now() < heardBy) {
            await new Promise((r) => setTimeout(r, 10));
            status = (await there()).statusCode;
          }
          expect(status).toBe(401);
        } else {
          // One SQLite file, two service instances in one process: no broadcast between them, the TTL bounds it.
          expect((await there()).statusCode).toBe(200);
          t.clock.set(t.clock.nowSeconds() + 90);
          expect((await there()).statusCode).toBe(401);
        }
      } finally {
        t.clock.set(saved);
        await app.close();
        await other.close();
      }
    });
  });

  describe('fuzz', () => {
    it('1,000 random user bodies → 4xx or 200, never 5xx', async () => {
      const values = [
        null,
        1,
        -1,
        true,
        'x',
        '',
        [],
        {},
        ['ADMIN'],
        'ADMIN,ORDERS',
        'a'.repeat(2000),
        '\u0000',
        'de_DE',
        PASSWORD,
      ];
      const keys = [
        'FullName',
        'Email',
        'Username',
        'Password',
        'Roles',
        'Mobile',
        'Timezone',
        'Locale',
        'Language',
        'Active',
        'Other',
      ];
      const target = await member(a, ['ORDERS']);
      let seed = 7;
      const rnd = (n: number) => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) % n;
      for (let i = 0; i < 1000; i++) {
        const payload: Record<string, unknown> = {};
        for (const k of keys) if (rnd(2) === 0) payload[k] = values[rnd(values.length)];
        const url = rnd(2) === 0 ? '/User' : `/User/${target.id}`;
        const res = await call(a.token, 'POST', url, payload);
        expect(res.statusCode, res.body).toBeLessThan(500);
      }
      expect((await call(a.token, 'GET', '/User')).statusCode).toBe(200);
    }, 120_000);
  });
});
