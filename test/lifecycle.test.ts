import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestContext, TestCustomer } from './support/app.js';
import { testDialects } from './support/databases.js';
import { newEcCsr, testCsr } from './support/csr.js';
import type { TestDnsServer } from './support/dns-server.js';
import { dnsOrderBody, issuingContext, type IssuingContext } from './support/issuing-context.js';
import { ocspStatus as checkOcsp, verifyAsOf } from './support/openssl-checks.js';

const dir = mkdtempSync(join(tmpdir(), 'lifecycle-'));
const DAY = 86_400;

describe.each(testDialects())('cancel and revoke on $dialect', (dialect) => {
  let t: TestContext;
  let c: TestCustomer;
  let dns: TestDnsServer;

  let context: IssuingContext;

  beforeAll(async () => {
    context = await issuingContext(dialect, 'Lifecycle');
    ({ t, c, dns } = context);
  }, 120_000);
  afterAll(async () => context.close());

  /** A fresh token: tests move the clock past the lifetime of earlier ones. */
  const token = () => t.token(c);
  const place = async (params: Record<string, unknown> = {}) => {
    const res = await t.call(await token(), {
      method: 'POST',
      url: '/rest/v1/Order',
      payload: dnsOrderBody(params),
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as { ServiceOrderID: number; Fulfillment?: { Certificate: string; Intermediate: string } };
  };
  const info = async (id: number) =>
    (
      await t.call(await token(), {
        method: 'GET',
        url: `/rest/v1/Order/${id}?includeBillingDetails=true&includeFulfillment=true`,
      })
    ).json().OrderInfo;
  const used = async () =>
    (await t.call(await token(), { method: 'GET', url: '/rest/v1/Limit' })).json().LimitInfo.Used as number;
  const cancel = async (id: number) => t.call(await token(), { method: 'DELETE', url: `/rest/v1/Order/${id}` });
  const refunds = async (id: number) =>
    (
      await t.db.kysely
        .selectFrom('ledger')
        .select('kind')
        .where('order_id', '=', id)
        .where('kind', '=', 'refund')
        .execute()
    ).length;
  const revokedAt = async (id: number) =>
    (await t.db.kysely.selectFrom('certificates').select('revoked_at').where('order_id', '=', id).execute()).map(
      (r) => r.revoked_at,
    );
  /** openssl verify -crl_check of a certificate with the CRL as served. */
  const crlVerify = async (certificate: string, intermediate: string) => {
    const root = t.services.ca.chain('TrustPoint', 'SHA256-FULL-CHAIN').root;
    const crl = await t.services.ca.crl('trustpoint-rsa-int-1');
    writeFileSync(join(dir, 'crl.der'), crl!);
    spawnSync('openssl', ['crl', '-inform', 'DER', '-in', join(dir, 'crl.der'), '-out', join(dir, 'crl.pem')]);
    writeFileSync(join(dir, 'leaf.pem'), certificate);
    writeFileSync(join(dir, 'int.pem'), intermediate);
    writeFileSync(join(dir, 'root.pem'), root);
    const r = spawnSync(
      'openssl',
      [
        'verify',
        ...verifyAsOf(t.clock.nowSeconds()),
        '-crl_check',
        '-CRLfile',
        join(dir, 'crl.pem'),
        '-CAfile',
        join(dir, 'root.pem'),
        '-untrusted',
        join(dir, 'int.pem'),
        join(dir, 'leaf.pem'),
      ],
      { encoding: 'utf8' },
    );
    return `${r.stdout}${r.stderr}`;
  };
  /** openssl ocsp over the responder's answer for a certificate (the responder as the CA runs it). */
  const ocspStatus = (certificate: string, intermediate: string) =>
    checkOcsp(t.services.ca, { certificate, intermediate }, t.clock.nowSeconds());
  const at = async <T>(seconds: number, fn: () => Promise<T>): Promise<T> => {
    const saved = t.clock.nowSeconds();
    t.clock.set(saved + seconds);
    try {
      return await fn();
    } finally {
      t.clock.set(saved);
    }
  };

  describe('DELETE /Order/{id} (cancel)', () => {
    it('ok/a pending order: CANCELLED and refunded', async () => {
      dns.set('certdesk-test.com', []);
      const before = await used();
      const placed = await place();
      dns.set('certdesk-test.com', [
        {
          type: 'TXT',
          data: (
            await t.call(await token(), {
              method: 'POST',
              url: '/rest/v1/DNSData',
              payload: { CSR: testCsr().pem, ProductCode: 'TrustPoint.DV' },
            })
          ).json().DNSAuthDetails.DNSValue,
        },
      ]);
      expect((await info(placed.ServiceOrderID)).OrderStatus.MajorStatus).toBe('PENDING');
      const res = await cancel(placed.ServiceOrderID);
      expect(res.json()).toMatchObject({ success: true, Message: expect.stringMatching(/refunded/) });
      const o = await info(placed.ServiceOrderID);
      expect(o.OrderStatus).toMatchObject({ MajorStatus: 'CANCELLED', MinorStatus: 'CANCELLED' });
      expect(o.BillingInfo.Status).toBe('refunded');
      expect(await used()).toBeCloseTo(before, 2);
    });

    it('ok/day 29 after issuance: refunded and the certificate revoked (openssl -crl_check says revoked)', async () => {
      const before = await used();
      const placed = await place();
      expect(placed.Fulfillment).toBeDefined();
      await at(29 * DAY, async () => {
        expect((await cancel(placed.ServiceOrderID)).json().Message).toMatch(/refunded/);
        expect((await info(placed.ServiceOrderID)).BillingInfo.Status).toBe('refunded');
        expect(await used()).toBeCloseTo(before, 2);
      });
      expect((await revokedAt(placed.ServiceOrderID)).every((r) => r !== null)).toBe(true);
      expect(await crlVerify(placed.Fulfillment!.Certificate, placed.Fulfillment!.Intermediate)).toContain(
        'certificate revoked',
      );
      const ocsp = await ocspStatus(placed.Fulfillment!.Certificate, placed.Fulfillment!.Intermediate);
      expect(ocsp).toContain('Response verify OK');
      expect(ocsp).toMatch(/o-leaf\.pem: revoked/);
    });

    it('ok/day 31 after issuance: cancelled but charged; the certificate revoked all the same', async () => {
      const before = await used();
      const placed = await place();
      await at(31 * DAY, async () => {
        expect((await cancel(placed.ServiceOrderID)).json().Message).toMatch(/charged/);
        const o = await info(placed.ServiceOrderID);
        expect(o.OrderStatus.MajorStatus).toBe('CANCELLED');
        expect(o.BillingInfo.Status).toBe('cleared');
        expect(await used()).toBeCloseTo(before + 49, 2);
      });
      expect(await refunds(placed.ServiceOrderID)).toBe(0);
      expect((await revokedAt(placed.ServiceOrderID)).every((r) => r !== null)).toBe(true);
    });

    it('fail/cancelling twice, or a failed order, is -2011; another customer\u2019s order is 404; nothing changes', async () => {
      const placed = await place();
      await cancel(placed.ServiceOrderID);
      const again = await cancel(placed.ServiceOrderID);
      expect(again.statusCode).toBe(409);
      expect(again.json()).toMatchObject({ success: false, ErrorId: -2011, ErrorField: 'ServiceOrderID' });
      expect(await refunds(placed.ServiceOrderID)).toBe(1);
      const other = await t.customer({ name: 'Other' });
      const mine = await place();
      expect(
        (await t.call(other.token, { method: 'DELETE', url: `/rest/v1/Order/${mine.ServiceOrderID}` })).statusCode,
      ).toBe(404);
      expect((await info(mine.ServiceOrderID)).OrderStatus.MajorStatus).toBe('COMPLETE');
      expect((await t.call(await token(), { method: 'DELETE', url: '/rest/v1/Order/abc' })).statusCode).toBeLessThan(
        500,
      );
    });
  });

  describe('DELETE /Revoke/{id}', () => {
    it('ok/RevokeReason and Certificate in the JSON body: REVOKED, in the CRL at once, refunded within the RefundPeriod', async () => {
      const before = await used();
      const placed = await place();
      const res = await t.call(await token(), {
        method: 'DELETE',
        url: `/rest/v1/Revoke/${placed.ServiceOrderID}`,
        payload: { RevokeReason: 'Key compromise', Certificate: placed.Fulfillment!.Certificate },
      });
      expect(res.json()).toMatchObject({ success: true, Message: expect.stringMatching(/keyCompromise.*refunded/) });
      const o = await info(placed.ServiceOrderID);
      expect(o.OrderStatus).toMatchObject({ MajorStatus: 'REVOKED', MinorStatus: 'REVOKED' });
      expect(await used()).toBeCloseTo(before, 2);
      const crl = await crlVerify(placed.Fulfillment!.Certificate, placed.Fulfillment!.Intermediate);
      expect(crl).toContain('certificate revoked');
      const ocsp = await ocspStatus(placed.Fulfillment!.Certificate, placed.Fulfillment!.Intermediate);
      expect(ocsp).toContain('Response verify OK');
      expect(ocsp).toContain('Reason: keyCompromise');
    });

    it('ok/refunded, the order leaves no certificate valid: the one a reissue left in place is revoked too (it stayed good)', async () => {
      const before = await used();
      const placed = await place();
      const reissued = await t.call(await token(), {
        method: 'POST',
        url: '/rest/v1/Reissue',
        payload: { ServiceOrderID: placed.ServiceOrderID },
      });
      expect(reissued.json()).toMatchObject({ success: true });
      const second = (await info(placed.ServiceOrderID)).Fulfillment.Certificate as string;
      expect(second).not.toBe(placed.Fulfillment!.Certificate);
      const res = await t.call(await token(), {
        method: 'DELETE',
        url: `/rest/v1/Revoke/${placed.ServiceOrderID}`,
        payload: { RevokeReason: 'superseded', Certificate: second },
      });
      expect(res.json()).toMatchObject({ success: true, Message: expect.stringMatching(/refunded/) });
      expect(await used()).toBeCloseTo(before, 2);
      expect((await revokedAt(placed.ServiceOrderID)).every((r) => r !== null)).toBe(true);
      const ocsp = await ocspStatus(placed.Fulfillment!.Certificate, placed.Fulfillment!.Intermediate);
      expect(ocsp).toContain('Response verify OK');
      expect(ocsp).toMatch(/o-leaf\.pem: revoked/);
    });

    it('ok/the same through the query (the spec\u2019s reference form); after the RefundPeriod no refund', async () => {
      const placed = await place();
      const product = t.services.catalog.product('TrustPoint.DV');
      await at((product.refundPeriodDays + 1) * DAY, async () => {
        const q = `RevokeReason=${encodeURIComponent('no longer needed')}&Certificate=${encodeURIComponent(placed.Fulfillment!.Certificate)}`;
        const res = await t.call(await token(), {
          method: 'DELETE',
          url: `/rest/v1/Revoke/${placed.ServiceOrderID}?${q}`,
        });
        expect(res.json()).toMatchObject({ success: true, Message: expect.stringMatching(/cessationOfOperation/) });
        expect(res.json().Message).not.toMatch(/refunded/);
        expect((await info(placed.ServiceOrderID)).BillingInfo.Status).toBe('cleared');
      });
    });

    it('fail/a certificate of another order, no certificate, no reason: refused and nothing revoked', async () => {
      const a = await place();
      const b = await place();
      const res = await t.call(await token(), {
        method: 'DELETE',
        url: `/rest/v1/Revoke/${a.ServiceOrderID}`,
        payload: { RevokeReason: 'superseded', Certificate: b.Fulfillment!.Certificate },
      });
      expect(res.statusCode).toBe(417);
      expect(res.json()).toMatchObject({ ErrorField: 'Certificate' });
      const missing = await t.call(await token(), {
        method: 'DELETE',
        url: `/rest/v1/Revoke/${a.ServiceOrderID}`,
        payload: {},
      });
      expect(missing.json().Errors.map((e: { ErrorField: string }) => e.ErrorField)).toEqual([
        'RevokeReason',
        'Certificate',
      ]);
      expect(
        (
          await t.call(await token(), {
            method: 'DELETE',
            url: `/rest/v1/Revoke/${a.ServiceOrderID}`,
            payload: { RevokeReason: 'x', Certificate: 'not a pem' },
          })
        ).json(),
      ).toMatchObject({ ErrorField: 'Certificate' });
      expect([...(await revokedAt(a.ServiceOrderID)), ...(await revokedAt(b.ServiceOrderID))]).toEqual([null, null]);
      const other = await t.customer({ name: 'Other2' });
      expect(
        (
          await t.call(other.token, {
            method: 'DELETE',
            url: `/rest/v1/Revoke/${a.ServiceOrderID}`,
            payload: { RevokeReason: 'x', Certificate: a.Fulfillment!.Certificate },
          })
        ).statusCode,
      ).toBe(404);
    });
  });

  describe('POST /Reissue', () => {
    const reissue = async (payload: Record<string, unknown>) =>
      t.call(await token(), { method: 'POST', url: '/rest/v1/Reissue', payload });
    const serials = async (id: number) =>
      await t.db.kysely
        .selectFrom('certificates')
        .select(['serial', 'revoked_at'])
        .where('order_id', '=', id)
        .orderBy('id')
        .execute();
    const charges = async (id: number) =>
      (await t.db.kysely.selectFrom('ledger').select('kind').where('order_id', '=', id).execute()).length;

    it('fail/a pending order cannot be reissued: 409 -2011 on ServiceOrderID', async () => {
      dns.set('certdesk-test.com', []);
      const placed = await place();
      const res = await reissue({ ServiceOrderID: placed.ServiceOrderID });
      expect(res.statusCode).toBe(409);
      expect(res.json()).toMatchObject({ success: false, ErrorId: -2011, ErrorField: 'ServiceOrderID' });
      dns.set('certdesk-test.com', [
        {
          type: 'TXT',
          data: (
            await t.call(await token(), {
              method: 'POST',
              url: '/rest/v1/DNSData',
              payload: { CSR: testCsr().pem, ProductCode: 'TrustPoint.DV' },
            })
          ).json().DNSAuthDetails.DNSValue,
        },
      ]);
      expect((await reissue({ ServiceOrderID: 999999 })).statusCode).toBe(404);
      const other = await t.customer({ name: 'Other3' });
      const mine = await place();
      expect(
        (
          await t.call(other.token, {
            method: 'POST',
            url: '/rest/v1/Reissue',
            payload: { ServiceOrderID: mine.ServiceOrderID },
          })
        ).statusCode,
      ).toBe(404);
    });

    it('ok/mass reissue without OrderParameters: the original CSR, names still within the reuse period, a new certificate at no charge; the old one stays valid', async () => {
      const placed = await place();
      const before = await used();
      const res = await reissue({ ServiceOrderID: placed.ServiceOrderID });
      expect(res.json()).toMatchObject({ success: true });
      const o = await info(placed.ServiceOrderID);
      expect(o.OrderStatus.MajorStatus).toBe('COMPLETE');
      const certs = await serials(placed.ServiceOrderID);
      expect(certs).toHaveLength(2);
      expect(certs.every((c) => c.revoked_at === null)).toBe(true);
      writeFileSync(join(dir, 'new.pem'), o.Fulfillment.Certificate);
      const shown = spawnSync('openssl', ['x509', '-noout', '-serial', '-in', join(dir, 'new.pem')], {
        encoding: 'utf8',
      }).stdout.trim();
      expect(shown).toBe(`serial=${certs[1]!.serial}`);
      expect(await used()).toBe(before);
      expect(await charges(placed.ServiceOrderID)).toBe(1);
    });

    it('ok/past the reuse period by e-mail: the reissue mail is sent again with a fresh link, the approver confirms, and the new certificate is issued (the link said "already answered" before)', async () => {
      const placed = await place();
      const oldCert = placed.Fulfillment!.Certificate;
      await at(201 * DAY, async () => {
        const started = await reissue({
          ServiceOrderID: placed.ServiceOrderID,
          OrderParameters: { CSR: newEcCsr(), SignatureHashAlgorithm: 'SHA256-ECC-HYBRID' },
          ReissueEmail: 'admin@certdesk-test.com',
        });
        expect(started.json()).toMatchObject({ success: true });
        const linkOf = async () => {
          const mails = await t.services.mailRepo.list({ limit: 10, orderId: placed.ServiceOrderID });
          const link = mails
            .filter((m) => m.kind === 'dcv.approval' && m.status !== 'withdrawn')
            .map((m) => /\/dcv\/approve\/(cda_[A-Za-z0-9_-]+)/.exec(m.text)?.[1])
            .find(Boolean);
          expect(link).toBeDefined();
          return link!;
        };
        const first = await linkOf();
        expect(await t.services.emailApprovals.view(first)).toMatchObject({ state: 'pending' });
        // The mail again (POST /ApproverEmail): a fresh link, the first one stops working.
        const resent = await t.call(await token(), {
          method: 'POST',
          url: `/rest/v1/ApproverEmail/${placed.ServiceOrderID}`,
        });
        expect(resent.statusCode, resent.body).toBe(200);
        const second = await linkOf();
        expect(second).not.toBe(first);
        expect(await t.services.emailApprovals.view(first)).toBeUndefined();
        expect(await t.services.emailApprovals.approve(second, '127.0.0.1')).toMatchObject({ state: 'approved' });
        const o = await info(placed.ServiceOrderID);
        expect(o.OrderStatus.MajorStatus).toBe('COMPLETE');
        expect(o.Fulfillment.Certificate).not.toBe(oldCert);
      });
    });

    it('ok/past the reuse period: REISSUE waiting for DNS, the old certificate still in Fulfillment; a second reissue replaces the pending one; the proof completes it', async () => {
      const placed = await place();
      const oldCert = placed.Fulfillment!.Certificate;
      const ecCsr = newEcCsr();
      await at(201 * DAY, async () => {
        expect(
          (
            await reissue({
              ServiceOrderID: placed.ServiceOrderID,
              OrderParameters: { CSR: ecCsr, DVAuthMethod: 'DNS', SignatureHashAlgorithm: 'SHA256-ECC-HYBRID' },
            })
          ).json(),
        ).toMatchObject({ success: true });
        let o = await info(placed.ServiceOrderID);
        expect(o.OrderStatus).toMatchObject({ MajorStatus: 'REISSUE', MinorStatus: 'WF_DNS_AUTH', Progress: 25 });
        expect(o.Fulfillment.Certificate).toBe(oldCert);
        // Reissue again while pending: replaced (ReissueEmail switches to EMAIL), still REISSUE, the mail in the outbox.
        expect(
          (
            await reissue({
              ServiceOrderID: placed.ServiceOrderID,
              OrderParameters: { CSR: ecCsr, SignatureHashAlgorithm: 'SHA256-ECC-HYBRID' },
              ReissueEmail: 'admin@certdesk-test.com',
            })
          ).json(),
        ).toMatchObject({ success: true });
        o = await info(placed.ServiceOrderID);
        expect(o.OrderStatus).toMatchObject({ MajorStatus: 'REISSUE', MinorStatus: 'WF_EMAIL_AUTH' });
        expect((await t.services.mailRepo.list({ limit: 10, orderId: placed.ServiceOrderID }))[0]).toMatchObject({
          to: 'admin@certdesk-test.com',
          kind: 'dcv.approval',
        });
        // Back to DNS, and the record published: the worker issues the new certificate.
        await reissue({
          ServiceOrderID: placed.ServiceOrderID,
          OrderParameters: { CSR: ecCsr, DVAuthMethod: 'DNS', SignatureHashAlgorithm: 'SHA256-ECC-HYBRID' },
        });
        const value = (
          await t.call(await token(), {
            method: 'POST',
            url: '/rest/v1/DNSData',
            payload: { CSR: ecCsr, ProductCode: 'TrustPoint.DV' },
          })
        ).json().DNSAuthDetails.DNSValue as string;
        dns.set('certdesk-test.com', [{ type: 'TXT', data: value }]);
        const job = (
          await t.db.kysely
            .selectFrom('jobs')
            .select('id')
            .where('unique_key', '=', `order:${placed.ServiceOrderID}`)
            .executeTakeFirstOrThrow()
        ).id;
        await t.services.orderFlow.validate({ orderId: placed.ServiceOrderID }, { id: job as never });
        o = await info(placed.ServiceOrderID);
        expect(o.OrderStatus.MajorStatus).toBe('COMPLETE');
        expect(o.Fulfillment.Certificate).not.toBe(oldCert);
        writeFileSync(join(dir, 'reissued.pem'), o.Fulfillment.Certificate);
        expect(
          spawnSync('openssl', ['x509', '-noout', '-text', '-in', join(dir, 'reissued.pem')], { encoding: 'utf8' })
            .stdout,
        ).toContain('id-ecPublicKey');
      });
      dns.set('certdesk-test.com', [
        {
          type: 'TXT',
          data: (
            await t.call(await token(), {
              method: 'POST',
              url: '/rest/v1/DNSData',
              payload: { CSR: testCsr().pem, ProductCode: 'TrustPoint.DV' },
            })
          ).json().DNSAuthDetails.DNSValue,
        },
      ]);
      expect(await charges(placed.ServiceOrderID)).toBe(1);
    });

    // DESIGN §5.2: DomainApprovers as {DomainApprover:[…]} or a bare array, Approvers as objects or
    // strings, keyed by a name or by its registered domain — the same shapes POST /Order takes.
    it.each([
      [
        'the object shape with {ApproverEmail} objects',
        {
          DomainApprover: [
            {
              Domain: 'www.certdesk-test.com',
              Approvers: [{ ApproverEmail: 'admin@certdesk-test.com', ApproverType: 'Generic' }],
            },
            { Domain: 'certdesk-test.com', Approvers: [{ ApproverEmail: 'hostmaster@certdesk-test.com' }] },
          ],
        },
        ['admin@certdesk-test.com', 'hostmaster@certdesk-test.com'],
      ],
      [
        'a bare array with Approvers as a string',
        [
          { Domain: 'www.certdesk-test.com', Approvers: 'webmaster@certdesk-test.com' },
          { Domain: 'certdesk-test.com', Approvers: 'postmaster@certdesk-test.com' },
        ],
        ['webmaster@certdesk-test.com', 'postmaster@certdesk-test.com'],
      ],
      [
        'a bare array with string approvers',
        [
          { Domain: 'www.certdesk-test.com', Approvers: ['administrator@certdesk-test.com'] },
          { Domain: 'certdesk-test.com', Approvers: ['admin@certdesk-test.com'] },
        ],
        ['administrator@certdesk-test.com', 'admin@certdesk-test.com'],
      ],
      [
        'one item keyed by the registered domain',
        [{ Domain: 'certdesk-test.com', Approvers: ['hostmaster@certdesk-test.com'] }],
        ['hostmaster@certdesk-test.com', 'hostmaster@certdesk-test.com'],
      ],
    ])('ok/a reissue by EMAIL takes DomainApprovers as %s', async (_shape, domainApprovers, approvers) => {
      const placed = await place();
      await at(201 * DAY, async () => {
        const res = await reissue({
          ServiceOrderID: placed.ServiceOrderID,
          OrderParameters: { DVAuthMethod: 'EMAIL', DomainApprovers: domainApprovers },
        });
        expect(res.statusCode, res.body).toBe(200);
        const o = (
          await t.call(await token(), {
            method: 'GET',
            url: `/rest/v1/Order/${placed.ServiceOrderID}?includeDCVStatus=true`,
          })
        ).json().OrderInfo;
        expect(o.OrderStatus).toMatchObject({ MajorStatus: 'REISSUE', MinorStatus: 'WF_EMAIL_AUTH' });
        expect(o.DCVStatus.map((d: { Domain: string; ApproverEmail: string }) => [d.Domain, d.ApproverEmail])).toEqual([
          ['www.certdesk-test.com', approvers[0]],
          ['certdesk-test.com', approvers[1]],
        ]);
      });
      // The reissue made a new DCV value (the old one had expired): the record the next orders find.
      dns.set('certdesk-test.com', [
        {
          type: 'TXT',
          data: (
            await t.call(await token(), {
              method: 'POST',
              url: '/rest/v1/DNSData',
              payload: { CSR: testCsr().pem, ProductCode: 'TrustPoint.DV' },
            })
          ).json().DNSAuthDetails.DNSValue,
        },
      ]);
    });

    it('fail/more SANs than paid for, a chain the brand does not offer, a bad CSR: every fault at once, nothing changes', async () => {
      const placed = await place();
      const res = await reissue({
        ServiceOrderID: String(placed.ServiceOrderID),
        OrderParameters: {
          SubjectAltNames: ['shop.certdesk-test.com'],
          SignatureHashAlgorithm: 'SHA256-ECC-FULL',
          DVAuthMethod: 'CARRIER-PIGEON',
        },
      });
      expect(res.statusCode).toBe(417);
      expect(res.json().Errors.map((e: { ErrorField: string }) => e.ErrorField)).toEqual(
        expect.arrayContaining(['SubjectAltNames', 'SignatureHashAlgorithm', 'DVAuthMethod']),
      );
      const badCsr = await reissue({ ServiceOrderID: placed.ServiceOrderID, OrderParameters: { CSR: 'garbage' } });
      expect(badCsr.json()).toMatchObject({ success: false, ErrorField: 'CSR' });
      expect((await info(placed.ServiceOrderID)).OrderStatus.MajorStatus).toBe('COMPLETE');
      expect(await serials(placed.ServiceOrderID)).toHaveLength(1);
    });
  });

  describe('notifications by mail (the outbox; SMTP when configured)', () => {
    const kinds = async (id: number) =>
      (await t.services.mailRepo.list({ limit: 100, orderId: id })).map((m) => m.kind).reverse();

    it("ok/issued, revoked and cancelled mails go to the order's contacts", async () => {
      const a = await place();
      const b = await place();
      await t.call(await token(), {
        method: 'DELETE',
        url: `/rest/v1/Revoke/${a.ServiceOrderID}`,
        payload: { RevokeReason: 'superseded', Certificate: a.Fulfillment!.Certificate },
      });
      await cancel(b.ServiceOrderID);
      expect(await kinds(a.ServiceOrderID)).toEqual(['order.issued', 'order.revoked']);
      expect(await kinds(b.ServiceOrderID)).toEqual(['order.issued', 'order.cancelled']);
      expect((await t.services.mailRepo.list({ limit: 1, orderId: b.ServiceOrderID }))[0]).toMatchObject({
        to: 'ada@certdesk-test.com',
        subject: expect.stringMatching(/was cancelled/),
      });
    });

    it('ok/expiry reminders at 30, 7 and 1 days, each once; DCV reminders for waiting orders, once per step', async () => {
      const free = await place({ ProductCode: 'TrustPoint.FreeDV', ValidityPeriod: 180 });
      const row = await t.db.kysely
        .selectFrom('orders')
        .select(['cert_not_after', 'term_end'])
        .where('id', '=', free.ServiceOrderID)
        .executeTakeFirstOrThrow();
      expect(row.cert_not_after).toBe(row.term_end);
      for (const [daysLeft, kind] of [
        [29, 'reminder.expiry.30d'],
        [6, 'reminder.expiry.7d'],
        [1, 'reminder.expiry.1d'],
      ] as const) {
        await at(row.cert_not_after! - t.clock.nowSeconds() - daysLeft * DAY, async () => {
          await t.services.notifier.sendReminders();
          await t.services.notifier.sendReminders();
        });
        expect((await kinds(free.ServiceOrderID)).filter((k) => k === kind)).toHaveLength(1);
      }
      dns.set('certdesk-test.com', []);
      const waiting = await place();
      await at(4 * DAY, async () => {
        await t.services.notifier.sendReminders();
        await t.services.notifier.sendReminders();
      });
      expect((await kinds(waiting.ServiceOrderID)).filter((k) => k.startsWith('reminder.dcv.'))).toHaveLength(1);
      dns.set('certdesk-test.com', [
        {
          type: 'TXT',
          data: (
            await t.call(await token(), {
              method: 'POST',
              url: '/rest/v1/DNSData',
              payload: { CSR: testCsr().pem, ProductCode: 'TrustPoint.DV' },
            })
          ).json().DNSAuthDetails.DNSValue,
        },
      ]);
    });
  });

  describe('concurrency', () => {
    it('ok/cancel and issuance racing end in one consistent state with one charge or one refund', async () => {
      for (let round = 0; round < 5; round++) {
        dns.set('certdesk-test.com', []);
        const placed = await place();
        // The order is about to be signed: names shown, waiting for issuance.
        await t.db.kysely
          .updateTable('order_names')
          .set({ status: 'VALIDATED' })
          .where('order_id', '=', placed.ServiceOrderID)
          .execute();
        await t.db.kysely
          .updateTable('orders')
          .set({ minor_status: 'WF_ISSUANCE' })
          .where('id', '=', placed.ServiceOrderID)
          .execute();
        const order = (
          await t.services.orderReads.getOrder(
            (await t.services.oauth.authenticate(await token()))!,
            placed.ServiceOrderID,
          )
        ).order;
        const [cancelled, issued] = await Promise.allSettled([
          cancel(placed.ServiceOrderID),
          t.services.orderFlow.issue(order),
        ]);
        expect(issued.status).toBe('fulfilled');
        const o = await info(placed.ServiceOrderID);
        const n = await refunds(placed.ServiceOrderID);
        const certs = await revokedAt(placed.ServiceOrderID);
        if (o.OrderStatus.MajorStatus === 'CANCELLED') {
          expect(n).toBe(1);
          expect(certs.every((r) => r !== null)).toBe(true);
        } else {
          expect(o.OrderStatus.MajorStatus).toBe('COMPLETE');
          expect(n).toBe(0);
          expect(cancelled.status === 'fulfilled' && cancelled.value.statusCode).toBe(409);
          expect(certs).toEqual([null]);
        }
      }
      dns.set('certdesk-test.com', [
        {
          type: 'TXT',
          data: (
            await t.call(await token(), {
              method: 'POST',
              url: '/rest/v1/DNSData',
              payload: { CSR: testCsr().pem, ProductCode: 'TrustPoint.DV' },
            })
          ).json().DNSAuthDetails.DNSValue,
        },
      ]);
    }, 60_000);
  });

  it('ok/every cancel and revoke bumps UpdateDate, so /ModifiedOrders reports it', async () => {
    const placed = await place();
    const fmt = (s: number) => new Date(s * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
    await at(5 * DAY, async () => {
      await cancel(placed.ServiceOrderID);
      const now = t.clock.nowSeconds();
      const ids = (
        await t.call(await token(), {
          method: 'GET',
          url: `/rest/v1/ModifiedOrders?FromDate=${fmt(now)}&ToDate=${fmt(now + 1)}`,
        })
      )
        .json()
        .OrderInfos.map((x: { ServiceOrderID: number }) => x.ServiceOrderID);
      expect(ids).toEqual([placed.ServiceOrderID]);
    });
  });

  describe('CA distrust (last: it changes the hierarchy)', () => {
    it('ok/orders on a distrusted issuer show scheduledForReplacement and match filterScheduledToReplace; a reissue moves them to a trusted issuer', async () => {
      const onRsa = await place();
      const ecCsr = newEcCsr();
      const value = (
        await t.call(await token(), {
          method: 'POST',
          url: '/rest/v1/DNSData',
          payload: { CSR: ecCsr, ProductCode: 'TrustPoint.DV' },
        })
      ).json().DNSAuthDetails.DNSValue as string;
      dns.set('certdesk-test.com', [{ type: 'TXT', data: value }]);
      const onEcc = await place({ CSR: ecCsr, SignatureHashAlgorithm: 'SHA256-ECC-HYBRID' });
      const phase1 = Date.parse('2027-01-15T00:00:00Z') / 1000;
      const phase2 = Date.parse('2027-04-15T00:00:00Z') / 1000;
      await t.services.ca.distrust('trustpoint-rsa-int-1', phase1, phase2);
      expect(await t.services.ca.init({ rsaRootBits: 2048, rsaIntermediateBits: 2048 })).toEqual([
        'trustpoint-rsa-int-2',
      ]);

      const o = await info(onRsa.ServiceOrderID);
      expect(o.scheduledForReplacement).toEqual({
        eventCaDistrust: { Phase1: '2027-01-15T00:00:00Z', Phase2: '2027-04-15T00:00:00Z' },
      });
      expect(await info(onEcc.ServiceOrderID)).not.toHaveProperty('scheduledForReplacement');
      const listed = (
        await t.call(await token(), {
          method: 'GET',
          url: '/rest/v1/Orders?filterScheduledToReplace=true&ItemsPerPage=1000',
        })
      )
        .json()
        .OrderInfos.map((x: { ServiceOrderID: number }) => x.ServiceOrderID);
      expect(listed).toContain(onRsa.ServiceOrderID);
      expect(listed).not.toContain(onEcc.ServiceOrderID);

      dns.set('certdesk-test.com', [
        {
          type: 'TXT',
          data: (
            await t.call(await token(), {
              method: 'POST',
              url: '/rest/v1/DNSData',
              payload: { CSR: testCsr().pem, ProductCode: 'TrustPoint.DV' },
            })
          ).json().DNSAuthDetails.DNSValue,
        },
      ]);
      expect(
        (
          await t.call(await token(), {
            method: 'POST',
            url: '/rest/v1/Reissue',
            payload: { ServiceOrderID: onRsa.ServiceOrderID },
          })
        ).json(),
      ).toMatchObject({ success: true });
      const moved = await info(onRsa.ServiceOrderID);
      expect(moved.OrderStatus.MajorStatus).toBe('COMPLETE');
      expect(moved).not.toHaveProperty('scheduledForReplacement');
      expect(moved.Fulfillment.Intermediate).toContain(
        t.services.ca
          .list()
          .find((x) => x.id === 'trustpoint-rsa-int-2')!
          .pem.trim()
          .split('\n')[1],
      );
      writeFileSync(join(dir, 'moved.pem'), moved.Fulfillment.Certificate);
      writeFileSync(join(dir, 'moved-int.pem'), moved.Fulfillment.Intermediate);
      writeFileSync(join(dir, 'moved-root.pem'), t.services.ca.chain('TrustPoint', 'SHA256-FULL-CHAIN').root);
      expect(
        spawnSync(
          'openssl',
          [
            'verify',
            '-CAfile',
            join(dir, 'moved-root.pem'),
            '-untrusted',
            join(dir, 'moved-int.pem'),
            join(dir, 'moved.pem'),
          ],
          { encoding: 'utf8' },
        ).stdout,
      ).toContain(': OK');
      const after = (
        await t.call(await token(), {
          method: 'GET',
          url: '/rest/v1/Orders?filterScheduledToReplace=true&ItemsPerPage=1000',
        })
      )
        .json()
        .OrderInfos.map((x: { ServiceOrderID: number }) => x.ServiceOrderID);
      expect(after).not.toContain(onRsa.ServiceOrderID);
    });
  });
});
