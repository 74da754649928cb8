// The database out of reach or busy while requests come in: a PostgreSQL restart, failover or cut
// network (a real TCP relay on loopback between the service and the server, closed and refusing),
// a COMMIT whose answer is lost outside an order's batch, a SQLite file another process holds
// locked past the busy timeout. The caller gets a 503 that says whether sending the same request
// again will do (Retry-After) or whether to look first; never a 500, and nothing half done.
import { randomUUID } from 'node:crypto';
import { connect, type AddressInfo } from 'node:net';
import Database from 'better-sqlite3';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { CertdeskError, CommitOutcomeUnknown, DatabaseUnavailable, type CustomerId } from '../src/core/index.js';
import { createWebApp } from '../src/main.js';
import { retryAfter } from '../src/web/envelope.js';
import { buildKvApp } from '../src/web/kv/server.js';
import { createTestContext, type TestContext, type TestCustomer } from './support/app.js';
import { logCapture } from './support/raw-http.js';
import { startCommitLossRelay, type CommitLossRelay } from './support/commit-loss.js';
import { openPostgres, sqliteFile, testDialects } from './support/databases.js';
import { dnsOrderBody, issuingContext, type IssuingContext } from './support/issuing-context.js';

const url = process.env.CERTDESK_TEST_DATABASE_URL;
if (url === undefined || url === '')
  console.warn('PostgreSQL outage tests not run: they need CERTDESK_TEST_DATABASE_URL');

const partnerOrders = (t: TestContext, c: TestCustomer, partnerOrderId: string) =>
  t.db.kysely
    .selectFrom('orders')
    .select('id')
    .where('customer_id', '=', c.customerId)
    .where('partner_order_id', '=', partnerOrderId)
    .execute();

