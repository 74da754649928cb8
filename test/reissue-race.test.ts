// A reissue that replaces an order's names while "check now" (or the worker) moves the previous
// round on to issuance: the names are read, the second reissue puts a name nobody showed in their
// place under the same status (REISSUE/WF_DNS_AUTH), and the transition to WF_ISSUANCE, guarded
// by the status alone, went through: the CA signed the new, unshown name. Both databases; once
// with the window held open at the transition (deterministic), once raced as clients would.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OrdersRepo } from '../src/storage/index.js';
import { createTestContext, type TestContext, type TestCustomer } from './support/app.js';
import { testDialects } from './support/databases.js';
import { startDnsServer, type TestDnsServer } from './support/dns-server.js';
import { csrFor } from './support/csr.js';
import { ORDER_CONTACT } from './support/issuing-context.js';

/** The certificate's DNS names, as openssl reads them. */
function certificateNames(pem: string): string[] {
  const dir = mkdtempSync(join(tmpdir(), 'reissue-race-'));
  writeFileSync(join(dir, 'c.pem'), pem);
  const text = execFileSync('openssl', ['x509', '-in', join(dir, 'c.pem'), '-noout', '-ext', 'subjectAltName'], {
    encoding: 'utf8',
  });
  return [...text.matchAll(/DNS:([^,\s]+)/g)].map((m) => m[1]!);
}

