import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext, type TestCustomer } from '../support/app.js';
import { testDialects } from '../support/databases.js';

describe.each(testDialects())('operations endpoints on $dialect', (dialect) => {
  let t: TestContext;
  let c: TestCustomer;
  beforeAll(async () => {
    t = await createTestContext(dialect);
    c = await t.customer();
  });
  afterAll(async () => t.close());

  it('ok/GET /healthz and /readyz', async () => {
    expect((await t.app.inject({ method: 'GET', url: '/healthz' })).json()).toMatchObject({
      success: true,
      status: 'ok',
    });
    expect((await t.app.inject({ method: 'GET', url: '/readyz' })).json()).toMatchObject({
      success: true,
      status: 'ready',
      // PostgreSQL: the LISTEN connection is up; SQLite without Redis: one process, nothing to hear.
      checks: { database: 'ok', broadcast: t.services.db.dialect === 'postgres' ? 'ok' : 'not configured' },
    });
  });

  it('ok/GET /metrics counts requests by route pattern', async () => {
    await t.call(c.token, { method: 'GET', url: '/rest/v1/Profile' });
    const res = await t.app.inject({ method: 'GET', url: '/metrics' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('text/plain');
    expect(res.body).toMatch(
      /certdesk_http_requests_total\{method="GET",route="\/rest\/v1\/Profile",status="200"\} \d+/,
    );
    expect(res.body).toMatch(/certdesk_jobs\{status="queued"\} \d+/);
    // No worker runs in the test context: a due job waits, and the gauge says for how long.
    const waited = () => t.app.inject({ method: 'GET', url: '/metrics' });
    const overdue = async () => Number(/^certdesk_jobs_overdue_seconds (\d+)$/m.exec((await waited()).body)?.[1]);
    const before = await overdue();
    await t.services.jobs.enqueue(
      { name: 'housekeeping.purge', payload: {}, runAt: t.clock.nowSeconds() },
      t.clock.nowSeconds(),
    );
    t.clock.advance(600);
    expect(await overdue()).toBeGreaterThanOrEqual(600);
    expect(await overdue()).toBe(Math.max(before + 600, 600));
  });

  it('ok/the OpenAPI document lists every route with its schemas; the docs page is served', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/rest/v1/openapi.json' });
    expect(res.statusCode).toBe(200);
    const doc = res.json();
    expect(doc.openapi).toMatch(/^3\./);
    for (const path of [
      '/rest/v1/Profile',
      '/rest/v1/Limit',
      '/rest/v1/Products',
      '/rest/v1/ProductDetails',
      '/rest/v1/Quote',
      '/rest/v1/UserAgreement',
      '/rest/v1/ValidateCSR',
      '/rest/v1/ValidateName',
      '/rest/v1/BaseDomain/{FQDN}',
      '/oauth2/token',
    ]) {
      expect(doc.paths, path).toHaveProperty([path]);
    }
    expect(doc.paths['/rest/v1/Quote'].get.parameters.map((p: { name: string }) => p.name)).toContain('ValidityPeriod');
    const page = await t.app.inject({ method: 'GET', url: '/rest/v1/docs/' });
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('<html');
  });

  it('ok/every response carries a request id; a caller’s X-Request-Id is kept', async () => {
    const res = await t.call(c.token, {
      method: 'GET',
      url: '/rest/v1/Profile',
      headers: { 'x-request-id': 'abc-123' },
    });
    expect(res.headers['x-request-id']).toBe('abc-123');
    expect((await t.app.inject({ method: 'GET', url: '/nope' })).headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    const odd = await t.call(c.token, {
      method: 'GET',
      url: '/rest/v1/Profile',
      headers: { 'x-request-id': 'x'.repeat(200) },
    });
    expect(odd.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('fail/unknown paths → 404 JSON envelope', async () => {
    for (const url of ['/nope', '/rest/v1', '/rest/v1/Nope', '/rest/v2/Profile']) {
      const res = await t.app.inject({ method: 'GET', url });
      expect(res.statusCode).toBe(404);
      expect(res.json()).toMatchObject({ success: false, ErrorId: -2404 });
      expect(res.headers['content-length']).toBe(String(Buffer.byteLength(res.body)));
    }
  });
});

describe.each(testDialects())('rate limits on $dialect', (dialect) => {
  let t: TestContext;
  let c: TestCustomer;
  beforeAll(async () => {
    t = await createTestContext(dialect, { CERTDESK_RATE_LIMIT: '5', CERTDESK_RATE_LIMIT_ANONYMOUS: '3' });
    c = await t.customer();
  });
  afterAll(async () => t.close());

  it('fail/an application over its limit → 429 with Retry-After and the envelope, whichever of its tokens it uses', async () => {
    const tokens = [await t.token(c), c.token];
    const codes: number[] = [];
    let last;
    for (let i = 0; i < 7; i++) {
      last = await t.call(tokens[i % 2], { method: 'GET', url: '/rest/v1/Profile' });
      codes.push(last.statusCode);
    }
    expect(codes).toEqual([200, 200, 200, 200, 200, 429, 429]);
    expect(Number(last!.headers['retry-after'])).toBeGreaterThan(0);
    expect(last!.json()).toMatchObject({ success: false, ErrorId: -1429 });
  });

  it('fail/anonymous calls are limited per address, stricter; bad tokens count as anonymous', async () => {
    const from = { remoteAddress: '192.0.2.10' };
    const codes: number[] = [];
    for (let i = 0; i < 4; i++) {
      codes.push(
        (
          await t.app.inject({
            method: 'GET',
            url: '/rest/v1/Profile',
            headers: { authorization: 'Bearer bad' },
            ...from,
          })
        ).statusCode,
      );
    }
    expect(codes).toEqual([401, 401, 401, 429]);
    const token = await t.app.inject({
      method: 'POST',
      url: '/oauth2/token',
      payload: { grant_type: 'client_credentials', client_id: 'x', client_secret: 'y' },
      remoteAddress: '192.0.2.11',
    });
    expect(token.statusCode).toBe(401);
  });

  it('fail/an IPv6 client rotating through its /64 is limited as one address', async () => {
    const codes: number[] = [];
    for (let i = 1; i <= 4; i++) {
      const res = await t.app.inject({
        method: 'POST',
        url: '/oauth2/token',
        payload: { grant_type: 'client_credentials', client_id: 'x', client_secret: 'y' },
        remoteAddress: `2001:db8:1:2::${i}`,
      });
      codes.push(res.statusCode);
    }
    expect(codes).toEqual([401, 401, 401, 429]);
  });

  it('ok/health and metrics are never limited', async () => {
    for (let i = 0; i < 10; i++) expect((await t.app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
  });
});

describe('rate limits behind a proxy', () => {
  it('fail/a client cannot reset its bucket by forging the left-most X-Forwarded-For entry', async () => {
    const t = await createTestContext(testDialects()[0]!, {
      CERTDESK_RATE_LIMIT_ANONYMOUS: '3',
      CERTDESK_TRUST_PROXY: '1',
    });
    try {
      const codes: number[] = [];
      for (let i = 0; i < 4; i++) {
        const res = await t.app.inject({
          method: 'GET',
          url: '/rest/v1/Profile',
          remoteAddress: '10.0.0.2',
          headers: { 'x-forwarded-for': `198.51.100.${i}, 203.0.113.5` },
        });
        codes.push(res.statusCode);
      }
      expect(codes).toEqual([401, 401, 401, 429]);
    } finally {
      await t.close();
    }
  });
});
