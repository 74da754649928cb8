import { mkdtempSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config/index.js';
import { FixedClock } from '../src/core/index.js';
import type { Worker } from '../src/jobs/index.js';
import { createLogger, createServices, createWebApp, createWorker, type Services } from '../src/main.js';
import type { Db } from '../src/storage/index.js';
import { buildKvApp, type KvApp } from '../src/web/kv/server.js';
import type { App } from '../src/web/types.js';
import { TEST_NOW } from './support/app.js';
import { testCaKeys } from './support/ca-fixture.js';
import { testCsr } from './support/csr.js';
import { testDialects } from './support/databases.js';
import { startDnsServer, type TestDnsServer } from './support/dns-server.js';
import { logCapture, rawExchange } from './support/raw-http.js';

const contact = { FirstName: 'Ada', LastName: 'Lovelace', Phone: '+49 30 1234567', Email: 'ada@certdesk-test.com' };
const NAME = 'www.certdesk-test.com';

/**
 * Every secret the service hands out or takes in goes through the real app, both listeners and
 * the worker, with the log at trace level and clients misbehaving (secrets in URLs, credentials
 * to the wrong listener); then the whole captured log is searched for each secret's value.
 */
describe.each(testDialects())('no secret reaches the log, on $dialect', (dialect) => {
  const { lines, sink } = logCapture();
  const secrets = new Map<string, string>();
  let db: Db;
  let services: Services;
  let app: App;
  let kv: KvApp;
  let appPort: number;
  let kvPort: number;
  let dns: TestDnsServer;
  let worker: Worker;

  beforeAll(async () => {
    db = await dialect.open();
    dns = await startDnsServer();
    for (const name of ['certdesk-test.com', NAME]) dns.set(name, [{ type: 'A', address: '127.0.0.1' }]);
    const config = loadConfig({
      CERTDESK_LOG_LEVEL: 'trace',
      CERTDESK_DATA_DIR: '/nonexistent-test-data',
      CERTDESK_DNS_SERVERS: dns.address,
      CERTDESK_PUBLIC_URL: 'https://certdesk.example',
      CERTDESK_RATE_LIMIT: '1000000',
      CERTDESK_RATE_LIMIT_ANONYMOUS: '1000000',
      CERTDESK_CA_KEY_FILE: join(mkdtempSync(join(tmpdir(), 'certdesk-kek-')), 'ca-keys.secret'),
    });
    const logger = createLogger(config, sink);
    services = await createServices(config, { db, clock: new FixedClock(TEST_NOW), logger });
    await services.ca.init({ keyPairs: testCaKeys() });
    app = await createWebApp(services, logger);
    await app.listen({ host: '127.0.0.1', port: 0 });
    appPort = (app.server.address() as AddressInfo).port;
    // As main.ts builds it: the kv listener gets a child of the same logger.
    kv = await buildKvApp({ hashStore: services.hashStore, logger: logger.child({ listener: 'kv' }) });
    await kv.listen({ host: '127.0.0.1', port: 0 });
    kvPort = (kv.server.address() as AddressInfo).port;
    worker = createWorker(services, logger);
  }, 120_000);
  afterAll(async () => {
    await app?.close();
    await kv?.close();
    await dns?.close();
    await db?.close();
  });

  const api = (method: string, url: string, headers: Record<string, string> = {}, body?: unknown) =>
    fetch(`http://127.0.0.1:${appPort}${url}`, {
      method,
      headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
    });
  const keep = (what: string, value: string | undefined) => {
    expect(value, what).toBeTruthy();
    secrets.set(what, value!);
    return value!;
  };

  it('after a scenario through tokens, orders, approval links, keys and the hash store', async () => {
    // Step 1: a customer: the admin user's password and the application's client secret.
    const created = await services.accounts.createCustomer({
      name: 'Logs',
      email: 'ops@certdesk-test.com',
      currency: 'EUR',
      creditLimit: 100000,
    });
    const clientId = created.application.clientId;
    const clientSecret = keep('client secret', created.clientSecret);
    keep('password', created.password);

    // Step 2: tokens (form body, HTTP Basic), a refresh, and credentials in the URL (refused, RFC 6749 §2.3.1).
    const form = await api(
      'POST',
      '/oauth2/token',
      { 'content-type': 'application/x-www-form-urlencoded' },
      `grant_type=client_credentials&client_id=${clientId}&client_secret=${encodeURIComponent(clientSecret)}`,
    );
    expect(form.status).toBe(200);
    const first = (await form.json()) as { access_token: string; refresh_token: string };
    keep('access token', first.access_token);
    keep('refresh token', first.refresh_token);
    const basic = await api(
      'POST',
      '/oauth2/token',
      { authorization: `Basic ${Buffer.from(`${clientId}:${clientSecret}`).toString('base64')}` },
      { grant_type: 'client_credentials' },
    );
    keep('access token (Basic)', ((await basic.json()) as { access_token: string }).access_token);
    const refreshed = await api(
      'POST',
      '/oauth2/token',
      {},
      {
        grant_type: 'refresh_token',
        refresh_token: first.refresh_token,
        client_id: clientId,
        client_secret: clientSecret,
      },
    );
    expect(refreshed.status).toBe(200);
    const second = (await refreshed.json()) as { access_token: string; refresh_token: string };
    const token = keep('refreshed access token', second.access_token);
    keep('refreshed refresh token', second.refresh_token);
    const inQuery = await api(
      'POST',
      `/oauth2/token?grant_type=client_credentials&client_id=${clientId}&client_secret=${encodeURIComponent(clientSecret)}`,
      {},
      {},
    );
    expect(inQuery.status).toBe(400);
    expect(await inQuery.json()).toMatchObject({
      error: 'invalid_request',
      error_description: expect.stringContaining('client_secret'),
    });
    // Refused before authentication: valid credentials in the body do not get a token either.
    const mixed = await api(
      'POST',
      `/oauth2/token?client_secret=${encodeURIComponent(clientSecret)}`,
      {},
      { grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret },
    );
    expect(mixed.status).toBe(400);
    expect(await mixed.json()).not.toHaveProperty('access_token');
    expect(
      (
        await api(
          'POST',
          `/oauth2/token?refresh_token=${second.refresh_token}`,
          {},
          { grant_type: 'refresh_token', client_id: clientId, client_secret: clientSecret },
        )
      ).status,
    ).toBe(400);
    // A broken JSON body holding the secret: refused, and the parser's message (which quotes the text) is not logged.
    expect((await api('POST', '/oauth2/token', {}, `{"client_secret":"${clientSecret}",`)).status).toBe(400);

    // Step 3: API calls with the token in the header (and a cookie), and secrets in query strings on purpose.
    const auth = { authorization: `Bearer ${token}` };
    expect(
      (
        await api('GET', '/rest/v1/Profile', {
          ...auth,
          cookie: `session=${clientSecret}`,
          'x-request-id': 'log-secrets',
        })
      ).status,
    ).toBe(200);
    await api('GET', `/rest/v1/Profile?access_token=${token}`);
    await api(
      'GET',
      `/rest/v1/Limit?password=${encodeURIComponent(created.password)}&note=${second.refresh_token}`,
      auth,
    );
    // Credentials in a request Node's strict parser refuses (bare LF): it logs the parse error, never the bytes.
    const bareLf = await rawExchange(appPort, {
      head: `GET /rest/v1/Profile HTTP/1.1\nHost: x\nAuthorization: Bearer ${token}\n\n`,
      giveUpMs: 10_000,
    });
    expect(bareLf.status).toBe(400);

    // Step 4: a generated private key, returned once.
    const generated = await api('POST', '/rest/v1/ValidateName', auth, { CommonName: NAME, GeneratePrivateKey: true });
    const privateKey = ((await generated.json()) as { PrivateKey: string }).PrivateKey;
    keep('private key body', /-----\n([A-Za-z0-9+/]{40})/.exec(privateKey)?.[1]);

    // Step 5: an order validated by DNS and issued by the worker.
    const placed = await api('POST', '/rest/v1/Order', auth, {
      OrderParameters: { ProductCode: 'TrustPoint.DV', ValidityPeriod: 12, CSR: testCsr().pem, DVAuthMethod: 'DNS' },
      AdminContact: contact,
      TechContact: contact,
    });
    expect(placed.status).toBe(200);
    const order = (await placed.json()) as {
      ServiceOrderID: number;
      OrderParameters: { DNSAuthDetails: { DNSValue: string } };
    };
    dns.set('certdesk-test.com', [
      { type: 'A', address: '127.0.0.1' },
      { type: 'TXT', data: order.OrderParameters.DNSAuthDetails.DNSValue },
    ]);
    for (let i = 0; i < 5 && (await worker.runOnce()) > 0; i++);
    const issued = (await (
      await api('GET', `/rest/v1/Order/${order.ServiceOrderID}?includeFulfillment=true`, auth)
    ).json()) as { OrderInfo: { OrderStatus: { MajorStatus: string } } };
    expect(issued.OrderInfo.OrderStatus.MajorStatus).toBe('COMPLETE');
    dns.set('certdesk-test.com', [{ type: 'A', address: '127.0.0.1' }]);

    // Step 6: an order validated by EMAIL: the approval link, shown, approved, and pasted in odd ways.
    const emailOrder = await api('POST', '/rest/v1/Order', auth, {
      OrderParameters: {
        ProductCode: 'TrustPoint.DV',
        ValidityPeriod: 12,
        CSR: testCsr().pem,
        DVAuthMethod: 'EMAIL',
        ApproverEmail: 'hostmaster@certdesk-test.com',
      },
      AdminContact: contact,
      TechContact: contact,
    });
    expect(emailOrder.status).toBe(200);
    const emailId = ((await emailOrder.json()) as { ServiceOrderID: number }).ServiceOrderID;
    for (let i = 0; i < 5 && (await worker.runOnce()) > 0; i++);
    const mails = await services.mailRepo.list({ limit: 10, orderId: emailId });
    const link = keep(
      'approval token',
      mails.map((m) => /\/dcv\/approve\/(cda_[A-Za-z0-9_-]+)/.exec(m.text)?.[1]).find(Boolean),
    );
    expect((await api('GET', `/dcv/approve/${link}`)).status).toBe(200);
    expect((await api('GET', `/dcv/%61pprove/${link}?token=${link}`)).status).toBe(200);
    expect((await api('POST', `/dcv/approve/${link}`)).status).toBe(200);

    // Step 7: the hash store: a key in the header works; in the query it is refused and not used.
    const kvKey = keep('hash store key', (await services.hashStore.createKey(created.customer.id)).key);
    const kvUrl = `http://127.0.0.1:${kvPort}/${NAME}`;
    const filed = await fetch(kvUrl, {
      method: 'POST',
      headers: { 'x-api-key': kvKey, 'content-type': 'application/json' },
      body: JSON.stringify({ hash: 'abc123' }),
    });
    expect(filed.status).toBe(200);
    expect(await (await fetch(kvUrl, { headers: { 'x-api-key': kvKey } })).text()).toBe('abc123\n');
    for (const query of [`key=${kvKey}`, `api_key=${kvKey}`, `x-api-key=${kvKey}`, `apikey=${kvKey}`, kvKey]) {
      const refused = await fetch(`${kvUrl}?${query}`, { headers: { 'x-api-key': kvKey } });
      expect(refused.status, query).toBe(400);
      expect(((await refused.json()) as { message: string }).message).toMatch(/x-api-key header only/);
    }
    // A broken chunked body after the key: Node's parser error carries the raw bytes (rawPacket).
    const broken = await rawExchange(kvPort, {
      head: `POST /${NAME} HTTP/1.1\r\nHost: x\r\nx-api-key: ${kvKey}\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n`,
      giveUpMs: 10_000,
    });
    expect(broken.closedAfterMs).toBeGreaterThan(0);

    // Step 8: a token revoked with the client's credentials.
    expect(
      (
        await api(
          'POST',
          '/oauth2/revoke',
          {},
          { token: second.refresh_token, client_id: clientId, client_secret: clientSecret },
        )
      ).status,
    ).toBe(200);

    // The log: it was captured (the test cannot pass on an empty log), covers both listeners and
    // the worker, shows where secrets were, and holds none of their values.
    const all = lines.join('\n');
    const entries = lines.map(
      (l) =>
        JSON.parse(l) as {
          listener?: string;
          msg?: string;
          req?: { url?: string };
          requestId?: string;
          component?: string;
        },
    );
    expect(entries.length).toBeGreaterThan(50);
    expect(entries.filter((e) => e.msg === 'incoming request').length).toBeGreaterThan(20);
    expect(entries.some((e) => e.listener === 'kv' && e.msg === 'incoming request')).toBe(true);
    expect(entries.some((e) => e.component === 'worker')).toBe(true);
    expect(entries.some((e) => e.requestId === 'log-secrets')).toBe(true);
    const urls = entries.map((e) => e.req?.url).filter((u): u is string => u !== undefined);
    expect(urls).toContain(
      `/oauth2/token?grant_type=client_credentials&client_id=${clientId}&client_secret=[redacted]`,
    );
    expect(urls).toContain('/dcv/approve/[redacted]');
    expect(urls).toContain(`/${NAME}?key=[redacted]`);
    for (const [what, value] of secrets) expect(all.includes(value), `${what} in the log`).toBe(false);
    expect(all).not.toContain('PRIVATE KEY');
    expect(all).not.toContain('rawPacket');
  }, 120_000);
});
