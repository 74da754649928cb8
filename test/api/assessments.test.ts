// The vulnerability assessment and the configuration scan (spec §4.22–4.23, §2.11; DESIGN §5.8):
// configured per WVS order, run weekly by the worker at the order's slot and on demand at most once
// an hour, reports stored and mailed per level, ConfigurationAssessment shown some days after
// issuance. The scanner is replaced by a fake here (our own seam, `Scanner`); the scanner itself is
// tested against real servers in test/scan.
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorker } from '../../src/main.js';
import type { Worker } from '../../src/jobs/index.js';
import { nextSlot, scannedNames, type Scanner } from '../../src/ra/scans/assessments.js';
import { orderId } from '../../src/core/index.js';
import type { Finding, Grade, HostReport } from '../../src/scan/index.js';
import { createTestContext, type TestContext, type TestCustomer } from '../support/app.js';
import { testCsr } from '../support/csr.js';
import { testDialects } from '../support/databases.js';
import { startDnsServer, type TestDnsServer } from '../support/dns-server.js';
import { ORDER_CONTACT, ORG_ADDRESS, ORG_CONTACT, dnsOrderBody } from '../support/issuing-context.js';

const DAY = 86_400;

/** What the fake scanner answers next, per name. */
const answers = new Map<string, { grade: Grade; findings: Finding[] } | 'down'>();
const scanned: string[] = [];
const fakeScanner: Scanner = async (target) => {
  scanned.push(target.name);
  const answer = answers.get(target.name) ?? { grade: 'A', findings: [] };
  const base = { name: target.name, port: 443, startedAt: 0, durationMs: 12 };
  if (answer === 'down') return { ...base, status: 'could-not-scan', address: null, problem: 'no answer within 5 s' };
  return {
    ...base,
    status: 'scanned',
    address: '192.0.2.10',
    protocols: [{ version: 'TLSv1.3', offered: true, suites: [], serverPreference: null }],
    certificate: null,
    http: { redirectsToHttps: true, hsts: null, headers: {} },
    handshake: { secureRenegotiation: true, compression: false, fallbackScsv: true },
    findings: answer.findings,
    rating: { grade: answer.grade, protocolScore: 100, keyExchangeScore: 90, cipherScore: 90, score: 93, caps: [] },
  } satisfies HostReport;
};

