// Crash under load: `certdesk serve` (API + worker in one process) is SIGKILLed again and again
// while 16 clients place orders whose DNS proof is in place (so they issue inline, racing their
// queued jobs); every fourth order is a voucher redeemed anonymously (POST /Redeem). A client whose
// request dies with the server retries the same request (same PartnerOrderID and body, as DESIGN
// §5.5 lets it; the same redemption body) until it is answered. After the last restart every
// accepted order must be COMPLETE with exactly one live certificate, every voucher redeemed once
// by the order it answered with, the reconciliation must find no certificate its order cannot
// reach, and the credit used must equal the charges.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../src/storage/index.js';
import { accountingOf } from './support/accounting.js';
import { testCsr } from './support/csr.js';
import { deploymentEnv, prepareDeployment, publishDnsProof } from './support/deployment.js';
import { scratchPostgresDatabase } from './support/databases.js';
import { startDnsServer } from './support/dns-server.js';
import { freePort } from './support/ports.js';
import { certdesk, kill, sleep } from './support/processes.js';

const contact = { FirstName: 'Ada', LastName: 'Lovelace', Phone: '+49 30 1234567', Email: 'ada@certdesk-test.com' };
const ORDERS = 200;
const AT_ONCE = 16;

interface Target {
  readonly dialect: 'sqlite' | 'postgres';
  readonly kills: number;
  create(dir: string): Promise<{ url: string; drop(): Promise<void> }>;
}

function targets(): Target[] {
  const sqlite: Target = {
    dialect: 'sqlite',
    kills: 10,
    create: async (dir) => ({ url: join(dir, 'certdesk.db'), drop: async () => undefined }),
  };
  const url = process.env.CERTDESK_TEST_DATABASE_URL;
  if (url === undefined || url === '') return [sqlite];
  return [sqlite, { dialect: 'postgres', kills: 5, create: () => scratchPostgresDatabase(url) }];
}

