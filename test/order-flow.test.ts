import { spawnSync } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { mkdtempSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorker } from '../src/main.js';
import type { Worker } from '../src/jobs/index.js';
import { createTestContext, type TestContext, type TestCustomer } from './support/app.js';
import { testDialects } from './support/databases.js';
import { testCsr } from './support/csr.js';
import { verifyChain } from './support/openssl-checks.js';
import { startDnsServer, type TestDnsServer } from './support/dns-server.js';
import { startSmtpServer } from './support/smtp-server.js';

const contact = { FirstName: 'Ada', LastName: 'Lovelace', Phone: '+49 30 1234567', Email: 'ada@certdesk-test.com' };
const orgContact = {
  ...contact,
  OrganizationName: 'Certdesk Test GmbH',
  OrganizationAddress: {
    AddressLine1: 'Hauptstr. 1',
    PostalCode: '10115',
    City: 'Berlin',
    Region: 'Berlin',
    Country: 'DE',
  },
};
const dir = mkdtempSync(join(tmpdir(), 'order-flow-'));

/** openssl verify of a delivered certificate against the chain's root, as of `asOf`. */
const verify = (certificate: string, intermediate: string, root: string, asOf: number): string =>
  verifyChain({ certificate, intermediate }, root, asOf);

describe.each(testDialects())('the order flow on $dialect (real DNS and HTTP on loopback)', (dialect) => {
  let t: TestContext;
  let c: TestCustomer;
  let dns: TestDnsServer;
  let web: Server;
  const files = new Map<string, string>();
  let worker: Worker;
  let smtp: Awaited<ReturnType<typeof startSmtpServer>>;

  beforeAll(async () => {
    dns = await startDnsServer();
    smtp = await startSmtpServer();
    web = createServer((req, res) => {
      const body = files.get(`${String(req.headers.host).split(':')[0]}${req.url ?? ''}`);
      if (body?.startsWith('REDIRECT ') === true) return void res.writeHead(301, { location: body.slice(9) }).end();
      res.writeHead(body === undefined ? 404 : 200, { 'content-type': 'text/plain' }).end(body ?? 'not found');
    });
    await new Promise<void>((r) => web.listen(0, '127.0.0.1', r));
    t = await createTestContext(dialect, {
      CERTDESK_DNS_SERVERS: dns.address,
      CERTDESK_VALIDATION_ALLOW_PRIVATE: 'true',
      CERTDESK_VALIDATION_HTTP_PORT: String((web.address() as AddressInfo).port),
      CERTDESK_RATE_LIMIT: '1000000',
      CERTDESK_SMTP_URL: smtp.url,
      CERTDESK_PUBLIC_URL: 'https://certdesk.example',
    });
    await t.services.ca.init({ rsaRootBits: 2048, rsaIntermediateBits: 2048 });
    c = await t.customer({ name: 'Flow', creditLimit: 100000 });
    worker = createWorker(t.services, pino({ level: 'silent' }));
    for (const name of ['certdesk-test.com', 'www.certdesk-test.com'])
      dns.set(name, [{ type: 'A', address: '127.0.0.1' }]);
  }, 120_000);
  afterAll(async () => {
    await t.close();
    await dns.close();
    await smtp.close();
    web.close();
  });

  const order = async (params: Record<string, unknown>, extra: Record<string, unknown> = {}) => {
    const res = await t.call(c.token, {
      method: 'POST',
      url: '/rest/v1/Order',
      payload: {
        OrderParameters: { ProductCode: 'TrustPoint.DV', ValidityPeriod: 12, CSR: testCsr().pem, ...params },
        AdminContact: contact,
        TechContact: contact,
        ...extra,
      },
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as {
      ServiceOrderID: number;
      OrderParameters: Record<
        string,
        { DNSValue?: string; FileContents?: string; FileName?: string; DNSEntry?: string; FQDNs?: string[] }
      >;
    };
  };
  const info = async (id: number) =>
    (
      await t.call(c.token, {
        method: 'GET',
        url: `/rest/v1/Order/${id}?includeFulfillment=true&includeDCVStatus=true&includeBillingDetails=true`,
      })
    ).json().OrderInfo;
  const used = async () =>
    (await t.call(c.token, { method: 'GET', url: '/rest/v1/Limit' })).json().LimitInfo.Used as number;
  /** Runs every due job (the worker's own poll, once). */
  const work = async () => {
    for (let i = 0; i < 5 && (await worker.runOnce()) > 0; i++);
  };

  it('ok/DV by DNS (TXT, token style): pending until the record exists, then issued; openssl verifies the Fulfillment', async () => {
    const placed = await order({ DVAuthMethod: 'DNS' });
    await work();
    let o = await info(placed.ServiceOrderID);
    expect(o.OrderStatus).toMatchObject({ MajorStatus: 'PENDING', MinorStatus: 'WF_DNS_AUTH', Progress: 25 });
    expect(o).not.toHaveProperty('Fulfillment');
    expect(o.DCVStatus[0]).toMatchObject({
      Status: 'PENDING',
      Problem: expect.stringMatching(/TXT|no record|not found/i),
    });

    dns.set('certdesk-test.com', [
      { type: 'A', address: '127.0.0.1' },
      { type: 'TXT', data: placed.OrderParameters.DNSAuthDetails!.DNSValue! },
    ]);
    t.clock.set(t.clock.nowSeconds() + 60);
    await work();
    o = await info(placed.ServiceOrderID);
    expect(o.OrderStatus).toMatchObject({
      MajorStatus: 'COMPLETE',
      MinorStatus: 'COMPLETED',
      Progress: 100,
      StartDate: expect.any(String),
      EndDate: expect.any(String),
    });
    expect(o.BillingInfo.Status).toBe('cleared');
    const chain = t.services.ca.chain('TrustPoint', 'SHA256-FULL-CHAIN');
    expect(verify(o.Fulfillment.Certificate, o.Fulfillment.Intermediate, chain.root, t.clock.nowSeconds())).toContain(
      ': OK',
    );
    expect(o.Fulfillment.Certificate_PKCS7).toMatch(/^-----BEGIN PKCS7-----/);
    const certs = await t.db.kysely
      .selectFrom('certificates')
      .select('serial')
      .where('order_id', '=', placed.ServiceOrderID)
      .execute();
    expect(certs).toHaveLength(1);
    // Running the job again changes nothing: still one certificate.
    await t.services.orderFlow.validate({ orderId: placed.ServiceOrderID }, { id: 0 as never });
    expect(
      await t.db.kysely
        .selectFrom('certificates')
        .select('serial')
        .where('order_id', '=', placed.ServiceOrderID)
        .execute(),
    ).toHaveLength(1);
    dns.set('certdesk-test.com', [{ type: 'A', address: '127.0.0.1' }]);
  });

  it('ok/DV by FILE (token style) over HTTP on the validation port', async () => {
    const placed = await order({ DVAuthMethod: 'FILE' });
    const f = placed.OrderParameters.FileAuthDetails!;
    for (const host of ['www.certdesk-test.com', 'certdesk-test.com'])
      files.set(`${host}/.well-known/pki-validation/${f.FileName!}`, `${f.FileContents!}\r\n`);
    await work();
    const o = await info(placed.ServiceOrderID);
    expect(o.OrderStatus.MajorStatus).toBe('COMPLETE');
    expect(o.DCVStatus.every((d: { Status: string }) => d.Status === 'VALIDATED')).toBe(true);
    files.clear();
  });

  it('ok/DV by DNS at the hash-style brand: CNAME _<md5>.<name> → <sha256 split>.<caDomain>, ECC-FULL chain', async () => {
    const placed = await order(
      { ProductCode: 'Sectra.DV', DVAuthMethod: 'DNS', ServerCount: 1 },
      { AdminContact: orgContact, TechContact: orgContact },
    );
    const d = placed.OrderParameters.DNSAuthDetails!;
    for (const host of ['www.certdesk-test.com', 'certdesk-test.com'])
      dns.set(`${d.DNSEntry!}.${host}`, [{ type: 'CNAME', target: d.DNSValue! }]);
    await work();
    const o = await info(placed.ServiceOrderID);
    expect(o.OrderStatus.MajorStatus).toBe('COMPLETE');
    const chain = t.services.ca.chain('Sectra', 'SHA256-FULL-CHAIN');
    expect(verify(o.Fulfillment.Certificate, o.Fulfillment.Intermediate, chain.root, t.clock.nowSeconds())).toContain(
      ': OK',
    );
  });

  it('ok/DV by DNS with the TXT record at _dnsauth.<name> (when a CNAME blocks the name itself)', async () => {
    const placed = await order({ DVAuthMethod: 'DNS' });
    dns.set('_dnsauth.certdesk-test.com', [{ type: 'TXT', data: placed.OrderParameters.DNSAuthDetails!.DNSValue! }]);
    await work();
    expect((await info(placed.ServiceOrderID)).OrderStatus.MajorStatus).toBe('COMPLETE');
    dns.clear('_dnsauth.certdesk-test.com');
  });

  it('ok/a wildcard order by DNS (record at the base name) and a multi-domain order with a SAN host', async () => {
    const wcCsr = spawnSync(
      'openssl',
      [
        'req',
        '-new',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:P-256',
        '-nodes',
        '-keyout',
        join(dir, 'wc.key'),
        '-subj',
        '/CN=*.certdesk-test.com',
      ],
      { encoding: 'utf8' },
    ).stdout;
    const wc = await order({
      ProductCode: 'TrustPoint.DVWildcard',
      CSR: wcCsr,
      DVAuthMethod: 'DNS',
      SignatureHashAlgorithm: 'SHA256-ECC-HYBRID',
    });
    expect(wc.OrderParameters.DNSAuthDetails!.FQDNs).toEqual(['certdesk-test.com']);
    const md = await order({
      ProductCode: 'TrustPoint.DVMultiDomain',
      DVAuthMethod: 'DNS',
      SubjectAltNames: ['shop.certdesk-test.com'],
    });
    dns.set('certdesk-test.com', [
      { type: 'A', address: '127.0.0.1' },
      { type: 'TXT', data: wc.OrderParameters.DNSAuthDetails!.DNSValue! },
      { type: 'TXT', data: md.OrderParameters.DNSAuthDetails!.DNSValue! },
    ]);
    dns.set('shop.certdesk-test.com', [{ type: 'TXT', data: md.OrderParameters.DNSAuthDetails!.DNSValue! }]);
    await work();
    const w = await info(wc.ServiceOrderID);
    expect(w.OrderStatus.MajorStatus).toBe('COMPLETE');
    expect(
      verify(
        w.Fulfillment.Certificate,
        w.Fulfillment.Intermediate,
        t.services.ca.chain('TrustPoint', 'SHA256-ECC-HYBRID').root,
        t.clock.nowSeconds(),
      ),
    ).toContain(': OK');
    writeFileSync(join(dir, 'md.pem'), (await info(md.ServiceOrderID)).Fulfillment.Certificate);
    const sans = spawnSync('openssl', ['x509', '-noout', '-ext', 'subjectAltName', '-in', join(dir, 'md.pem')], {
      encoding: 'utf8',
    }).stdout;
    expect(sans).toContain('DNS:www.certdesk-test.com, DNS:shop.certdesk-test.com, DNS:certdesk-test.com');
    dns.set('certdesk-test.com', [{ type: 'A', address: '127.0.0.1' }]);
    dns.clear('shop.certdesk-test.com');
  });

  it('ok/DV by FILE at the hash-style brand: <MD5>.txt with hash, CA domain and unique value, reached through a redirect', async () => {
    const placed = await order(
      { ProductCode: 'Sectra.DV', DVAuthMethod: 'FILE', ServerCount: 1 },
      { AdminContact: orgContact, TechContact: orgContact },
    );
    const f = placed.OrderParameters.FileAuthDetails!;
    expect(f.FileName).toMatch(/^[0-9A-F]{32}\.txt$/);
    expect(f.FileContents!.split('\n')).toHaveLength(3);
    const port = (web.address() as AddressInfo).port;
    for (const host of ['www.certdesk-test.com', 'certdesk-test.com']) {
      files.set(
        `${host}/.well-known/pki-validation/${f.FileName!}`,
        `REDIRECT http://${host}:${port}/moved/${f.FileName!}`,
      );
      files.set(`${host}/moved/${f.FileName!}`, f.FileContents!);
    }
    await work();
    expect((await info(placed.ServiceOrderID)).OrderStatus.MajorStatus).toBe('COMPLETE');
    files.clear();
  });

  it('fail/CAA that names another CA: FAILED CAA_FORBIDDEN, refunded, no certificate; CAA naming us permits', async () => {
    const before = await used();
    const placed = await order({ DVAuthMethod: 'DNS' });
    expect(await used()).toBeCloseTo(before + 49, 2);
    dns.set('certdesk-test.com', [
      { type: 'A', address: '127.0.0.1' },
      { type: 'TXT', data: placed.OrderParameters.DNSAuthDetails!.DNSValue! },
      { type: 'CAA', flags: 0, tag: 'issue', value: 'other-ca.example' },
    ]);
    await work();
    const o = await info(placed.ServiceOrderID);
    expect(o.OrderStatus).toMatchObject({ MajorStatus: 'FAILED', MinorStatus: 'CAA_FORBIDDEN' });
    expect(o.BillingInfo.Status).toBe('refunded');
    expect(await used()).toBeCloseTo(before, 2);
    expect(
      await t.db.kysely.selectFrom('certificates').select('id').where('order_id', '=', placed.ServiceOrderID).execute(),
    ).toEqual([]);

    // CAA is also checked when the order comes: refused at once, nothing stored or charged.
    const refused = await t.call(c.token, {
      method: 'POST',
      url: '/rest/v1/Order',
      payload: {
        OrderParameters: { ProductCode: 'TrustPoint.DV', ValidityPeriod: 12, CSR: testCsr().pem, DVAuthMethod: 'DNS' },
        AdminContact: contact,
        TechContact: contact,
      },
    });
    expect(refused.statusCode).toBe(417);
    expect(refused.json()).toMatchObject({
      ServiceOrderID: 0,
      Message: expect.stringMatching(/CAA at certdesk-test\.com forbids/),
    });
    expect(await used()).toBeCloseTo(before, 2);

    dns.set('certdesk-test.com', [
      { type: 'A', address: '127.0.0.1' },
      { type: 'CAA', flags: 0, tag: 'issue', value: 'trustpoint-ca.example' },
    ]);
    const allowed = await order({ DVAuthMethod: 'DNS' });
    dns.set('certdesk-test.com', [
      { type: 'A', address: '127.0.0.1' },
      { type: 'TXT', data: allowed.OrderParameters.DNSAuthDetails!.DNSValue! },
      { type: 'CAA', flags: 0, tag: 'issue', value: 'trustpoint-ca.example' },
    ]);
    await work();
    expect((await info(allowed.ServiceOrderID)).OrderStatus.MajorStatus).toBe('COMPLETE');
    dns.set('certdesk-test.com', [{ type: 'A', address: '127.0.0.1' }]);
  });

  it('fail/no proof within 30 days: FAILED DCV_EXPIRED and refunded', async () => {
    const before = await used();
    const placed = await order({ DVAuthMethod: 'DNS' });
    await work();
    const saved = t.clock.nowSeconds();
    t.clock.set(saved + 31 * 86400);
    try {
      await work();
      // The access token of a month ago has expired: a fresh one.
      const token = await t.token(c);
      const o = (
        await t.call(token, {
          method: 'GET',
          url: `/rest/v1/Order/${placed.ServiceOrderID}?includeBillingDetails=true`,
        })
      ).json().OrderInfo;
      expect(o.OrderStatus).toMatchObject({ MajorStatus: 'FAILED', MinorStatus: 'DCV_EXPIRED' });
      expect(o.BillingInfo.Status).toBe('refunded');
      expect((await t.call(token, { method: 'GET', url: '/rest/v1/Limit' })).json().LimitInfo.Used).toBeCloseTo(
        before,
        2,
      );
    } finally {
      t.clock.set(saved);
    }
  });

  it('ok/the audit log records placing, each check and the issuance with actor and client address', async () => {
    const placed = await order({ DVAuthMethod: 'DNS' });
    dns.set('certdesk-test.com', [
      { type: 'A', address: '127.0.0.1' },
      { type: 'TXT', data: placed.OrderParameters.DNSAuthDetails!.DNSValue! },
    ]);
    await work();
    const events = await t.db.kysely
      .selectFrom('audit_events')
      .select(['action', 'actor', 'client_address'])
      .where('subject', '=', String(placed.ServiceOrderID))
      .orderBy('id')
      .execute();
    expect(events.map((e) => e.action)).toEqual(['order.placed', 'dcv.validated', 'dcv.validated', 'order.issued']);
    expect(events[0]).toMatchObject({ client_address: '127.0.0.1' });
    expect(events[3]).toMatchObject({ actor: 'system' });
    dns.set('certdesk-test.com', [{ type: 'A', address: '127.0.0.1' }]);
  });

  describe("OV and EV through the operator's vetting", () => {
    const orgOrder = {
      AdminContact: { ...orgContact, Title: 'CTO', Fax: '+49 30 2' },
      TechContact: { ...orgContact, Title: 'CTO', Fax: '+49 30 2' },
      OrganizationInfo: {
        OrganizationName: 'Certdesk Test GmbH',
        OrganizationAddress: { ...orgContact.OrganizationAddress, Phone: '+49 30 1' },
      },
    };
    const validated = async (productCode: string) => {
      const placed = await order({ ProductCode: productCode, DVAuthMethod: 'DNS' }, orgOrder);
      dns.set('certdesk-test.com', [
        { type: 'A', address: '127.0.0.1' },
        { type: 'TXT', data: placed.OrderParameters.DNSAuthDetails!.DNSValue! },
      ]);
      await work();
      dns.set('certdesk-test.com', [{ type: 'A', address: '127.0.0.1' }]);
      return placed.ServiceOrderID;
    };

    it('ok/OV: DCV done → WF_ORG_VALIDATION (50 %), listed for vetting; approved → issued with the organization in the subject', async () => {
      const id = await validated('TrustPoint.OV');
      expect((await info(id)).OrderStatus).toMatchObject({
        MajorStatus: 'PENDING',
        MinorStatus: 'WF_ORG_VALIDATION',
        Progress: 50,
      });
      expect((await t.services.vetting.list()).map((v) => v.order.id)).toContain(id);
      await t.services.vetting.approve(id, {});
      const o = await info(id);
      expect(o.OrderStatus.MajorStatus).toBe('COMPLETE');
      writeFileSync(join(dir, 'ov.pem'), o.Fulfillment.Certificate);
      const subject = spawnSync('openssl', ['x509', '-noout', '-subject', '-in', join(dir, 'ov.pem')], {
        encoding: 'utf8',
      }).stdout;
      expect(subject).toMatch(
        /C ?= ?DE, ST ?= ?Berlin, L ?= ?Berlin, street ?= ?Hauptstr\. 1, postalCode ?= ?10115, O ?= ?Certdesk Test GmbH, CN ?= ?www\.certdesk-test\.com/,
      );
      expect(
        verify(
          o.Fulfillment.Certificate,
          o.Fulfillment.Intermediate,
          t.services.ca.chain('TrustPoint', 'SHA256-FULL-CHAIN').root,
          t.clock.nowSeconds(),
        ),
      ).toContain(': OK');
    });

    it('ok/EV needs the vetted registration data; with it the certificate carries jurisdiction and EV policy', async () => {
      const id = await validated('TrustPoint.EV');
      await expect(t.services.vetting.approve(id, {})).rejects.toMatchObject({
        message: /EV vetting needs BusinessCategory, RegistrationNumber, JurisdictionCountry/,
      });
      // A registration number a PrintableString cannot hold is refused at vetting, and nothing is recorded.
      await expect(
        t.services.vetting.approve(id, {
          BusinessCategory: 'Private Organization',
          RegistrationNumber: 'HRB 12345 Ü',
          JurisdictionCountry: 'DE',
        }),
      ).rejects.toMatchObject({ kind: 'invalidInput', message: /RegistrationNumber "HRB 12345 Ü" must be/ });
      expect(
        (await t.db.kysely.selectFrom('orders').select('minor_status').where('id', '=', id).executeTakeFirstOrThrow())
          .minor_status,
      ).toBe('WF_ORG_VALIDATION');
      await t.services.vetting.approve(id, {
        BusinessCategory: 'Private Organization',
        RegistrationNumber: 'HRB 12345',
        JurisdictionCountry: 'DE',
      });
      const o = (
        await t.call(c.token, {
          method: 'GET',
          url: `/rest/v1/Order/${id}?includeFulfillment=true&includeOrganizationInfos=true`,
        })
      ).json().OrderInfo;
      expect(o.OrderStatus.MajorStatus).toBe('COMPLETE');
      expect(o.OrganizationInfo).not.toHaveProperty('Vetted');
      writeFileSync(join(dir, 'ev.pem'), o.Fulfillment.Certificate);
      const text = spawnSync(
        'openssl',
        ['x509', '-noout', '-text', '-nameopt', 'oneline', '-in', join(dir, 'ev.pem')],
        { encoding: 'utf8' },
      ).stdout;
      expect(text).toContain('jurisdictionC = DE');
      expect(text).toContain('Policy: 2.23.140.1.1');
    });

    it('fail/a rejected organization: FAILED REJECTED and refunded; approving twice or a DV order is refused', async () => {
      const before = await used();
      const id = await validated('TrustPoint.OV');
      await t.services.vetting.reject(id, 'registry shows no such company');
      const o = await info(id);
      expect(o.OrderStatus).toMatchObject({ MajorStatus: 'FAILED', MinorStatus: 'REJECTED' });
      expect(o.BillingInfo.Status).toBe('refunded');
      expect(await used()).toBeCloseTo(before, 2);
      await expect(t.services.vetting.approve(id, {})).rejects.toMatchObject({ kind: 'invalidOrderState' });
      await expect(t.services.vetting.reject(999_999, 'x')).rejects.toMatchObject({ kind: 'orderNotFound' });
    });
  });

  describe('EMAIL validation', () => {
    /** The worker delivers what the outbox queued (job mail.deliver), and the SMTP server gets it. */
    const delivered: typeof smtp.waitFor = async (match) => {
      while ((await worker.runOnce()) > 0);
      return smtp.waitFor(match);
    };
    const linkIn = (text: string) => /https:\/\/certdesk\.example(\/dcv\/approve\/cda_[A-Za-z0-9_-]+)/.exec(text)?.[1];

    it('ok/the approver gets a mail over SMTP; GET shows and approves nothing; POST approves and the certificate is issued', async () => {
      const placed = await order({ DVAuthMethod: 'EMAIL', ApproverEmail: 'hostmaster@certdesk-test.com' });
      const mail = await delivered(
        (m) =>
          m.envelope.to.includes('hostmaster@certdesk-test.com') &&
          (m.text ?? '').includes(`Order ${placed.ServiceOrderID},`),
      );
      expect(mail.subject).toMatch(/^Approve the certificate for www\.certdesk-test\.com and 1 more$/);
      const path = linkIn(mail.text ?? '')!;
      expect(path).toBeDefined();
      // Sent, the outbox keeps the mail without the link's token (stored only hashed elsewhere).
      const kept = await t.db.kysely
        .selectFrom('mail_outbox')
        .select(['status', 'body_text'])
        .where('order_id', '=', placed.ServiceOrderID)
        .where('kind', '=', 'dcv.approval')
        .execute();
      expect(kept.map((m) => m.status)).toEqual(['sent']);
      expect(kept[0]!.body_text).not.toContain(path.split('/').at(-1)!);
      expect(kept[0]!.body_text).toContain('/dcv/approve/[removed once sent]');

      const shown = await t.app.inject({ method: 'GET', url: path });
      expect(shown.statusCode).toBe(200);
      expect(shown.headers['content-type']).toMatch(/^text\/html/);
      expect(shown.body).toContain('<form method="post">');
      expect(shown.body).toContain('www.certdesk-test.com');
      await work();
      expect((await info(placed.ServiceOrderID)).OrderStatus.MinorStatus).toBe('WF_EMAIL_AUTH');

      const approved = await t.app.inject({ method: 'POST', url: path });
      expect(approved.statusCode).toBe(200);
      expect(approved.body).toContain('Approved');
      const o = await info(placed.ServiceOrderID);
      expect(o.OrderStatus.MajorStatus).toBe('COMPLETE');
      expect(o.DCVStatus.every((d: { Status: string }) => d.Status === 'VALIDATED')).toBe(true);
      expect(
        verify(
          o.Fulfillment.Certificate,
          o.Fulfillment.Intermediate,
          t.services.ca.chain('TrustPoint', 'SHA256-FULL-CHAIN').root,
          t.clock.nowSeconds(),
        ),
      ).toContain(': OK');
      // Clicking again changes nothing.
      expect((await t.app.inject({ method: 'POST', url: path })).statusCode).toBe(200);
      expect(
        await t.db.kysely
          .selectFrom('certificates')
          .select('id')
          .where('order_id', '=', placed.ServiceOrderID)
          .execute(),
      ).toHaveLength(1);
      const audit = await t.db.kysely
        .selectFrom('audit_events')
        .select(['action', 'actor'])
        .where('subject', '=', String(placed.ServiceOrderID))
        .where('action', '=', 'dcv.approved')
        .execute();
      expect(audit).toEqual([{ action: 'dcv.approved', actor: 'approver:hostmaster@certdesk-test.com' }]);
    });

    it('ok/an approval mail not yet sent when its link is replaced is withdrawn: only the new link leaves', async () => {
      const placed = await order({ DVAuthMethod: 'EMAIL', ApproverEmail: 'admin@certdesk-test.com' });
      const id = placed.ServiceOrderID as number;
      // The first mail waits in the outbox (no worker has run) when the approver is changed.
      const changed = await t.call(c.token, {
        method: 'PUT',
        url: `/rest/v1/ApproverEmail/${id}?ApproverEmail=webmaster@certdesk-test.com`,
      });
      expect(changed.json()).toMatchObject({ success: true });
      const mails = async () =>
        (await t.services.mailRepo.list({ limit: 10, orderId: id })).map((m) => [m.to, m.status]).reverse();
      expect(await mails()).toEqual([
        ['admin@certdesk-test.com', 'withdrawn'],
        ['webmaster@certdesk-test.com', 'outbox'],
      ]);
      const mail = await delivered(
        (m) => m.envelope.to.includes('webmaster@certdesk-test.com') && (m.text ?? '').includes(`Order ${id},`),
      );
      expect(linkIn(mail.text ?? '')).toBeDefined();
      expect(smtp.received.filter((m) => (m.text ?? '').includes(`Order ${id},`))).toHaveLength(1);
      expect(await mails()).toEqual([
        ['admin@certdesk-test.com', 'withdrawn'],
        ['webmaster@certdesk-test.com', 'sent'],
      ]);
      // A bad approver changes nothing: no mail withdrawn, none queued.
      const bad = await t.call(c.token, {
        method: 'PUT',
        url: `/rest/v1/ApproverEmail/${id}?ApproverEmail=someone@gmail.com`,
      });
      expect(bad.statusCode).toBe(417);
      expect((await mails()).length).toBe(2);
    });

    it('ok/cancelling an order withdraws its approval mails that have not left; the cancellation notice goes', async () => {
      const placed = await order({ DVAuthMethod: 'EMAIL', ApproverEmail: 'admin@certdesk-test.com' });
      const id = placed.ServiceOrderID as number;
      const cancelled = await t.call(c.token, { method: 'DELETE', url: `/rest/v1/Order/${id}` });
      expect(cancelled.statusCode, cancelled.body).toBe(200);
      const mails = async () =>
        (await t.services.mailRepo.list({ limit: 10, orderId: id })).map((m) => [m.kind, m.status]).reverse();
      expect(await mails()).toEqual([
        ['dcv.approval', 'withdrawn'],
        ['order.cancelled', 'outbox'],
      ]);
      await delivered(
        (m) => (m.subject ?? '').startsWith(`Order ${id} (`) && (m.subject ?? '').endsWith('was cancelled'),
      );
      expect(smtp.received.filter((m) => (m.text ?? '').includes(`Order ${id},`))).toEqual([]);
      expect(await mails()).toEqual([
        ['dcv.approval', 'withdrawn'],
        ['order.cancelled', 'sent'],
      ]);
    });

    it('ok/PUT /ApproverEmail sends a new link and voids the old; POST /ApproverEmail resends; refusals', async () => {
      const placed = await order({ DVAuthMethod: 'EMAIL', ApproverEmail: 'admin@certdesk-test.com' });
      const first = linkIn(
        (await delivered((m) => (m.text ?? '').includes(`Order ${placed.ServiceOrderID},`))).text ?? '',
      )!;
      const bad = await t.call(c.token, {
        method: 'PUT',
        url: `/rest/v1/ApproverEmail/${placed.ServiceOrderID}?ApproverEmail=someone@gmail.com`,
      });
      expect(bad.statusCode).toBe(417);
      expect(bad.json()).toMatchObject({ ErrorField: 'ApproverEmail' });
      const changed = await t.call(c.token, {
        method: 'PUT',
        url: `/rest/v1/ApproverEmail/${placed.ServiceOrderID}?ApproverEmail=webmaster@certdesk-test.com`,
      });
      expect(changed.json()).toMatchObject({ success: true, Message: expect.any(String) });
      const second = linkIn(
        (
          await delivered(
            (m) =>
              m.envelope.to.includes('webmaster@certdesk-test.com') &&
              (m.text ?? '').includes(`Order ${placed.ServiceOrderID},`),
          )
        ).text ?? '',
      )!;
      expect(second).not.toBe(first);
      expect((await t.app.inject({ method: 'GET', url: first })).statusCode).toBe(404);
      const resent = await t.call(c.token, { method: 'POST', url: `/rest/v1/ApproverEmail/${placed.ServiceOrderID}` });
      expect(resent.json()).toMatchObject({ success: true });
      const other = await t.customer({ name: 'Stranger' });
      expect(
        (await t.call(other.token, { method: 'POST', url: `/rest/v1/ApproverEmail/${placed.ServiceOrderID}` }))
          .statusCode,
      ).toBe(404);
      const dnsOrder = await order({ DVAuthMethod: 'DNS' });
      expect(
        (await t.call(c.token, { method: 'POST', url: `/rest/v1/ApproverEmail/${dnsOrder.ServiceOrderID}` })).json(),
      ).toMatchObject({ ErrorId: -2011 });
      expect((await t.app.inject({ method: 'GET', url: '/dcv/approve/nonsense' })).statusCode).toBe(404);
      // The resent link is queued until the worker delivers it.
      const statuses = async () =>
        (await t.services.mailRepo.list({ limit: 100, orderId: placed.ServiceOrderID })).map((m) => m.status);
      expect(await statuses()).toEqual(['outbox', 'sent', 'sent']);
      await delivered((m) => m.envelope.to.includes('webmaster@certdesk-test.com'));
      expect(await statuses()).toEqual(['sent', 'sent', 'sent']);
    });
  });

  describe('inline issuance when the proof is already in place', () => {
    const post = (params: Record<string, unknown>) =>
      t.call(c.token, {
        method: 'POST',
        url: '/rest/v1/Order',
        payload: {
          OrderParameters: { ProductCode: 'TrustPoint.DV', ValidityPeriod: 12, CSR: testCsr().pem, ...params },
          AdminContact: contact,
          TechContact: contact,
        },
      });
    const publishTxt = async () => {
      const value = (
        await t.call(c.token, {
          method: 'POST',
          url: '/rest/v1/DNSData',
          payload: { CSR: testCsr().pem, ProductCode: 'TrustPoint.FreeDV' },
        })
      ).json().DNSAuthDetails.DNSValue as string;
      dns.set('certdesk-test.com', [
        { type: 'A', address: '127.0.0.1' },
        { type: 'TXT', data: value },
      ]);
    };

    it('ok/the free product by DNS with the record in place: Fulfillment in the POST /Order response, openssl verifies it', async () => {
      await publishTxt();
      const asked = dns.answered();
      const res = await post({ ProductCode: 'TrustPoint.FreeDV', ValidityPeriod: 180, DVAuthMethod: 'DNS' });
      expect(res.statusCode, res.body).toBe(200);
      // www.certdesk-test.com and certdesk-test.com share their proof and their CAA parents: the TXT
      // records at certdesk-test.com (they match: _dnsauth.certdesk-test.com is not asked), CAA at
      // www.…, certdesk-test.com and com.
      expect(dns.answered() - asked).toBe(4);
      const body = res.json();
      expect(body.Fulfillment.Certificate).toMatch(/^-----BEGIN CERTIFICATE-----/);
      const chain = t.services.ca.chain('TrustPoint', 'SHA256-FULL-CHAIN');
      expect(
        verify(body.Fulfillment.Certificate, body.Fulfillment.Intermediate, chain.root, t.clock.nowSeconds()),
      ).toContain(': OK');
      expect((await info(body.ServiceOrderID)).OrderStatus).toMatchObject({
        MajorStatus: 'COMPLETE',
        MinorStatus: 'COMPLETED',
      });
      // A regular DV product issues inline too when the record is there.
      const dv = (await post({ DVAuthMethod: 'DNS' })).json();
      expect(dv.Fulfillment.Certificate).toMatch(/^-----BEGIN CERTIFICATE-----/);
      dns.set('certdesk-test.com', [{ type: 'A', address: '127.0.0.1' }]);
    });

    it('fail/the free product without the record: -3202 with failed_dns or failed_file, nothing stored or charged', async () => {
      const [count, before] = [(await t.db.kysely.selectFrom('orders').select('id').execute()).length, await used()];
      const dnsRes = await post({ ProductCode: 'TrustPoint.FreeDV', ValidityPeriod: 180, DVAuthMethod: 'DNS' });
      expect(dnsRes.statusCode).toBe(417);
      expect(dnsRes.json()).toMatchObject({
        success: false,
        ErrorId: -3202,
        ErrorField: 'failed_dns',
        ServiceOrderID: 0,
      });
      const fileRes = await post({ ProductCode: 'TrustPoint.FreeDV', ValidityPeriod: 180, DVAuthMethod: 'FILE' });
      expect(fileRes.json()).toMatchObject({ ErrorId: -3202, ErrorField: 'failed_file' });
      expect((await t.db.kysely.selectFrom('orders').select('id').execute()).length).toBe(count);
      expect(await used()).toBe(before);
      // A regular product without the record is simply pending.
      const pending = (await post({ DVAuthMethod: 'DNS' })).json();
      expect(pending).not.toHaveProperty('Fulfillment');
      expect((await info(pending.ServiceOrderID)).OrderStatus.MajorStatus).toBe('PENDING');
    });
  });

  describe('DCV data before ordering', () => {
    const dnsData = (token: string, payload: Record<string, unknown>) =>
      t.call(token, { method: 'POST', url: '/rest/v1/DNSData', payload });

    it('ok/POST /DNSData and /FileData give the values a later order uses; another customer gets its own', async () => {
      const dnsRes = await dnsData(c.token, { CSR: testCsr().pem, ProductCode: 'TrustPoint.DV' });
      expect(dnsRes.statusCode).toBe(200);
      const d = dnsRes.json().DNSAuthDetails;
      expect(d).toMatchObject({
        PointerType: 'TXT',
        FQDNs: ['certdesk-test.com'],
        Example: expect.stringContaining(d.DNSValue),
      });
      const f = (
        await t.call(c.token, {
          method: 'POST',
          url: '/rest/v1/FileData',
          payload: { CSR: testCsr().pem, ProductCode: 'TrustPoint.DV' },
        })
      ).json().FileAuthDetails;
      expect(f).toMatchObject({
        FileName: 'fileauth.txt',
        FilePath: '/.well-known/pki-validation/',
        FileContents: d.DNSValue,
        FQDNs: ['www.certdesk-test.com', 'certdesk-test.com'],
      });
      const placed = await order({ DVAuthMethod: 'DNS' });
      expect(placed.OrderParameters.DNSAuthDetails!.DNSValue).toBe(d.DNSValue);
      const other = await t.customer({ name: 'Other' });
      expect(
        (await dnsData(other.token, { CSR: testCsr().pem, ProductCode: 'TrustPoint.DV' })).json().DNSAuthDetails
          .DNSValue,
      ).not.toBe(d.DNSValue);
    });

    it('fail/a bad CSR, an unknown product, a product without DNS validation', async () => {
      expect((await dnsData(c.token, { CSR: 'garbage', ProductCode: 'TrustPoint.DV' })).json()).toMatchObject({
        success: false,
        ErrorField: 'CSR',
      });
      expect((await dnsData(c.token, { CSR: testCsr().pem, ProductCode: 'Nope.DV' })).statusCode).toBe(417);
      expect(
        (await dnsData(c.token, { CSR: testCsr().pem, ProductCode: 'TrustPoint.CodeSigning' })).json(),
      ).toMatchObject({ ErrorField: 'ProductCode' });
      expect((await dnsData(c.token, {})).statusCode).toBe(417);
    });

    it('ok/GET /ApproverList: constructed addresses and the ones published in DNS, per domain', async () => {
      dns.set('_validation-contactemail.certdesk-test.com', [{ type: 'TXT', data: 'dcv@certdesk-test.com' }]);
      const res = await t.call(c.token, {
        method: 'GET',
        url: '/rest/v1/ApproverList?CommonName=www.certdesk-test.com&ProductCode=TrustPoint.DV&DNSNames=shop.certdesk-test.com',
      });
      expect(res.statusCode).toBe(200);
      const body = res.json();
      const emails = body.ApproverList.map((a: { ApproverEmail: string }) => a.ApproverEmail);
      expect(emails).toEqual(
        expect.arrayContaining([
          'admin@www.certdesk-test.com',
          'admin@certdesk-test.com',
          'postmaster@certdesk-test.com',
          'dcv@certdesk-test.com',
        ]),
      );
      expect(
        body.ApproverList.find((a: { ApproverEmail: string }) => a.ApproverEmail === 'dcv@certdesk-test.com')
          .ApproverType,
      ).toBe('Domain');
      expect(body.DomainApprovers.DomainApprover.map((d: { Domain: string }) => d.Domain)).toEqual([
        'www.certdesk-test.com',
        'shop.certdesk-test.com',
      ]);
      expect(
        (
          await t.call(c.token, {
            method: 'GET',
            url: '/rest/v1/ApproverList?CommonName=intranet.local&ProductCode=TrustPoint.DV',
          })
        ).json(),
      ).toMatchObject({ ErrorField: 'CommonName' });
      expect(
        (
          await t.call(c.token, {
            method: 'GET',
            url: '/rest/v1/ApproverList?CommonName=www.certdesk-test.com&ProductCode=TrustPoint.FreeDV',
          })
        ).statusCode,
      ).toBe(417);
      dns.clear('_validation-contactemail.certdesk-test.com');
    });
  });

  it('fail/FILE to a private address when private fetches are not allowed: the name stays pending with the reason', async () => {
    const strict = await createTestContext(dialect, {
      CERTDESK_DNS_SERVERS: dns.address,
      CERTDESK_VALIDATION_ALLOW_PRIVATE: 'false',
      CERTDESK_VALIDATION_HTTP_PORT: String((web.address() as AddressInfo).port),
    });
    try {
      const customer = await strict.customer({ name: 'Strict' });
      const res = await strict.call(customer.token, {
        method: 'POST',
        url: '/rest/v1/Order',
        payload: {
          OrderParameters: {
            ProductCode: 'TrustPoint.DV',
            ValidityPeriod: 12,
            CSR: testCsr().pem,
            DVAuthMethod: 'FILE',
          },
          AdminContact: contact,
          TechContact: contact,
        },
      });
      const placed = res.json();
      const f = placed.OrderParameters.FileAuthDetails;
      let requests = 0;
      web.on('request', () => requests++);
      for (const host of ['www.certdesk-test.com', 'certdesk-test.com'])
        files.set(`${host}/.well-known/pki-validation/${f.FileName}`, f.FileContents);
      const w = createWorker(strict.services, pino({ level: 'silent' }));
      await w.runOnce();
      const o = (
        await strict.call(customer.token, {
          method: 'GET',
          url: `/rest/v1/Order/${placed.ServiceOrderID}?includeDCVStatus=true`,
        })
      ).json().OrderInfo;
      expect(o.OrderStatus.MajorStatus).toBe('PENDING');
      expect(o.DCVStatus[0].Problem).toMatch(/may not be fetched/);
      expect(requests).toBe(0);
      files.clear();
    } finally {
      await strict.close();
    }
  });
});