describe.skipIf(url === undefined || url === '')('PostgreSQL out of reach', () => {
  let relay: CommitLossRelay;
  let context: IssuingContext;
  let t: TestContext;
  let c: TestCustomer;

  beforeAll(async () => {
    relay = await startCommitLossRelay(new URL(url!));
    context = await issuingContext({ dialect: 'postgres', open: () => openPostgres(url!, relay.host) }, 'Outage');
    ({ t, c } = context);
  }, 120_000);
  afterEach(() => {
    relay.lose(undefined);
    relay.refuseNew = false;
  });
  afterAll(async () => {
    await context?.close();
    await relay?.close();
  });

  const cancel = (id: number, key: string) =>
    t.call(c.token, { method: 'DELETE', url: `/rest/v1/Order/${id}`, headers: { 'idempotency-key': key } });

  it('fail/reads, orders, tokens and pages while the server is gone: 503 with Retry-After (OAuth: temporarily_unavailable; a page for a person); nothing stored; the same calls succeed once it is back', async () => {
    relay.refuseNew = true;
    relay.closeAll();
    const list = await t.call(c.token, { method: 'GET', url: '/rest/v1/Orders' });
    expect(list.statusCode, list.body).toBe(503);
    expect(list.json()).toEqual({
      success: false,
      ErrorId: -1503,
      Message: 'The database cannot be reached. Try again shortly.',
    });
    expect(list.headers['retry-after']).toBe('5');

    const order = () =>
      t.call(c.token, { method: 'POST', url: '/rest/v1/Order', payload: dnsOrderBody({ PartnerOrderID: 'outage-1' }) });
    const refused = await order();
    expect(refused.statusCode, refused.body).toBe(503);
    expect(refused.json()).toMatchObject({ success: false, ErrorId: -1503 });
    expect(refused.headers['retry-after']).toBe('5');

    const token = await t.app.inject({
      method: 'POST',
      url: '/oauth2/token',
      payload: { grant_type: 'client_credentials', client_id: c.clientId, client_secret: c.clientSecret },
    });
    expect(token.statusCode, token.body).toBe(503);
    expect(token.json()).toEqual({
      error: 'temporarily_unavailable',
      error_description: 'The database cannot be reached. Try again shortly.',
    });
    expect(token.headers['retry-after']).toBe('5');

    // A person at the web interface is shown a page, in their language, not the API's envelope.
    const screen = await t.app.inject({
      method: 'GET',
      url: '/orders?lang=de',
      headers: { cookie: `certdesk_session=cdw_${'a'.repeat(43)}` },
    });
    expect(screen.statusCode, screen.body).toBe(503);
    expect(screen.headers['content-type']).toMatch(/^text\/html/);
    expect(screen.headers['retry-after']).toBe('5');
    expect(screen.body).toContain('Vorübergehend nicht erreichbar');

    relay.refuseNew = false;
    expect(await partnerOrders(t, c, 'outage-1')).toEqual([]);
    const placed = await order();
    expect(placed.statusCode, placed.body).toBe(200);
    expect(await partnerOrders(t, c, 'outage-1')).toEqual([{ id: placed.json().ServiceOrderID }]);
    expect((await t.call(c.token, { method: 'GET', url: '/rest/v1/Orders' })).statusCode).toBe(200);
  });

  it('fail/a cancel whose COMMIT answer is lost: 503 that says to look first, no Retry-After; it was kept, and the same key again answers its success; refunded once', async () => {
    const placed = await t.call(c.token, { method: 'POST', url: '/rest/v1/Order', payload: dnsOrderBody() });
    expect(placed.statusCode, placed.body).toBe(200);
    const id = placed.json().ServiceOrderID as number;
    const key = randomUUID();
    relay.lose({ how: 'answerLost', when: (sent) => sent.includes('order.cancelled') });
    const lost = await cancel(id, key);
    expect(relay.lost).toBe(1);
    expect(lost.statusCode, lost.body).toBe(503);
    expect(lost.json()).toMatchObject({
      success: false,
      ErrorId: -1503,
      Message: expect.stringMatching(/look before sending it again/),
    });
    expect(lost.headers['retry-after']).toBeUndefined();

    const stored = await t.db.kysely
      .selectFrom('orders')
      .select(['major_status', 'cancel_key'])
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    expect(stored).toEqual({ major_status: 'CANCELLED', cancel_key: key });
    const again = await cancel(id, key);
    expect(again.statusCode, again.body).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    const refunds = await t.db.kysely
      .selectFrom('ledger')
      .select('kind')
      .where('order_id', '=', id)
      .where('kind', '=', 'refund')
      .execute();
    expect(refunds).toHaveLength(1);
  });
});

describe('SQLite locked by another process past the busy timeout', () => {
  const dialect = sqliteFile();
  let t: TestContext;
  let c: TestCustomer;

  beforeAll(async () => {
    t = await createTestContext(dialect);
    c = await t.customer({ name: 'Busy', creditLimit: 100000 });
  }, 120_000);
  afterAll(async () => t?.close());

  it('fail/POST /Order: 503 "busy" with Retry-After, nothing stored; once the lock is gone the same order is placed', async () => {
    const other = new Database(dialect.file());
    try {
      other.exec('BEGIN IMMEDIATE');
      const body = dnsOrderBody({ PartnerOrderID: 'busy-1' });
      const refused = await t.call(c.token, { method: 'POST', url: '/rest/v1/Order', payload: body });
      expect(refused.statusCode, refused.body).toBe(503);
      expect(refused.json()).toMatchObject({
        success: false,
        ErrorId: -1503,
        Message: 'The database is busy. Try again shortly.',
      });
      expect(refused.headers['retry-after']).toBe('5');
      other.exec('ROLLBACK');
      expect(await partnerOrders(t, c, 'busy-1')).toEqual([]);
      const placed = await t.call(c.token, { method: 'POST', url: '/rest/v1/Order', payload: body });
      expect(placed.statusCode, placed.body).toBe(200);
      expect(await partnerOrders(t, c, 'busy-1')).toHaveLength(1);
    } finally {
      if (other.inTransaction) other.exec('ROLLBACK');
      other.close();
    }
  }, 60_000);

  it('fail/the hash store: POST /<name> answers 503 "busy" with Retry-After; nothing filed; once the lock is gone it files', async () => {
    const { key } = await t.services.hashStore.createKey(c.customerId as CustomerId);
    const kv = await buildKvApp({ hashStore: t.services.hashStore, logger: false });
    const file = () =>
      kv.inject({
        method: 'POST',
        url: '/busy.example.org',
        headers: { 'x-api-key': key, 'content-type': 'application/json' },
        payload: { hash: 'h-busy' },
      });
    const other = new Database(dialect.file());
    try {
      other.exec('BEGIN IMMEDIATE');
      const refused = await file();
      expect(refused.statusCode, refused.body).toBe(503);
      expect(refused.json()).toEqual({ message: 'The database is busy. Try again shortly.' });
      expect(refused.headers['retry-after']).toBe('5');
      other.exec('ROLLBACK');
      expect(await t.services.hashStore.lookup(key, 'busy.example.org')).toBeUndefined();
      expect((await file()).statusCode).toBe(200);
      expect(await t.services.hashStore.lookup(key, 'busy.example.org')).toBe('h-busy');
    } finally {
      if (other.inTransaction) other.exec('ROLLBACK');
      other.close();
      await kv.close();
    }
  }, 60_000);
});

