import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDialects } from '../../test/support/databases.js';
import { customerId, userId } from '../core/index.js';
import type { Db } from './database.js';
import { migrateToLatest } from './migrate.js';
import { ApplicationsRepo, AuditRepo, CustomersRepo, TokensRepo, UsersRepo } from './index.js';

describe.each(testDialects())('storage on $dialect', ({ open }) => {
  let db: Db;
  beforeAll(async () => {
    db = await open();
  });
  afterAll(async () => {
    await db.close();
  });

  const customer = {
    name: 'Acme',
    email: 'ops@acme.test',
    currency: 'EUR',
    creditLimitMinor: 100_000,
    country: 'DE',
    locale: 'de_DE',
    timezone: 'Europe/Berlin',
  };

  it('migrates idempotently', async () => {
    expect(await migrateToLatest(db)).toEqual([]);
  });

  it('creates and reads a customer with integer money', async () => {
    const c = await new CustomersRepo(db).create(customer, 1_700_000_000);
    const read = await new CustomersRepo(db).byId(c.id);
    expect(read).toMatchObject({ ...customer, usedMinor: 0, createdAt: 1_700_000_000 });
    expect(typeof read?.id).toBe('number');
  });

  it('never returns a user of another customer', async () => {
    const customers = new CustomersRepo(db);
    const a = await customers.create(customer, 1);
    const b = await customers.create({ ...customer, name: 'Other' }, 1);
    const users = new UsersRepo(db);
    const u = await users.create(
      {
        customerId: a.id,
        username: `u-${a.id}`,
        fullName: 'A',
        email: 'a@acme.test',
        passwordHash: 'x',
        roles: ['ADMIN'],
      },
      1,
    );
    expect((await users.byId(a.id, u.id))?.roles).toEqual(['ADMIN']);
    expect(await users.byId(b.id, u.id)).toBeUndefined();
    await expect(
      users.create(
        { customerId: b.id, username: `u-${a.id}`, fullName: 'B', email: 'b@x.test', passwordHash: 'x', roles: [] },
        1,
      ),
    ).rejects.toThrow();
  });

  it('finds live tokens only, and revokes a whole family', async () => {
    const c = await new CustomersRepo(db).create(customer, 1);
    const u = await new UsersRepo(db).create(
      {
        customerId: c.id,
        username: `t-${c.id}`,
        fullName: 'T',
        email: 't@acme.test',
        passwordHash: 'x',
        roles: ['ORDERS'],
      },
      1,
    );
    const app = await new ApplicationsRepo(db).create(
      {
        customerId: c.id,
        userId: u.id,
        name: 'app',
        clientId: `cid-${c.id}`,
        secretHash: 'h',
        scopes: ['read', 'order'],
      },
      1,
    );
    const tokens = new TokensRepo(db);
    const base = {
      family: `f-${c.id}`,
      applicationId: app.id,
      userId: u.id,
      customerId: c.id,
      scopes: ['read' as const],
      authType: 'API' as const,
    };
    await tokens.insert(
      [
        { ...base, hash: `a-${c.id}`, kind: 'access', expiresAt: 100 },
        { ...base, hash: `r-${c.id}`, kind: 'refresh', expiresAt: 1000 },
        { ...base, family: `g-${c.id}`, hash: `old-${c.id}`, kind: 'access', expiresAt: 10 },
      ],
      1,
    );
    expect(await tokens.findLive(`a-${c.id}`, 50)).toMatchObject({
      customerId: c.id,
      userId: u.id,
      roles: ['ORDERS'],
      scopes: ['read'],
    });
    expect(await tokens.findLive(`old-${c.id}`, 50)).toBeUndefined();
    expect(await tokens.findLive('nope', 50)).toBeUndefined();
    expect(await tokens.revokeFamilyOf(`r-${c.id}`, 60)).toBe(2);
    expect(await tokens.findLive(`a-${c.id}`, 61)).toBeUndefined();
    expect(await new ApplicationsRepo(db).byClientId(`cid-${c.id}`)).toMatchObject({
      scopes: ['read', 'order'],
      revoked: false,
    });
  });

  it('stops tokens of a revoked application', async () => {
    const c = await new CustomersRepo(db).create(customer, 1);
    const u = await new UsersRepo(db).create(
      {
        customerId: c.id,
        username: `r-${c.id}`,
        fullName: 'R',
        email: 'r@acme.test',
        passwordHash: 'x',
        roles: ['ADMIN'],
      },
      1,
    );
    const apps = new ApplicationsRepo(db);
    const app = await apps.create(
      { customerId: c.id, userId: u.id, name: 'app', clientId: `rc-${c.id}`, secretHash: 'h', scopes: ['read'] },
      1,
    );
    const tokens = new TokensRepo(db);
    await tokens.insert(
      [
        {
          hash: `ra-${c.id}`,
          kind: 'access',
          family: `rf-${c.id}`,
          applicationId: app.id,
          userId: u.id,
          customerId: c.id,
          scopes: ['read'],
          authType: 'API',
          expiresAt: 100,
        },
      ],
      1,
    );
    expect(await tokens.findLive(`ra-${c.id}`, 5)).toBeDefined();
    expect(await apps.markRevoked(app.id, 6)).toBe(true);
    expect(await tokens.findLive(`ra-${c.id}`, 7)).toBeUndefined();
  });

  it('refuses a negative used amount (credit check constraint)', async () => {
    const c = await new CustomersRepo(db).create(customer, 1);
    await expect(
      db.kysely.updateTable('customers').set({ used_minor: -1 }).where('id', '=', c.id).execute(),
    ).rejects.toThrow();
  });

  it('appends audit events per customer', async () => {
    const audit = new AuditRepo(db);
    await audit.append({
      at: 5,
      customerId: customerId(42),
      actor: `user:${userId(1)}`,
      clientAddress: '127.0.0.1',
      action: 'token.issued',
      subject: 'app:x',
    });
    expect(await audit.listByCustomer(customerId(42))).toMatchObject([
      { action: 'token.issued', clientAddress: '127.0.0.1' },
    ]);
    expect(await audit.listByCustomer(customerId(43))).toEqual([]);
  });
});
