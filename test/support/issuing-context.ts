// The context of the order lifecycle tests: a real DNS server on loopback holding the DCV proof of
// the test CSR (so DV orders by DNS issue at once), the CA with 2048-bit roots, and a customer.
import { createTestContext, type TestContext, type TestCustomer } from './app.js';
import { testCsr } from './csr.js';
import type { TestDialect } from './databases.js';
import { startDnsServer, type TestDnsServer } from './dns-server.js';

/** The contact every test order names. */
export const ORDER_CONTACT = {
  FirstName: 'Ada',
  LastName: 'Lovelace',
  Phone: '+49 30 1234567',
  Email: 'ada@certdesk-test.com',
};

/** The organization address and contact every OV/EV test order names. */
export const ORG_ADDRESS = {
  AddressLine1: 'Hauptstr. 1',
  PostalCode: '10115',
  City: 'Berlin',
  Region: 'Berlin',
  Country: 'DE',
  Phone: '+49 30 1',
};
export const ORG_CONTACT = {
  ...ORDER_CONTACT,
  Title: 'CTO',
  Fax: '+49 30 2',
  OrganizationName: 'Certdesk Test GmbH',
  OrganizationAddress: ORG_ADDRESS,
};

export interface IssuingContext {
  readonly t: TestContext;
  readonly c: TestCustomer;
  readonly dns: TestDnsServer;
  close(): Promise<void>;
}

export async function issuingContext(dialect: TestDialect, customerName: string): Promise<IssuingContext> {
  const dns = await startDnsServer();
  const t = await createTestContext(dialect, {
    CERTDESK_DNS_SERVERS: dns.address,
    CERTDESK_RATE_LIMIT: '1000000',
    CERTDESK_RATE_LIMIT_ANONYMOUS: '1000000',
  });
  await t.services.ca.init({ rsaRootBits: 2048, rsaIntermediateBits: 2048 });
  const c = await t.customer({ name: customerName, creditLimit: 100000 });
  const value = (
    await t.call(c.token, {
      method: 'POST',
      url: '/rest/v1/DNSData',
      payload: { CSR: testCsr().pem, ProductCode: 'TrustPoint.DV' },
    })
  ).json().DNSAuthDetails.DNSValue as string;
  dns.set('certdesk-test.com', [{ type: 'TXT', data: value }]);
  return {
    t,
    c,
    dns,
    async close() {
      await t.close();
      await dns.close();
    },
  };
}

/** The POST /Order body of a DV order by DNS of the test CSR (issued at once when the proof is in place). */
export function dnsOrderBody(params: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    OrderParameters: {
      ProductCode: 'TrustPoint.DV',
      ValidityPeriod: 12,
      CSR: testCsr().pem,
      DVAuthMethod: 'DNS',
      ...params,
    },
    AdminContact: ORDER_CONTACT,
    TechContact: ORDER_CONTACT,
  };
}
