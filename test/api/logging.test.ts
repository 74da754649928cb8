import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { createLogger, createServices, createWebApp, type Services } from '../../src/main.js';
import type { App } from '../../src/web/types.js';
import { testDialects } from '../support/databases.js';
import type { Db } from '../../src/storage/index.js';

describe('structured logs', () => {
  const lines: string[] = [];
  let app: App;
  let services: Services;
  let db: Db;
  beforeAll(async () => {
    db = await testDialects()[0]!.open();
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines.push(...String(chunk).split('\n').filter(Boolean));
        done();
      },
    });
    const config = loadConfig({
      CERTDESK_LOG_LEVEL: 'trace',
      CERTDESK_CA_KEY_FILE: join(mkdtempSync(join(tmpdir(), 'certdesk-kek-')), 'ca-keys.secret'),
    });
    services = await createServices(config, { db });
    app = await createWebApp(services, createLogger(config, sink));
    await app.ready();
  });
  afterAll(async () => {
    await app.close();
    await db.close();
  });

  it('carry request ids and never a secret', async () => {
    const created = await services.accounts.createCustomer({
      name: 'Log',
      email: 'log@x.example',
      currency: 'EUR',
      creditLimit: 1,
    });
    const secret = created.clientSecret;
    const tokenRes = await app.inject({
      method: 'POST',
      url: '/oauth2/token',
      payload: { grant_type: 'client_credentials', client_id: created.application.clientId, client_secret: secret },
    });
    const { access_token: token, refresh_token: refresh } = tokenRes.json();
    await app.inject({
      method: 'GET',
      url: '/rest/v1/Profile',
      headers: { authorization: `Bearer ${token}`, 'x-request-id': 'trace-me' },
    });
    await app.inject({
      method: 'POST',
      url: '/rest/v1/ValidateName',
      headers: { authorization: `Bearer ${token}` },
      payload: { CommonName: 'www.certdesk-test.com', GeneratePrivateKey: true },
    });
    await app.inject({
      method: 'POST',
      url: '/oauth2/token',
      payload: {
        grant_type: 'client_credentials',
        client_id: created.application.clientId,
        client_secret: 'wrong-secret-value',
      },
    });

    await app.inject({ method: 'GET', url: '/dcv/approve/cda_SecretApprovalToken1234567890' });
    const all = lines.join('\n');
    expect(all).toContain('/dcv/approve/[redacted]');
    expect(lines.length).toBeGreaterThan(5);
    expect(lines.some((l) => JSON.parse(l).requestId === 'trace-me')).toBe(true);
    for (const s of [
      secret,
      token,
      refresh,
      'wrong-secret-value',
      'PRIVATE KEY',
      created.password,
      'SecretApprovalToken',
    ])
      expect(all).not.toContain(s);
  });
});
