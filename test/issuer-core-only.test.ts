// An order end to end through an issuer that offers only the core calls (issue, revoke), as an
// upstream CA would: no records of its own, no chain rebuilding, no distrust marks. The RA records
// the certificate under the issuance claim and serves the Fulfillment from its record. The
// issuer is our seam; the CA behind it is the openssl CLI.
import { X509Certificate, randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { IssueRequest, IssuedCertificate, Issuer, RevocationResult } from '../src/ca/index.js';
import { createTestContext, type TestContext, type TestCustomer } from './support/app.js';
import { testCsr } from './support/csr.js';
import { testDialects } from './support/databases.js';
import { startDnsServer, type TestDnsServer } from './support/dns-server.js';
import { OpensslCa } from './support/openssl-ca.js';
import { allowMail, refuseMail } from './support/refusals.js';

const contact = { FirstName: 'Ada', LastName: 'Lovelace', Phone: '+49 30 1234567', Email: 'ada@certdesk-test.com' };

/** Issue and revoke, nothing else: signs with `openssl x509 -req` from the fixture's intermediate. */
class OpensslIssuer implements Issuer {
  readonly revoked = new Map<string, string>();
  readonly issued: string[] = [];
  constructor(private readonly ca: OpensslCa) {}

  async issue(request: IssueRequest): Promise<IssuedCertificate> {
    const name = `leaf-${randomBytes(4).toString('hex')}`;
    writeFileSync(this.ca.path(`${name}.csr.der`), request.csr.der);
    const sans = (request.dnsNames ?? []).map((n) => `DNS:${n}`).join(',');
    writeFileSync(
      this.ca.path(`${name}.ext`),
      `basicConstraints = CA:FALSE\nkeyUsage = critical,digitalSignature,keyEncipherment\nextendedKeyUsage = serverAuth\nsubjectAltName = ${sans}\n`,
    );
    const serial = `0x${randomBytes(12).toString('hex')}`;
    this.ca.openssl(
      'x509',
      '-req',
      '-inform',
      'DER',
      '-in',
      `${name}.csr.der`,
      '-CA',
      'int.pem',
      '-CAkey',
      'int.key',
      '-set_serial',
      serial,
      '-days',
      '10',
      '-extfile',
      `${name}.ext`,
      '-out',
      `${name}.pem`,
    );
    const certificate = readFileSync(this.ca.path(`${name}.pem`), 'utf8');
    const intermediate = readFileSync(this.ca.path('int.pem'), 'utf8');
    const pkcs7 = this.ca.openssl('crl2pkcs7', '-nocrl', '-certfile', `${name}.pem`, '-certfile', 'int.pem');
    const x = new X509Certificate(certificate);
    this.issued.push(x.serialNumber.toUpperCase());
    return {
      serial: x.serialNumber.toUpperCase().replace(/^(00)+(?=.)/, ''),
      issuerId: 'upstream',
      certificate,
      intermediate,
      pkcs7,
      notBefore: Math.floor(Date.parse(x.validFrom) / 1000),
      notAfter: Math.floor(Date.parse(x.validTo) / 1000),
      der: new Uint8Array(x.raw),
      chainIds: [],
    };
  }

  async revoke(serial: string, reason: string): Promise<RevocationResult> {
    const already = this.revoked.has(serial);
    if (!already) this.revoked.set(serial, reason);
    return { serial, revokedAt: 0, reason: null, alreadyRevoked: already, change: already ? 'none' : 'revoked' };
  }
}

describe.each(testDialects())('an order through an issuer with only the core calls, on $dialect', (dialect) => {
  let t: TestContext;
  let c: TestCustomer;
  let dns: TestDnsServer;
  const fixture = new OpensslCa('core-issuer-');
  let issuer: OpensslIssuer;

  beforeAll(async () => {
    fixture.setUp();
    issuer = new OpensslIssuer(fixture);
    dns = await startDnsServer();
    t = await createTestContext(
      dialect,
      { CERTDESK_DNS_SERVERS: dns.address, CERTDESK_RATE_LIMIT: '1000000' },
      { issuer },
    );
    c = await t.customer({ creditLimit: 100_000 });
    const data = await t.call(c.token, {
      method: 'POST',
      url: '/rest/v1/DNSData',
      payload: { ProductCode: 'TrustPoint.DV', CSR: testCsr().pem },
    });
    dns.set('certdesk-test.com', [
      { type: 'A', address: '127.0.0.1' },
      { type: 'TXT', data: data.json().DNSAuthDetails.DNSValue },
    ]);
  }, 120_000);
  afterAll(async () => {
    await t.close();
    await dns.close();
    fixture.cleanUp();
  });

  const place = () =>
    t.call(c.token, {
      method: 'POST',
      url: '/rest/v1/Order',
      payload: {
        OrderParameters: { ProductCode: 'TrustPoint.DV', ValidityPeriod: 12, CSR: testCsr().pem, DVAuthMethod: 'DNS' },
        AdminContact: contact,
        TechContact: contact,
      },
    });

  it('ok/issues inline, records the certificate against the order, serves the Fulfillment, revokes through the issuer', async () => {
    const placed = await place();
    expect(placed.statusCode, placed.body).toBe(200);
    const id = placed.json().ServiceOrderID as number;
    expect(issuer.issued).toHaveLength(1);

    const info = (await t.call(c.token, { method: 'GET', url: `/rest/v1/Order/${id}?includeFulfillment=true` })).json()
      .OrderInfo;
    expect(info.OrderStatus).toMatchObject({ MajorStatus: 'COMPLETE', MinorStatus: 'COMPLETED' });
    writeFileSync(fixture.path('delivered.pem'), info.Fulfillment.Certificate);
    writeFileSync(fixture.path('delivered-int.pem'), info.Fulfillment.Intermediate);
    expect(
      fixture.run('verify', '-CAfile', 'root.pem', '-untrusted', 'delivered-int.pem', 'delivered.pem').out,
    ).toContain(': OK');
    expect(info.Fulfillment.Certificate_PKCS7).toMatch(/-----BEGIN PKCS7-----/);
    expect(info.Fulfillment.EndDate ?? info.OrderStatus.EndDate).toBeTruthy();

    const rows = await t.db.kysely
      .selectFrom('certificates')
      .select(['serial', 'delivered_at', 'revoked_at', 'order_id'])
      .where('order_id', '=', id)
      .execute();
    expect(rows).toEqual([expect.objectContaining({ delivered_at: expect.any(Number), revoked_at: null })]);
    expect(await t.services.reconciliation.orphans()).toEqual([]);

    const revoke = await t.call(c.token, {
      method: 'DELETE',
      url: `/rest/v1/Revoke/${id}`,
      payload: { RevokeReason: 'key compromise', Certificate: info.Fulfillment.Certificate },
    });
    expect(revoke.statusCode, revoke.body).toBe(200);
    expect([...issuer.revoked.entries()]).toEqual([[rows[0]!.serial, 'keyCompromise']]);
  });

  it('fail/the record of an upstream revocation refused: nothing recorded here; the retry records it (the issuer, asked again, changes nothing)', async () => {
    const placed = await place();
    expect(placed.statusCode, placed.body).toBe(200);
    const id = placed.json().ServiceOrderID as number;
    const pem = placed.json().Fulfillment.Certificate as string;
    const recorded = () =>
      t.db.kysely
        .selectFrom('certificates')
        .innerJoin('orders', 'orders.id', 'certificates.order_id')
        .select(['certificates.serial', 'certificates.revoked_at', 'orders.major_status'])
        .where('certificates.order_id', '=', id)
        .executeTakeFirstOrThrow();
    const events = async () =>
      (
        await t.db.kysely
          .selectFrom('audit_events')
          .select('action')
          .where('subject', '=', String(id))
          .where('action', '=', 'order.revoked')
          .execute()
      ).length;
    const revoke = () =>
      t.call(c.token, {
        method: 'DELETE',
        url: `/rest/v1/Revoke/${id}`,
        payload: { RevokeReason: 'superseded', Certificate: pem },
      });
    await refuseMail(t.db, 'order.revoked');
    try {
      expect((await revoke()).statusCode).toBeGreaterThanOrEqual(500);
    } finally {
      await allowMail(t.db);
    }
    const refused = await recorded();
    // Revoked upstream (the issuer acts first), but neither the revocation nor the order's record of it here.
    expect(issuer.revoked.get(refused.serial)).toBe('superseded');
    expect(refused).toMatchObject({ revoked_at: null, major_status: 'COMPLETE' });
    expect(await events()).toBe(0);

    const retried = await revoke();
    expect(retried.statusCode, retried.body).toBe(200);
    expect(await recorded()).toMatchObject({ revoked_at: expect.any(Number), major_status: 'REVOKED' });
    expect(await events()).toBe(1);
    expect((await revoke()).statusCode).toBe(409);
  });
});