describe.each(testDialects())('vulnerability and configuration assessment on $dialect', (dialect) => {
  let t: TestContext;
  let dns: TestDnsServer;
  let a: TestCustomer;
  let b: TestCustomer;
  let worker: Worker;
  beforeAll(async () => {
    dns = await startDnsServer();
    t = await createTestContext(
      dialect,
      {
        CERTDESK_DNS_SERVERS: dns.address,
        CERTDESK_RATE_LIMIT: '1000000',
        CERTDESK_SCAN_DELAY_DAYS: '4',
        // The clock moves weeks ahead here: tokens must outlive that.
        CERTDESK_TOKEN_TTL: '315360000',
      },
      { scanner: fakeScanner },
    );
    a = await t.customer({ name: 'Scanned', creditLimit: 100000 });
    b = await t.customer({ name: 'Other', creditLimit: 100000 });
    worker = createWorker(t.services, pino({ level: 'silent' }));
  });
  afterAll(async () => {
    await t.close();
    await dns.close();
  });

  const call = (token: string, method: 'GET' | 'POST', url: string, payload?: unknown) =>
    t.call(token, { method, url: `/rest/v1${url}`, ...(payload === undefined ? {} : { payload: payload as object }) });
  /** A pending OV Pro order (feature WVS) of `c`. */
  const wvsOrder = async (c: TestCustomer) => {
    const res = await call(c.token, 'POST', '/Order', {
      OrderParameters: {
        ProductCode: 'TrustPoint.OVPro',
        ValidityPeriod: 12,
        CSR: testCsr().pem,
        DVAuthMethod: 'DNS',
        SubjectAltNames: ['certdesk-test.com'],
      },
      AdminContact: ORG_CONTACT,
      TechContact: ORG_CONTACT,
      OrganizationInfo: { OrganizationName: 'Certdesk Test GmbH', OrganizationAddress: ORG_ADDRESS },
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json().ServiceOrderID as number;
  };
  const configure = (token: string, body: Record<string, unknown>, path = '/VulnerabilityAssessment') =>
    call(token, 'POST', path, body);
  const active = (id: number, level = 'NEW_REPORT') => ({
    ServiceOrderID: id,
    ServiceStatus: 'Active',
    EmailNotificationLevel: level,
  });
  const mails = async (id: number) =>
    (await t.services.mailRepo.list({ limit: 100, orderId: orderId(id) })).filter((m) => m.kind.startsWith('scan.'));
  const reports = async (id: number) => (await call(a.token, 'GET', `/VulnerabilityAssessment/${id}`)).json();
  /** Moves the clock and runs every job due by then. */
  const runAt = async (seconds: number) => {
    t.clock.set(seconds);
    while ((await worker.runOnce()) > 0);
  };

  describe('POST /VulnerabilityAssessment', () => {
    it('ok/Active scans at once and reports; the misspelt path of the original clients works too', async () => {
      const id = await wvsOrder(a);
      const res = await configure(a.token, active(id));
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toEqual({ success: true, Message: expect.stringContaining('active') });
      await runAt(t.clock.nowSeconds());
      const view = await reports(id);
      expect(view).toMatchObject({
        success: true,
        VulnerabilityAssessment: { ServiceStatus: 'Active', EmailNotificationLevel: 'NEW_REPORT' },
        Report: { Ranking: 'A', Engine: expect.stringMatching(/^certdesk-scan/), CriteriaVersion: expect.any(String) },
        History: [{ Ranking: 'A', CriticalFindings: 0 }],
      });
      expect(view.Report.Hosts.map((h: { Name: string }) => h.Name).sort()).toEqual([
        'certdesk-test.com',
        'www.certdesk-test.com',
      ]);
      const alias = await configure(a.token, { ...active(id), ServiceStatus: 'inactive' }, '/VulnerabiltyAssessment');
      expect(alias.statusCode, alias.body).toBe(200);
      expect((await reports(id)).VulnerabilityAssessment.ServiceStatus).toBe('Inactive');
    });

    it('fail/a product without WVS, an unknown order, a closed order: a clear error, nothing configured', async () => {
      const dv = (await call(a.token, 'POST', '/Order', dnsOrderBody())).json().ServiceOrderID as number;
      const res = await configure(a.token, active(dv));
      expect(res.statusCode).toBe(417);
      expect(res.json()).toMatchObject({ ErrorField: 'ServiceOrderID', Message: expect.stringMatching(/WVS/) });
      const unknown = await configure(a.token, active(999_999));
      expect(unknown.statusCode).toBe(404);
      expect(unknown.json().ErrorId).toBe(-2011);
      const closed = await wvsOrder(a);
      expect((await call(a.token, 'POST', `/Order/${closed}`, undefined)).statusCode).toBeGreaterThanOrEqual(400);
      expect((await t.call(a.token, { method: 'DELETE', url: `/rest/v1/Order/${closed}` })).statusCode).toBe(200);
      const refused = await configure(a.token, active(closed));
      expect(refused.statusCode).toBe(409);
      expect((await reports(closed)).VulnerabilityAssessment.ServiceStatus).toBe('Inactive');
    });

    it('bad-input/missing or unknown members: 417 naming each field', async () => {
      const res = await configure(a.token, {
        ServiceOrderID: 'abc',
        ServiceStatus: 'On',
        EmailNotificationLevel: 'ALL',
      });
      expect(res.statusCode).toBe(417);
      expect(res.json().Errors.map((e: { ErrorField: string }) => e.ErrorField)).toEqual([
        'ServiceOrderID',
        'ServiceStatus',
        'EmailNotificationLevel',
      ]);
      expect((await configure(a.token, {})).statusCode).toBe(417);
      expect((await configure(a.token, { ServiceOrderID: { id: 1 } })).statusCode).toBe(417);
    });

    it("cross-customer/B can neither configure, rescan nor read A's assessment", async () => {
      const id = await wvsOrder(a);
      expect((await configure(a.token, active(id, 'NONE'))).statusCode).toBe(200);
      for (const res of [
        await configure(b.token, active(id)),
        await call(b.token, 'GET', `/VulnerabilityAssessmentRescan/${id}`),
        await call(b.token, 'GET', `/VulnerabilityAssessment/${id}`),
      ]) {
        expect(res.statusCode).toBe(404);
        expect(res.json().ErrorId).toBe(-2011);
      }
      expect((await reports(id)).VulnerabilityAssessment.EmailNotificationLevel).toBe('NONE');
    });

    it('fail/a token without the order scope is refused', async () => {
      const id = await wvsOrder(a);
      const readOnly = await t.token(a, 'read');
      expect((await configure(readOnly, active(id))).statusCode).toBe(403);
      expect((await call(readOnly, 'GET', `/VulnerabilityAssessmentRescan/${id}`)).statusCode).toBe(403);
      expect((await call(readOnly, 'GET', `/VulnerabilityAssessment/${id}`)).statusCode).toBe(200);
    });
  });

  describe('the weekly schedule', () => {
    it("ok/weekly at the order's slot of the week while Active; switched off, the chain ends", async () => {
      const id = await wvsOrder(a);
      const start = t.clock.nowSeconds();
      expect((await configure(a.token, active(id, 'NONE'))).statusCode).toBe(200);
      await runAt(start);
      const slot = nextSlot(orderId(id), start);
      expect(slot - start).toBeGreaterThan(DAY);
      expect(slot - start).toBeLessThanOrEqual(8 * DAY);
      await runAt(slot - 1);
      expect((await reports(id)).History).toHaveLength(1);
      await runAt(slot);
      expect((await reports(id)).History).toHaveLength(2);
      await runAt(slot + 7 * DAY);
      expect((await reports(id)).History).toHaveLength(3);
      expect((await configure(a.token, { ...active(id, 'NONE'), ServiceStatus: 'Inactive' })).statusCode).toBe(200);
      await runAt(slot + 14 * DAY);
      await runAt(slot + 21 * DAY);
      expect((await reports(id)).History).toHaveLength(3);
      t.clock.set(start);
    });

    it('ok/slots spread the orders over the week', () => {
      const now = 1_800_000_000;
      const slots = Array.from({ length: 700 }, (_, i) => (nextSlot(orderId(i + 1), now) - now) % (7 * DAY));
      const perDay = new Array(7).fill(0);
      for (const s of slots) perDay[Math.floor(s / DAY)]++;
      for (const n of perDay) expect(n).toBeGreaterThan(50);
      expect(scannedNames({ commonName: '*.example.com', sanNames: ['example.com', 'www.example.com'] })).toEqual([
        'example.com',
        'www.example.com',
      ]);
    });
  });

  describe('GET /VulnerabilityAssessmentRescan/{id}', () => {
    it('ok/scans now, once an hour; a second within the hour is refused with Retry-After; the misspelt path works', async () => {
      const id = await wvsOrder(a);
      const start = t.clock.nowSeconds();
      expect((await configure(a.token, active(id, 'NONE'))).statusCode).toBe(200);
      await runAt(start);
      const first = await call(a.token, 'GET', `/VulnerabilityAssessmentRescan/${id}`);
      expect(first.statusCode, first.body).toBe(200);
      await runAt(start + 10);
      expect((await reports(id)).History).toHaveLength(2);
      const again = await call(a.token, 'GET', `/VulnerabiltyAssessmentRescan/${id}`);
      expect(again.statusCode).toBe(429);
      expect(Number(again.headers['retry-after'])).toBe(3590);
      expect(again.json().Message).toMatch(/less than an hour/);
      await runAt(start + 3600);
      expect((await call(a.token, 'GET', `/VulnerabiltyAssessmentRescan/${id}`)).statusCode).toBe(200);
      t.clock.set(start);
    });

    it('ok/ten rescans at once queue one scan', async () => {
      const id = await wvsOrder(a);
      const start = t.clock.nowSeconds();
      expect((await configure(a.token, active(id, 'NONE'))).statusCode).toBe(200);
      await runAt(start);
      const results = await Promise.all(
        Array.from({ length: 10 }, () => call(a.token, 'GET', `/VulnerabilityAssessmentRescan/${id}`)),
      );
      expect(results.filter((r) => r.statusCode === 200)).toHaveLength(1);
      expect(results.filter((r) => r.statusCode === 429)).toHaveLength(9);
      await runAt(start + 5);
      expect((await reports(id)).History).toHaveLength(2);
      t.clock.set(start);
    });

    it('fail/an order without an assessment, a non-WVS order, a bad id', async () => {
      const id = await wvsOrder(a);
      expect((await call(a.token, 'GET', `/VulnerabilityAssessmentRescan/${id}`)).statusCode).toBe(409);
      const dv = (await call(a.token, 'POST', '/Order', dnsOrderBody())).json().ServiceOrderID;
      expect((await call(a.token, 'GET', `/VulnerabilityAssessmentRescan/${dv}`)).statusCode).toBe(417);
      expect((await call(a.token, 'GET', '/VulnerabilityAssessmentRescan/abc')).statusCode).toBe(417);
    });
  });

  describe('mails', () => {
    it('ok/NEW_REPORT mails every report; CRITICAL only when a new critical finding appears; NONE never', async () => {
      const critical: Finding = { id: 'cert.expired', severity: 'critical', title: 'The certificate has expired' };
      const levels = { NEW_REPORT: await wvsOrder(a), CRITICAL: await wvsOrder(a), NONE: await wvsOrder(a) };
      const start = t.clock.nowSeconds();
      for (const [level, id] of Object.entries(levels))
        expect((await configure(a.token, active(id, level))).statusCode).toBe(200);
      await runAt(start);
      // A critical finding appears on one name.
      answers.set('www.certdesk-test.com', { grade: 'F', findings: [critical] });
      let at = start;
      for (const id of Object.values(levels)) {
        at += 3601;
        await runAt(at);
        expect((await call(a.token, 'GET', `/VulnerabilityAssessmentRescan/${id}`)).statusCode).toBe(200);
      }
      await runAt(at + 1);
      // And stays: no new critical finding.
      for (const id of Object.values(levels)) {
        at += 3601;
        await runAt(at);
        expect((await call(a.token, 'GET', `/VulnerabilityAssessmentRescan/${id}`)).statusCode).toBe(200);
      }
      await runAt(at + 1);
      answers.clear();
      expect((await mails(levels.NEW_REPORT)).map((m) => m.kind)).toEqual([
        'scan.report',
        'scan.report',
        'scan.report',
      ]);
      const crit = await mails(levels.CRITICAL);
      expect(crit.map((m) => m.kind)).toEqual(['scan.critical']);
      expect(crit[0]!.text).toContain('www.certdesk-test.com: cert.expired');
      expect(crit[0]!.to).toBe(ORDER_CONTACT.Email);
      expect(await mails(levels.NONE)).toEqual([]);
      expect((await reports(levels.CRITICAL)).Report).toMatchObject({
        Ranking: 'F',
        CriticalFindings: ['www.certdesk-test.com: cert.expired'],
      });
      t.clock.set(start);
    });
  });

  describe('ConfigurationAssessment', () => {
    it('ok/absent until the scan some days after issuance, then in OrderInfo; a name that cannot be scanned is N/A', async () => {
      const value = (
        await call(a.token, 'POST', '/DNSData', { CSR: testCsr().pem, ProductCode: 'TrustPoint.DV' })
      ).json().DNSAuthDetails.DNSValue;
      dns.set('certdesk-test.com', [{ type: 'TXT', data: value }]);
      const placed = (await call(a.token, 'POST', '/Order', dnsOrderBody())).json();
      expect(placed.Fulfillment).toBeDefined();
      const id = placed.ServiceOrderID as number;
      const start = t.clock.nowSeconds();
      const info = async () => (await call(a.token, 'GET', `/Order/${id}`)).json().OrderInfo;
      await runAt(start + 4 * DAY - 1);
      expect(await info()).not.toHaveProperty('ConfigurationAssessment');
      answers.set('certdesk-test.com', { grade: 'B', findings: [] });
      await runAt(start + 4 * DAY);
      answers.clear();
      expect((await info()).ConfigurationAssessment).toEqual({
        CriteriaVersion: expect.any(String),
        Effective: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/),
        Engine: expect.stringMatching(/^certdesk-scan/),
        Ranking: 'B',
      });
      // In the lists too.
      const listed = (await call(a.token, 'GET', '/Orders?ItemsPerPage=1000'))
        .json()
        .OrderInfos.find((o: { ServiceOrderID: number }) => o.ServiceOrderID === id);
      expect(listed.ConfigurationAssessment.Ranking).toBe('B');
      // A reissue schedules the next one.
      const reissued = await call(a.token, 'POST', '/Reissue', {
        ServiceOrderID: id,
        OrderParameters: { CSR: testCsr().pem, DVAuthMethod: 'DNS' },
      });
      expect(reissued.statusCode, reissued.body).toBe(200);
      await runAt(start + 4 * DAY + 10);
      answers.set('certdesk-test.com', 'down');
      answers.set('www.certdesk-test.com', 'down');
      await runAt(start + 8 * DAY + 10);
      answers.clear();
      expect((await info()).ConfigurationAssessment.Ranking).toBe('N/A');
      t.clock.set(start);
    });
  });
});
