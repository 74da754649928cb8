// API applications over the API (an extension of the spec): ADMIN users list, create, change and
// revoke them; a secret is shown once; narrower scopes and revocation end the tokens at once.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { customerId } from '../../src/core/index.js';
import { createTestContext, type TestContext, type TestCustomer } from '../support/app.js';
import { testDialects } from '../support/databases.js';

describe.each(testDialects())('API applications on $dialect', (dialect) => {
  let t: TestContext;
  let a: TestCustomer;
  let b: TestCustomer;
  beforeAll(async () => {
    t = await createTestContext(dialect, { CERTDESK_RATE_LIMIT: '1000000' });
    a = await t.customer({ name: 'Alpha' });
    b = await t.customer({ name: 'Beta' });
  });
  afterAll(async () => t.close());

  const call = (token: string, method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object) =>
    t.call(token, { method, url: `/rest/v1${url}`, ...(payload === undefined ? {} : { payload }) });
  const create = async (token: string, payload: object) => {
    const res = await call(token, 'POST', '/Application', payload);
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as {
      Id: number;
      ClientId: string;
      ClientSecret: string;
      Scopes: string[];
      RedirectUris: string[];
    };
  };
  const tokenOf = (app: { ClientId: string; ClientSecret: string }, scope?: string) =>
    t.token({ clientId: app.ClientId, clientSecret: app.ClientSecret }, scope);

  it('ok/create shows the secret once; the list shows the rest; the application gets tokens', async () => {
    const app = await create(a.token, {
      Name: 'billing sync',
      Scopes: 'read limit',
      RedirectUris: ['https://panel.example/callback', 'http://127.0.0.1:8400/cb'],
    });
    expect(app).toMatchObject({
      success: true,
      Name: 'billing sync',
      Scopes: ['read', 'limit'],
      RedirectUris: ['https://panel.example/callback', 'http://127.0.0.1:8400/cb'],
      Revoked: false,
    });
    expect(app.ClientSecret).toMatch(/^cds_/);
    const list = (await call(a.token, 'GET', '/Applications')).json();
    const listed = list.Applications.find((x: { Id: number }) => x.Id === app.Id);
    expect(listed).toMatchObject({ ClientId: app.ClientId, CreationDate: expect.stringMatching(/Z$/) });
    expect(JSON.stringify(list)).not.toContain(app.ClientSecret);
    const token = await tokenOf(app);
    expect((await call(token, 'GET', '/Limit')).statusCode).toBe(200);
    expect((await call(token, 'POST', '/ValidateCSR', { CSR: 'x' })).statusCode).toBe(403);
  });

  it('ok/narrower scopes end the tokens minted with the old ones; a wider grant is refused', async () => {
    const app = await create(a.token, { Scopes: ['read', 'order'] });
    const before = await tokenOf(app);
    expect((await call(before, 'GET', '/Orders')).statusCode).toBe(200);
    expect(
      (await call(a.token, 'POST', `/Application/${app.Id}`, { Scopes: ['read'], Name: 'narrow' })).json(),
    ).toEqual({
      success: true,
      Id: app.Id,
    });
    expect((await call(before, 'GET', '/Orders')).statusCode).toBe(401);
    await expect(tokenOf(app, 'order')).rejects.toThrow(/400/);
    expect((await call(await tokenOf(app), 'GET', '/Orders')).statusCode).toBe(200);
    const widened = await tokenOf(app);
    expect((await call(a.token, 'POST', `/Application/${app.Id}`, { Scopes: 'read write' })).statusCode).toBe(200);
    expect((await call(widened, 'GET', '/Orders')).statusCode).toBe(200);
  });

  it('ok/a token never holds a scope its application lost (one granted while the narrowing ran outlives its revocation)', async () => {
    const app = await create(a.token, { Scopes: ['read', 'order'] });
    // The race's outcome: a token minted with the old scopes, stored after the narrowing revoked the
    // application's live tokens. The narrowing is written here as it commits, the token left alive.
    const late = await tokenOf(app);
    await t.db.kysely.updateTable('api_applications').set({ scopes: 'read' }).where('id', '=', app.Id).execute();
    const order = await call(late, 'POST', '/TestOrder', {});
    expect(order.statusCode, order.body).toBe(403);
    expect(order.json()).toMatchObject({ success: false, ErrorId: -2004 });
    expect((await call(late, 'GET', '/Orders')).statusCode).toBe(200);
  });

  it('ok/revoking ends the application and its tokens at once', async () => {
    const app = await create(a.token, { Scopes: 'read' });
    const token = await tokenOf(app);
    expect((await call(a.token, 'DELETE', `/Application/${app.Id}`)).json()).toEqual({ success: true, Id: app.Id });
    expect((await call(token, 'GET', '/Orders')).statusCode).toBe(401);
    await expect(tokenOf(app)).rejects.toThrow(/401/);
    expect((await call(a.token, 'DELETE', `/Application/${app.Id}`)).statusCode).toBe(404);
    expect((await call(a.token, 'POST', `/Application/${app.Id}`, { Name: 'again' })).statusCode).toBe(404);
    const listed = (await call(a.token, 'GET', '/Applications')).json().Applications;
    expect(listed.find((x: { Id: number }) => x.Id === app.Id).Revoked).toBe(true);
  });

  it.each([
    ['no scopes', { Name: 'x' }, 'Scopes'],
    ['an unknown scope', { Scopes: 'read admin' }, 'Scopes'],
    ['a plain-http redirect URI', { Scopes: 'read', RedirectUris: ['http://panel.example/cb'] }, 'RedirectUris'],
    ['a redirect URI with a fragment', { Scopes: 'read', RedirectUris: 'https://panel.example/cb#x' }, 'RedirectUris'],
    ['a relative redirect URI', { Scopes: 'read', RedirectUris: ['/cb'] }, 'RedirectUris'],
    ['a name of 101 characters', { Scopes: 'read', Name: 'n'.repeat(101) }, 'Name'],
    ['a UserId of no user here', { Scopes: 'read', UserId: 999_999 }, 'UserId'],
  ])('fail/%s is refused with its field, nothing created', async (_case, payload, field) => {
    const count = (await call(a.token, 'GET', '/Applications')).json().Applications.length;
    const res = await call(a.token, 'POST', '/Application', payload);
    expect(res.statusCode).toBe(417);
    expect(res.json().ErrorField).toBe(field);
    expect((await call(a.token, 'GET', '/Applications')).json().Applications.length).toBe(count);
  });

  it('fail/only ADMIN manages applications', async () => {
    const sub = await call(a.token, 'POST', '/User', {
      FullName: 'Ops',
      Email: 'ops@customer.example',
      Username: `ops-${Date.now()}`,
      Password: 'Saturn-vanilla-42-drift',
      Roles: ['ORDERS', 'READONLY'],
    });
    const { application, clientSecret } = await t.services.accounts.createApplication({
      customerId: customerId(a.customerId),
      userId: sub.json().Id,
      scopes: ['read', 'write', 'order'],
    });
    const token = await t.token({ clientId: application.clientId, clientSecret });
    expect((await call(token, 'GET', '/Applications')).statusCode).toBe(403);
    expect((await call(token, 'POST', '/Application', { Scopes: 'read' })).statusCode).toBe(403);
  });

  it("fail/another customer's application: not listed, 404 to change or revoke, nothing changed", async () => {
    const app = await create(a.token, { Scopes: 'read', Name: 'mine' });
    const token = await tokenOf(app);
    const theirs = (await call(b.token, 'GET', '/Applications')).json().Applications.map((x: { Id: number }) => x.Id);
    expect(theirs).not.toContain(app.Id);
    expect((await call(b.token, 'POST', `/Application/${app.Id}`, { Name: 'stolen' })).statusCode).toBe(404);
    expect((await call(b.token, 'DELETE', `/Application/${app.Id}`)).statusCode).toBe(404);
    expect((await call(b.token, 'POST', '/Application', { Scopes: 'read', UserId: 1 })).json().ErrorField).toBe(
      'UserId',
    );
    expect((await call(token, 'GET', '/Profile')).statusCode).toBe(200);
    const mine = (await call(a.token, 'GET', '/Applications'))
      .json()
      .Applications.find((x: { Id: number }) => x.Id === app.Id);
    expect(mine).toMatchObject({ Name: 'mine', Revoked: false });
  });

  it('ok/the OpenAPI document marks the routes as an extension; every change is an audit event with actor and address', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/rest/v1/openapi.json' })).json();
    expect(doc.paths['/rest/v1/Application'].post.tags).toEqual(['applications (extension)']);
    expect(doc.paths['/rest/v1/Application'].post.description).toMatch(/Extension of the specification/);
    const app = await create(a.token, { Scopes: 'read' });
    await call(a.token, 'DELETE', `/Application/${app.Id}`);
    const events = await t.services.accounts.auditEvents(customerId(a.customerId), 1000);
    const mine = events
      .filter((e) => e.subject === `app:${app.ClientId}`)
      .map((e) => [e.action, e.actor, e.clientAddress]);
    expect(mine).toEqual([
      ['application.revoked', expect.stringMatching(/^user:\d+$/), '127.0.0.1'],
      ['application.created', expect.stringMatching(/^user:\d+$/), '127.0.0.1'],
    ]);
  });
});
