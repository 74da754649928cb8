// A database made ready for certdesk processes started by a test (`processes.ts`): migrated, the
// CA's hierarchy made from the run's fixture keys, and one customer whose application gets tokens.
import { join } from 'node:path';
import { loadConfig } from '../../src/config/index.js';
import type { CustomerId } from '../../src/core/index.js';
import { createServices, type Services } from '../../src/main.js';
import { testCaKeys } from './ca-fixture.js';
import { testCsr } from './csr.js';
import type { TestDnsServer } from './dns-server.js';

/**
 * The environment the processes of a test deployment share: the database at `databaseUrl`, the
 * CA's key file and data under `dir`, DNS at `dnsAddress`, the hash store on a port of its own,
 * limits that never refuse, and `logLevel`.
 */
export function deploymentEnv(
  dir: string,
  databaseUrl: string,
  dnsAddress: string,
  logLevel = 'error',
): Record<string, string> {
  return {
    CERTDESK_DATABASE_URL: databaseUrl,
    CERTDESK_CA_KEY_FILE: join(dir, 'ca-keys.secret'),
    CERTDESK_DNS_SERVERS: dnsAddress,
    CERTDESK_DATA_DIR: join(dir, 'data'),
    CERTDESK_KV_PORT: '0',
    CERTDESK_RATE_LIMIT: '1000000',
    CERTDESK_RATE_LIMIT_ANONYMOUS: '1000000',
    CERTDESK_LOG_LEVEL: logLevel,
  };
}

export interface PreparedDeployment {
  /** The services over that database, for what the test sets up beyond this; closed by the caller. */
  readonly services: Services;
  readonly customerId: CustomerId;
  /** The customer's application's credentials. */
  readonly clientId: string;
  readonly clientSecret: string;
  /** A new access token of the customer's application, with every scope. */
  token(): Promise<string>;
}

/** Prepares the database that `env` names (as the processes will see it) for a customer called `name`. */
export async function prepareDeployment(env: Record<string, string>, name: string): Promise<PreparedDeployment> {
  const services = await createServices(loadConfig(env));
  try {
    await services.ca.init({ keyPairs: testCaKeys() });
    const created = await services.accounts.createCustomer({
      name,
      email: 'ops@customer.example',
      currency: 'EUR',
      creditLimit: 10_000_000,
      country: 'DE',
      locale: 'de_DE',
      timezone: 'Europe/Berlin',
    });
    const { clientId } = created.application;
    const clientSecret = created.clientSecret;
    return {
      services,
      customerId: created.customer.id,
      clientId,
      clientSecret,
      token: async () =>
        (await services.oauth.token({ grantType: 'client_credentials', clientId, clientSecret }, null)).access_token,
    };
  } catch (e) {
    await services.close();
    throw e;
  }
}

/**
 * The DCV proof of the test CSR, asked of a running API (`base`) and published on `dns` with the
 * name's address: the customer's DV orders by DNS for it are issued at once.
 */
export async function publishDnsProof(base: string, token: string, dns: TestDnsServer): Promise<void> {
  const res = await fetch(`${base}/rest/v1/DNSData`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ ProductCode: 'TrustPoint.DV', CSR: testCsr().pem }),
  });
  if (res.status !== 200) throw new Error(`POST /DNSData answered ${res.status}: ${await res.text()}`);
  const { DNSAuthDetails } = (await res.json()) as { DNSAuthDetails: { DNSValue: string } };
  dns.set('certdesk-test.com', [
    { type: 'A', address: '127.0.0.1' },
    { type: 'TXT', data: DNSAuthDetails.DNSValue },
  ]);
}