describe('what is not the database', () => {
  it('ok/Retry-After only where sending the same request again will do: the database unavailable, not a lost COMMIT nor a CA not set up', () => {
    const cause = new Error('x');
    expect(retryAfter(new DatabaseUnavailable('The database is busy.', cause), cause)).toBe('5');
    expect(retryAfter(new CommitOutcomeUnknown(cause), cause)).toBeUndefined();
    const notInitialized = new CertdeskError('notReady', 'the CA hierarchy is not initialized');
    expect(retryAfter(notInitialized, notInitialized)).toBeUndefined();
  });

  it('ok/a client that hangs up mid-body (its socket ECONNRESET) is refused as a bad request, never logged as the database unavailable', async () => {
    const t = await createTestContext(testDialects()[0]!);
    const { lines, sink } = logCapture();
    const logger = pino({ level: 'info' }, sink);
    const app = await createWebApp(t.services, logger);
    const kv = await buildKvApp({ hashStore: t.services.hashStore, logger });
    try {
      await app.listen({ host: '127.0.0.1', port: 0 });
      await kv.listen({ host: '127.0.0.1', port: 0 });
      const c = await t.customer();
      const hangUp = (port: number, head: string) =>
        new Promise<void>((resolve) => {
          const socket = connect(port, '127.0.0.1', () => {
            socket.write(`${head}Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a":`, () =>
              socket.resetAndDestroy(),
            );
          });
          socket.on('error', () => undefined);
          socket.on('close', () => resolve());
        });
      const port = (server: typeof app) => (server.server.address() as AddressInfo).port;
      await hangUp(port(app), 'POST /oauth2/token HTTP/1.1\r\nHost: certdesk.test\r\n');
      await hangUp(
        port(app),
        `POST /rest/v1/Order HTTP/1.1\r\nHost: certdesk.test\r\nAuthorization: Bearer ${c.token}\r\n`,
      );
      await hangUp(
        port(kv),
        'POST /www.certdesk-test.com HTTP/1.1\r\nHost: kv.certdesk.test\r\nx-api-key: cdk_unknown\r\n',
      );
      const logged = () => lines.map((l) => JSON.parse(l) as { level: number; msg: string; kind?: string });
      // Each listener has dealt with its hung-up request once it has logged the refusal.
      await vi.waitFor(() => {
        expect(
          logged().filter((l) => l.msg === 'request refused' || l.msg === 'hash store request refused'),
        ).toHaveLength(2);
      });
      expect(logged().filter((l) => /unavailable|not ready/.test(l.msg) || l.level >= 50)).toEqual([]);
    } finally {
      await kv.close();
      await app.close();
      await t.close();
    }
  });
});
