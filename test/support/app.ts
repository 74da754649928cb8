import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { loadConfig } from '../../src/config/index.js';
import { FixedClock } from '../../src/core/index.js';
import { createServices, createWebApp, type ServiceOptions, type Services } from '../../src/main.js';
import type { Db } from '../../src/storage/index.js';
import type { App } from '../../src/web/types.js';
import { testCaKeys } from './ca-fixture.js';
import type { TestDialect } from './databases.js';

/** 2026-11-21T00:00:00Z: the fixed "now" of HTTP tests. */
export const TEST_NOW = 1795219200;

export interface TestCustomer {
  readonly customerId: number;
  readonly clientId: string;
  readonly clientSecret: string;
  /** An access token with every scope. */
  readonly token: string;
}

export interface TestContext {
  readonly app: App;
  readonly services: Services;
  readonly clock: FixedClock;
  readonly db: Db;
  /** Registers a customer (ADMIN user, app with every scope) and gets it a token. */
  customer(overrides?: { currency?: string; creditLimit?: number; name?: string }): Promise<TestCustomer>;
  /** A token for the customer's application, narrowed to `scope`. */
  token(customer: Pick<TestCustomer, 'clientId' | 'clientSecret'>, scope?: string): Promise<string>;
  /** POST /oauth2/revoke of `token` by the customer's application (a form body, as clients send it). */
  revoke(customer: Pick<TestCustomer, 'clientId' | 'clientSecret'>, token: string): Promise<LightMyRequestResponse>;
  /** app.inject with the bearer token set. */
  call(token: string | undefined, options: InjectOptions): Promise<LightMyRequestResponse>;
  close(): Promise<void>;
}

/**
 * Builds the full app over a fresh database of the given dialect, with the CA hierarchy of every
 * brand made from the run's shared fixture keys (support/ca-fixture.ts): a test's own
 * `ca.init(…)` finds it complete. close() tears it down.
 */
export async function createTestContext(
  dialect: TestDialect,
  env: Record<string, string> = {},
  options: Pick<ServiceOptions, 'issuer' | 'scanner' | 'logger'> = {},
): Promise<TestContext> {
  const db = await dialect.open();
  const clock = new FixedClock(TEST_NOW);
  // DNS goes to a closed loopback port unless a test runs its own server: lookups fail at once
  // (a transient failure) instead of waiting on the machine's resolvers.
  const config = loadConfig({
    CERTDESK_DATA_DIR: '/nonexistent-test-data',
    CERTDESK_DNS_SERVERS: '127.0.0.1:9',
    CERTDESK_CA_KEY_FILE: join(mkdtempSync(join(tmpdir(), 'certdesk-kek-')), 'ca-keys.secret'),
    ...env,
  });
  const services = await createServices(config, { clock, db, ...options });
  await services.ca.init({ keyPairs: testCaKeys() });
  const app = await createWebApp(services, false);
  await app.ready();

  const token = async (c: Pick<TestCustomer, 'clientId' | 'clientSecret'>, scope?: string): Promise<string> => {
    const res = await app.inject({
      method: 'POST',
      url: '/oauth2/token',
      payload: {
        grant_type: 'client_credentials',
        client_id: c.clientId,
        client_secret: c.clientSecret,
        ...(scope === undefined ? {} : { scope }),
      },
    });
    if (res.statusCode !== 200) throw new Error(`token request failed: ${res.statusCode} ${res.body}`);
    return (res.json() as { access_token: string }).access_token;
  };

  return {
    app,
    services,
    clock,
    db,
    async customer(overrides = {}) {
      const created = await services.accounts.createCustomer({
        name: overrides.name ?? 'Test Customer',
        email: 'ops@customer.example',
        currency: overrides.currency ?? 'EUR',
        creditLimit: overrides.creditLimit ?? 5000,
        country: 'DE',
        locale: 'de_DE',
        timezone: 'Europe/Berlin',
      });
      const c = {
        customerId: created.customer.id,
        clientId: created.application.clientId,
        clientSecret: created.clientSecret,
      };
      return { ...c, token: await token(c) };
    },
    token,
    revoke: (c, revoked) =>
      app.inject({
        method: 'POST',
        url: '/oauth2/revoke',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: new URLSearchParams({
          token: revoked,
          client_id: c.clientId,
          client_secret: c.clientSecret,
        }).toString(),
      }),
    call(bearer, options) {
      const headers = {
        ...(options.headers ?? {}),
        ...(bearer === undefined ? {} : { authorization: `Bearer ${bearer}` }),
      };
      return app.inject({ ...options, headers });
    },
    async close() {
      await app.close();
      // The services' own connections (PostgreSQL's LISTEN), then the database.
      await services.close();
      await db.close();
    },
  };
}