describe.each(targets())('certdesk serve killed again and again under load, on $dialect', (target) => {
  const cleanup: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const step of cleanup.splice(0).reverse()) await step();
  });

  it(`${ORDERS} orders, ${AT_ONCE} at a time, ${target.kills} SIGKILLs: every accepted order once, one live certificate each, exact credit`, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'certdesk-crash-load-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const database = await target.create(dir);
    cleanup.push(() => database.drop());
    const dns = await startDnsServer();
    cleanup.push(() => dns.close());
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const env = { ...deploymentEnv(dir, database.url, dns.address), CERTDESK_PORT: String(port) };

    // Step 1, here: migrate, the CA, a customer, and the DNS proof its orders will find in place.
    const { services, customerId, token: newToken } = await prepareDeployment(env, 'Crash load');
    const token = await newToken();
    // Every fourth order comes from a voucher: its price reserved now, charged when redeemed.
    const principal = (await services.oauth.authenticate(token))!;
    const voucherCodes = new Map<number, string>();
    for (let i = 0; i < ORDERS; i += 4) {
      const made = await services.vouchers.create(
        { principal, clientAddress: null },
        { OrderParameters: { ProductCode: 'TrustPoint.DV', ValidityPeriod: 12, PartnerOrderID: `load-${i}` } },
      );
      voucherCodes.set(i, made.code);
    }
    await services.close();

    // Step 2: load from 16 clients; a request that dies with the server is sent again, unchanged.
    let server = certdesk('serve', env, `${base}/readyz`);
    await server.ready;
    const bearer = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    await publishDnsProof(base, token, dns);

    // The orders are released in one batch per server life, so the number of kills does not depend on
    // how fast this machine places orders: each server is killed halfway through its batch, with the
    // rest of the batch in flight.
    const accepted = new Map<string, number>();
    const batch = Math.ceil(ORDERS / (target.kills + 1));
    let released = batch;
    let next = 0;
    let retries = 0;
    let failure: Error | undefined;
    const client = async () => {
      while (next < ORDERS && failure === undefined) {
        if (next >= released) {
          await sleep(5);
          continue;
        }
        const index = next++;
        const partnerOrderId = `load-${index}`;
        const code = voucherCodes.get(index);
        const body = JSON.stringify({
          OrderParameters: {
            ProductCode: 'TrustPoint.DV',
            ValidityPeriod: 12,
            CSR: testCsr().pem,
            DVAuthMethod: 'DNS',
            ...(code === undefined ? { PartnerOrderID: partnerOrderId } : {}),
          },
          AdminContact: contact,
          TechContact: contact,
          ...(code === undefined ? {} : { VoucherCode: code }),
        });
        const url = `${base}/rest/v1/${code === undefined ? 'Order' : 'Redeem'}`;
        const headers = code === undefined ? bearer : { 'content-type': 'application/json' };
        for (let attempt = 1; ; attempt++) {
          let res: Response | undefined;
          try {
            res = await fetch(url, { method: 'POST', headers, body });
          } catch {
            // The server died under the request: send it again once it is back.
          }
          if (res?.status === 200) {
            accepted.set(partnerOrderId, ((await res.json()) as { ServiceOrderID: number }).ServiceOrderID);
            break;
          }
          // A 5xx while the database recovers from a killed writer is retried, for a while; any other
          // answer ends the test at once (never a silent retry loop).
          // A 429 is the guessing limit: attempts cut off by a kill were counted and never forgiven
          // (all clients share one address); it is waited out like a 5xx.
          if (res !== undefined && ((res.status < 500 && res.status !== 429) || attempt > 200)) {
            failure ??= new Error(`${url} answered ${res.status} on attempt ${attempt}: ${await res.text()}`);
            return;
          }
          retries++;
          await sleep(50);
        }
      }
    };
    const load = Promise.all(Array.from({ length: AT_ONCE }, client));

    // Step 3: SIGKILL the server halfway through each batch, release the next batch, start it again.
    let kills = 0;
    while (kills < target.kills) {
      const halfway = Math.min(released - batch / 2, ORDERS);
      while (accepted.size < halfway) {
        if (failure !== undefined) throw failure;
        await sleep(5);
      }
      await sleep(Math.floor(Math.random() * 20));
      await kill(server.child);
      kills++;
      released = Math.min(released + batch, ORDERS);
      server = certdesk('serve', env, `${base}/readyz`);
      await server.ready;
    }
    released = ORDERS;
    await load;
    if (failure !== undefined) throw failure;
    const last = server;
    cleanup.push(() => kill(last.child));
    expect(kills).toBe(target.kills);
    expect(accepted.size).toBe(ORDERS);

    // Step 4: the last server finishes whatever the killed ones left (jobs and claims of dead processes are taken over).
    const db = await openDatabase({ url: database.url, poolSize: 2 });
    cleanup.push(() => db.close());
    const ids = [...accepted.values()];
    const deadline = Date.now() + 120_000;
    for (;;) {
      const open = await db.kysely
        .selectFrom('orders')
        .select(['id', 'major_status', 'minor_status'])
        .where('customer_id', '=', customerId)
        .where('major_status', '!=', 'COMPLETE')
        .execute();
      if (open.length === 0) break;
      if (Date.now() > deadline) throw new Error(`orders still open: ${JSON.stringify(open.slice(0, 5))}`);
      await sleep(250);
    }
    await kill(last.child);

    // Once each: the orders (no duplicate for a retried request), their certificates, the credit.
    const orders = await db.kysely
      .selectFrom('orders')
      .select(['id', 'partner_order_id'])
      .where('customer_id', '=', customerId)
      .execute();
    expect(orders).toHaveLength(ORDERS);
    expect(new Set(orders.map((o) => o.id))).toEqual(new Set(ids));
    expect(new Set(orders.map((o) => o.partner_order_id))).toEqual(new Set(accepted.keys()));
    // Each voucher redeemed once, by the order its redeemer was answered with.
    const vouchers = await db.kysely
      .selectFrom('vouchers')
      .select(['status', 'order_id', 'partner_order_id'])
      .execute();
    expect(vouchers).toHaveLength(voucherCodes.size);
    for (const v of vouchers) {
      expect(v.status).toBe('redeemed');
      expect(Number(v.order_id)).toBe(accepted.get(v.partner_order_id));
    }
    const books = await accountingOf(db, customerId);
    expect(books.liveCertificatesPerOrder.filter((n) => n !== 1)).toEqual([]);
    expect(books.orphans).toEqual([]);
    expect(books.used).toBe(books.liveCharges);
    expect(books.used).toBeGreaterThan(0);
    console.log(`${target.dialect}: ${ORDERS} orders, ${kills} kills, ${retries} client retries`);
  }, 600_000);
});