describe.each(testDialects())('a reissue racing the move to issuance on $dialect', (dialect) => {
  let t: TestContext;
  let c: TestCustomer;
  let dns: TestDnsServer;
  beforeAll(async () => {
    dns = await startDnsServer();
    t = await createTestContext(dialect, { CERTDESK_DNS_SERVERS: dns.address, CERTDESK_RATE_LIMIT: '1000000' });
    c = await t.customer({ name: 'Racer', creditLimit: 1_000_000 });
  }, 60_000);
  afterAll(async () => {
    await t?.close();
    await dns?.close();
  });

  const call = (method: 'GET' | 'POST', url: string, payload?: Record<string, unknown>) =>
    t.call(c.token, { method, url: `/rest/v1${url}`, ...(payload === undefined ? {} : { payload }) });
  const valueFor = async (csr: string) =>
    (await call('POST', '/DNSData', { CSR: csr, ProductCode: 'TrustPoint.DVMultiDomain' })).json().DNSAuthDetails
      .DNSValue as string;
  const reissue = (id: number, csr: string, san: string) =>
    call('POST', '/Reissue', {
      ServiceOrderID: id,
      OrderParameters: { CSR: csr, DVAuthMethod: 'DNS', SubjectAltNames: san },
    });
  const orderInfo = async (id: number) =>
    (await call('GET', `/Order/${id}?includeFulfillment=true&includeDCVStatus=true`)).json().OrderInfo;
  /** Every certificate signed for the order, delivered or not, by its DNS names. */
  const signedNames = async (id: number) =>
    (await t.db.kysely.selectFrom('certificates').select('pem').where('order_id', '=', id).execute()).map((r) =>
      certificateNames(r.pem),
    );

  /** An issued order of `site` with one SAN, and a reissue round adding `b.<site>` with its record in place. */
  async function roundOneWaiting(site: string) {
    const csr0 = csrFor(site, [site]);
    const v0 = await valueFor(csr0);
    dns.set(site, [{ type: 'TXT', data: v0 }]);
    dns.set(`a.${site}`, [{ type: 'TXT', data: v0 }]);
    const placed = await call('POST', '/Order', {
      OrderParameters: {
        ProductCode: 'TrustPoint.DVMultiDomain',
        ValidityPeriod: 12,
        CSR: csr0,
        DVAuthMethod: 'DNS',
        SubjectAltNames: [`a.${site}`],
      },
      AdminContact: ORDER_CONTACT,
      TechContact: ORDER_CONTACT,
    });
    expect(placed.statusCode, placed.body).toBe(200);
    const id = placed.json().ServiceOrderID as number;
    return { id, ...(await nextRound(id, site)) };
  }
  /** A reissue round adding `b.<site>`, its record published; and the CSR of a round naming `victim`. */
  async function nextRound(id: number, site: string) {
    const csr1 = csrFor(site, [site]);
    const r1 = await reissue(id, csr1, `b.${site}`);
    expect(r1.statusCode, r1.body).toBe(200);
    dns.set(site, [{ type: 'TXT', data: await valueFor(csr1) }]);
    dns.set(`b.${site}`, [{ type: 'TXT', data: await valueFor(csr1) }]);
    return { csr2: csrFor(site, [site, `victim.${site.replace(/\.com$/, '-bank.com')}`]) };
  }

  it('fail/held open at the transition: the names a reissue put in place stay pending and nothing unshown is signed; shown, they issue', async () => {
    const site = `held-${dialect.dialect}.com`;
    const victim = `victim.held-${dialect.dialect}-bank.com`;
    const { id, csr2 } = await roundOneWaiting(site);
    const proto = OrdersRepo.prototype as unknown as { markAwaitingIssuance: (...a: unknown[]) => Promise<boolean> };
    const original = proto.markAwaitingIssuance;
    let reached!: () => void;
    const atGate = new Promise<void>((r) => (reached = r));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let armed = true;
    proto.markAwaitingIssuance = async function (this: unknown, ...args: unknown[]) {
      if (armed) {
        armed = false;
        reached();
        await gate;
      }
      return original.apply(this, args);
    };
    try {
      const check = call('POST', `/CheckDCV/${id}`);
      await atGate;
      const r2 = await reissue(id, csr2, victim);
      expect(r2.statusCode, r2.body).toBe(200);
      release();
      expect((await check).statusCode).toBe(200);
    } finally {
      proto.markAwaitingIssuance = original;
    }
    const info = await orderInfo(id);
    expect(info.OrderStatus).toMatchObject({ MajorStatus: 'REISSUE', MinorStatus: 'WF_DNS_AUTH' });
    for (const names of await signedNames(id)) expect(names).not.toContain(victim);
    // Shown, the round issues with the name.
    dns.set(victim, [{ type: 'TXT', data: await valueFor(csr2) }]);
    dns.set(site, [{ type: 'TXT', data: await valueFor(csr2) }]);
    expect((await call('POST', `/CheckDCV/${id}`)).statusCode).toBe(200);
    const done = await orderInfo(id);
    expect(done.OrderStatus.MajorStatus).toBe('COMPLETE');
    expect(certificateNames(done.Fulfillment.Certificate)).toContain(victim);
  }, 60_000);

  it('ok/raced as clients would (check now and a second reissue at once, 8 rounds): never a name unshown in a certificate', async () => {
    const site = `raced-${dialect.dialect}.com`;
    const victim = `victim.raced-${dialect.dialect}-bank.com`;
    const first = await roundOneWaiting(site);
    const id = first.id;
    let csr2 = first.csr2;
    for (let round = 0; round < 8; round++) {
      if (round > 0) ({ csr2 } = await nextRound(id, site));
      const [checked, reissued] = await Promise.all([call('POST', `/CheckDCV/${id}`), reissue(id, csr2, victim)]);
      expect(checked.statusCode).toBe(200);
      // The reissue lands while the round is pending (200) or after it issued (200 too: a new round).
      expect(reissued.statusCode, reissued.body).toBe(200);
      for (const names of await signedNames(id)) expect(names).not.toContain(victim);
      // Whatever won, the order waits for the victim's proof or is complete without it.
      const info = await orderInfo(id);
      if (info.OrderStatus.MajorStatus === 'COMPLETE')
        expect(certificateNames(info.Fulfillment.Certificate)).not.toContain(victim);
      else expect(info.OrderStatus.MinorStatus).toBe('WF_DNS_AUTH');
    }
  }, 120_000);
});
