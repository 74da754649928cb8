// End to end with the real scanner: an order issued through the API, its certificate served by
// Debian's nginx on loopback, the configuration scan run by the worker some days later and the
// vulnerability assessment of a WVS order, both reaching that server through the test DNS server.
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorker } from '../../src/main.js';
import type { Worker } from '../../src/jobs/index.js';
import { createTestContext, type TestContext, type TestCustomer } from '../support/app.js';
import { testDialects } from '../support/databases.js';
import { startDnsServer, type TestDnsServer } from '../support/dns-server.js';
import { ORDER_CONTACT, ORG_ADDRESS, ORG_CONTACT } from '../support/issuing-context.js';
import { freePorts } from '../support/ports.js';
import { newKeyAndCsr, requiredBinary, startTlsNginx } from '../support/tls-servers.js';
import type { RunningServer } from '../support/web-servers.js';

const DAY = 86_400;
const NAMES = ['www.certdesk-test.com', 'certdesk-test.com'];
const nginxBinary = requiredBinary('nginx');

describe.skipIf(nginxBinary === undefined)('scans of a real server through the API, on sqlite', () => {
  let t: TestContext;
  let dns: TestDnsServer;
  let c: TestCustomer;
  let worker: Worker;
  let nginx: RunningServer | undefined;
  let csr: { keyPem: string; csrPem: string };
  let tlsPort: number;
  let httpPort: number;

  beforeAll(async () => {
    dns = await startDnsServer();
    [tlsPort, httpPort] = (await freePorts(2)) as [number, number];
    t = await createTestContext(testDialects()[0]!, {
      CERTDESK_DNS_SERVERS: dns.address,
      CERTDESK_VALIDATION_ALLOW_PRIVATE: 'true',
      CERTDESK_SCAN_PORT: String(tlsPort),
      CERTDESK_SCAN_HTTP_PORT: String(httpPort),
      CERTDESK_RATE_LIMIT: '1000000',
      CERTDESK_TOKEN_TTL: '315360000',
      // The scan of a working server ends when it is done; the timeout only bounds a failing one.
      // CI runs other work (browsers, both databases) beside it: a short bound would fail it there.
      CERTDESK_SCAN_TIMEOUT_MS: '60000',
    });
    await t.services.ca.init({ rsaRootBits: 2048, rsaIntermediateBits: 2048 });
    c = await t.customer({ name: 'Live scan', creditLimit: 100000 });
    worker = createWorker(t.services, pino({ level: 'silent' }));
    csr = newKeyAndCsr(NAMES);
    const value = (
      await t.call(c.token, {
        method: 'POST',
        url: '/rest/v1/DNSData',
        payload: { CSR: csr.csrPem, ProductCode: 'TrustPoint.DV' },
      })
    ).json().DNSAuthDetails.DNSValue as string;
    dns.set('certdesk-test.com', [
      { type: 'TXT', data: value },
      { type: 'A', address: '127.0.0.1' },
    ]);
    dns.set('www.certdesk-test.com', [{ type: 'A', address: '127.0.0.1' }]);
  }, 120_000);
  afterAll(async () => {
    await nginx?.stop();
    await t.close();
    await dns.close();
  });

  const runAt = async (seconds: number) => {
    t.clock.set(seconds);
    while ((await worker.runOnce()) > 0);
  };

  it('ok/ConfigurationAssessment rates the served certificate some days after issuance; the WVS report names the findings', async () => {
    const placed = await t.call(c.token, {
      method: 'POST',
      url: '/rest/v1/Order',
      payload: {
        OrderParameters: { ProductCode: 'TrustPoint.DV', ValidityPeriod: 12, CSR: csr.csrPem, DVAuthMethod: 'DNS' },
        AdminContact: ORDER_CONTACT,
        TechContact: ORDER_CONTACT,
      },
    });
    expect(placed.statusCode, placed.body).toBe(200);
    const { ServiceOrderID: id, Fulfillment } = placed.json();
    expect(Fulfillment).toBeDefined();
    nginx = await startTlsNginx(nginxBinary!, [
      {
        port: tlsPort,
        httpPort,
        redirect: true,
        chainPem: `${Fulfillment.Certificate}${Fulfillment.Intermediate}`,
        keyPem: csr.keyPem,
        protocols: 'TLSv1.2 TLSv1.3',
        ciphers: 'ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-CHACHA20-POLY1305',
        preferServerCiphers: true,
        hsts: 'max-age=31536000; includeSubDomains',
      },
    ]);

    const start = t.clock.nowSeconds();
    await runAt(start + 4 * DAY);
    const info = (await t.call(c.token, { method: 'GET', url: `/rest/v1/Order/${id}` })).json().OrderInfo;
    const stored = await t.db.kysely.selectFrom('scan_reports').select('report').where('order_id', '=', id).execute();
    expect(info.ConfigurationAssessment, JSON.stringify(stored).slice(0, 2000)).toMatchObject({
      Ranking: expect.stringMatching(/^A/),
      Engine: expect.stringMatching(/^certdesk-scan/),
    });

    // A WVS order for the same names: its first weekly scan reaches the same server.
    const ov = await t.call(c.token, {
      method: 'POST',
      url: '/rest/v1/Order',
      payload: {
        OrderParameters: {
          ProductCode: 'TrustPoint.OVPro',
          ValidityPeriod: 12,
          CSR: csr.csrPem,
          DVAuthMethod: 'DNS',
          SubjectAltNames: ['certdesk-test.com'],
        },
        AdminContact: ORG_CONTACT,
        TechContact: ORG_CONTACT,
        OrganizationInfo: { OrganizationName: 'Certdesk Test GmbH', OrganizationAddress: ORG_ADDRESS },
      },
    });
    expect(ov.statusCode, ov.body).toBe(200);
    const ovId = ov.json().ServiceOrderID as number;
    const configured = await t.call(c.token, {
      method: 'POST',
      url: '/rest/v1/VulnerabilityAssessment',
      payload: { ServiceOrderID: ovId, ServiceStatus: 'Active', EmailNotificationLevel: 'NEW_REPORT' },
    });
    expect(configured.statusCode, configured.body).toBe(200);
    await runAt(start + 4 * DAY + 60);
    const view = (await t.call(c.token, { method: 'GET', url: `/rest/v1/VulnerabilityAssessment/${ovId}` })).json();
    expect(view.Report.Hosts).toHaveLength(2);
    for (const host of view.Report.Hosts) {
      expect(host).toMatchObject({ Status: 'scanned', Address: '127.0.0.1', Ranking: expect.stringMatching(/^A/) });
      expect(host.Protocols.find((p: { Version: string }) => p.Version === 'TLSv1.3').Offered).toBe(true);
      expect(host.Protocols.find((p: { Version: string }) => p.Version === 'TLSv1.0').Offered).toBe(false);
      expect(host.Certificate).toMatchObject({ MatchesName: true, Trusted: true, ChainComplete: true, Expired: false });
      expect(host.Http).toMatchObject({ RedirectsToHttps: true, Hsts: { maxAge: 31536000, includeSubDomains: true } });
    }
    const mails = await t.services.mailRepo.list({ limit: 10, orderId: ovId });
    expect(mails.map((m) => m.kind)).toEqual(['scan.report']);
    t.clock.set(start);
  });
});
