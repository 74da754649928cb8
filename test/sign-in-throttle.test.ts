// Growing delays after failed sign-ins, per account and per address, over real HTTP: the same
// for a username that does not exist, counted in the database so concurrent failures all count.
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext, type TestCustomer } from './support/app.js';
import { browser, hiddenFields } from './support/browser.js';
import { testDialects } from './support/databases.js';

const PASSWORD = 'Saturn-vanilla-42-drift';

describe.each(testDialects())('sign-in throttling on $dialect', (dialect) => {
  let t: TestContext;
  let a: TestCustomer;
  let base: string;
  let username: string;

  beforeEach(async () => {
    t = await createTestContext(dialect, { CERTDESK_RATE_LIMIT: '1000000', CERTDESK_RATE_LIMIT_ANONYMOUS: '1000000' });
    a = await t.customer({ name: 'Alpha' });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    username = `p-${randomBytes(4).toString('hex')}`;
    const res = await t.call(a.token, {
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
    expect(res.statusCode).toBe(200);
  }, 60_000);
  afterEach(async () => t.close());

  const attempt = async (user: string, password: string) => {
    const b = browser(base);
    const form = await b.send('GET', '/signin');
    return b.send('POST', '/signin', { username: user, password, ...hiddenFields(form.text) });
  };
  const later = (seconds: number) => t.clock.set(t.clock.nowSeconds() + seconds);

  it('ok/two failures are free; from the third 1 s, then 2, 4, 8 s; the right password waits too; a success forgets them', async () => {
    for (let i = 0; i < 2; i++) expect((await attempt(username, 'wrong-password-123')).status).toBe(401);
    expect((await attempt(username, 'wrong-password-123')).status).toBe(401);
    const blocked = await attempt(username, PASSWORD);
    expect(blocked.status).toBe(429);
    expect(blocked.headers.get('retry-after')).toBe('1');
    expect(blocked.text).toContain('Too many failed attempts');
    for (const wait of [1, 2, 4]) {
      later(wait);
      expect((await attempt(username, 'wrong-password-123')).status).toBe(401);
      expect((await attempt(username, PASSWORD)).headers.get('retry-after')).toBe(String(wait * 2));
    }
    later(8);
    expect((await attempt(username, PASSWORD)).status).toBe(303);
    expect((await attempt(username, 'wrong-password-123')).status).toBe(401);
    expect((await attempt(username, PASSWORD)).status).toBe(303);
  });

  it('ok/a username that does not exist is answered exactly alike (no enumeration)', async () => {
    const nobody = `nobody-${randomBytes(4).toString('hex')}`;
    const answers = async (user: string) => {
      const out: [number, string | null, string][] = [];
      for (let i = 0; i < 4; i++) {
        const res = await attempt(user, 'wrong-password-123');
        out.push([res.status, res.headers.get('retry-after'), res.text]);
      }
      return out;
    };
    expect(await answers(nobody)).toEqual(await answers(username));
  });

  it('ok/one address failing for many accounts is slowed down too', async () => {
    for (let i = 0; i < 20; i++) expect((await attempt(`guess-${i}`, 'wrong-password-123')).status).toBe(401);
    const res = await attempt(username, PASSWORD);
    expect(res.status).toBe(429);
    later(2);
    expect((await attempt(username, PASSWORD)).status).toBe(303);
  });

  it('ok/an IPv6 client rotating through its /64 counts as one address', async () => {
    for (let i = 1; i <= 20; i++)
      expect(
        (await t.services.signIn.signIn(`guess-${i}`, 'wrong-password-123', `2001:db8:9:9::${i.toString(16)}`)).kind,
      ).toBe('failed');
    expect(await t.services.signIn.signIn(username, PASSWORD, '2001:db8:9:9:abcd::77')).toMatchObject({
      kind: 'throttled',
    });
    // Another /64 is another client.
    expect(await t.services.signIn.signIn(username, PASSWORD, '2001:db8:9:a::1')).toMatchObject({ kind: 'signedIn' });
  });

  it('ok/twelve failures at once all count', async () => {
    const results = await Promise.all(Array.from({ length: 12 }, () => attempt(username, 'wrong-password-123')));
    expect(results.every((r) => r.status === 401 || r.status === 429)).toBe(true);
    const row = await sql<{
      failures: number;
    }>`select failures from sign_in_failures where key = ${`u:${username}`}`.execute(t.db.kysely);
    const checked = results.filter((r) => r.status === 401).length;
    expect(Number(row.rows[0]!.failures)).toBe(checked);
    expect(checked).toBeGreaterThanOrEqual(3);
  });
});
