// A server under test, run in its own process: `node --import tsx bench/server.ts <baseline|certdesk> [setup]`.
// Started by bench/run.ts with fork(): it listens on 127.0.0.1:0 and reports its port over IPC.
// The certdesk server is the real one (createServices + createWebApp over a fresh SQLite file,
// or a fresh PostgreSQL database for setup `ordersPg`); the baseline is a bare Fastify 5 app with
// one JSON route. What a certdesk child prepares before it is ready depends on its setup
// (bench/protocol.ts). Exits on SIGTERM/SIGINT or when the parent goes away (IPC disconnect),
// removing its temporary data (and its PostgreSQL database).
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import Fastify from 'fastify';
import { loadConfig } from '../src/config/index.js';
import { X509Certificate } from 'node:crypto';
import { checkCsr } from '../src/ca/index.js';
import { certIdFor } from '../src/ca/ocsp.js';
import { seq } from '../src/ca/der-writer.js';
import { children, readTlv } from '../src/core/der.js';
import { createServices, createWebApp, type Services } from '../src/main.js';
import type { App } from '../src/web/types.js';
import { generateKeyAndCsr } from '../src/ra/tools/keygen.js';
import { scratchPostgresDatabase } from '../test/support/databases.js';
import { startDnsChild, type DnsChild } from './dns-child.js';
import type { ChildFixtures, ChildMessage, ParentMessage, ServerKind, ServerSetup } from './protocol.js';
import { BENCH_ORDERS, BENCH_ORDERS_SMALL, modifiedWindow, seedOrders } from './seed-orders.js';
import { ORDER_INLINE_PRODUCT, benchDatabaseUrl, orderInlineBody } from './targets.js';

/** High enough that the limiter never refuses a benchmark request; it still runs on each one. */
const BENCH_RATE_LIMIT = '100000000';
const SETUPS: readonly ServerSetup[] = ['plain', 'orders', 'ordersPg', 'orders1m', 'orders10k', 'vouchers'];
/** Vouchers the `vouchers` setup makes: more than the redeem target can use in a bench run. */
const BENCH_VOUCHERS = Number(process.env.BENCH_VOUCHERS ?? 40_000);

interface Running {
  port: number;
  credentials?: { clientId: string; clientSecret: string };
  fixtures: ChildFixtures;
  /** The CPU time of the child's DNS server process, when it has one. */
  dnsCpuMicros?: () => Promise<number>;
  close(): Promise<void>;
}

async function startBaseline(): Promise<Running> {
  const app = Fastify({ logger: false });
  app.get('/', async () => ({ hello: 'world' }));
  await app.listen({ host: '127.0.0.1', port: 0 });
  return { port: portOf(app.server.address()), fixtures: {}, close: () => app.close() };
}

/** Things to undo on close, last first. */
type Cleanup = (() => Promise<void> | void)[];

async function runCleanup(cleanup: Cleanup): Promise<void> {
  let failure: unknown;
  for (const step of cleanup.reverse()) {
    try {
      await step();
    } catch (e) {
      failure ??= e;
    }
  }
  if (failure !== undefined) throw failure;
}

async function startCertdesk(setup: ServerSetup): Promise<Running> {
  const cleanup: Cleanup = [];
  try {
    const dataDir = mkdtempSync(join(tmpdir(), 'certdesk-bench-'));
    cleanup.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const env: Record<string, string> = {
      CERTDESK_DATA_DIR: dataDir,
      CERTDESK_RATE_LIMIT: BENCH_RATE_LIMIT,
      CERTDESK_RATE_LIMIT_ANONYMOUS: BENCH_RATE_LIMIT,
    };
    let dns: DnsChild | undefined;
    if (setup === 'orders' || setup === 'ordersPg' || setup === 'vouchers') {
      // A real DNS server on loopback, in a process of its own as a resolver would be (its CPU is
      // reported on its own: "DNS server CPU").
      dns = await startDnsChild();
      cleanup.push(() => dns!.close());
      env.CERTDESK_DNS_SERVERS = dns.address;
    }
    if (setup === 'ordersPg') {
      const db = await createPgDatabase();
      cleanup.push(db.drop);
      env.CERTDESK_DATABASE_URL = db.url;
    }
    const services = await createServices(loadConfig(env));
    cleanup.push(() => services.close());
    const app = await createWebApp(services, false);
    cleanup.push(() => app.close());
    const created = await services.accounts.createCustomer({
      name: 'Bench Customer',
      email: 'ops@bench.example',
      currency: 'EUR',
      creditLimit: 5000,
      country: 'DE',
      locale: 'de_DE',
      timezone: 'Europe/Berlin',
    });
    const credentials = { clientId: created.application.clientId, clientSecret: created.clientSecret };
    const fixtures: { -readonly [K in keyof ChildFixtures]: ChildFixtures[K] } = {
      ocspPath: await ocspFixture(services),
      database: services.db.dialect,
      client: credentials,
      signIn: { username: created.user.username, password: created.password },
    };
    if (dns !== undefined) fixtures.orderId = await orderFixture(app, services, dns, credentials, created.customer.id);
    if (setup === 'vouchers') fixtures.voucherCodes = await voucherFixture(services, credentials, BENCH_VOUCHERS);
    if (setup === 'orders1m' || setup === 'orders10k') {
      const csrPem = benchCsr();
      const t0 = performance.now();
      const seeded = await seedOrders(services.db, {
        customerId: created.customer.id,
        count: setup === 'orders1m' ? BENCH_ORDERS : BENCH_ORDERS_SMALL,
        now: services.clock.nowSeconds(),
        csrPem,
      });
      const seconds = (performance.now() - t0) / 1000;
      const dbFile = join(dataDir, 'certdesk.db');
      const dbBytes = statSync(dbFile).size + (statSync(`${dbFile}-wal`, { throwIfNoEntry: false })?.size ?? 0);
      fixtures.seeded = {
        orders: seeded.orders,
        names: seeded.names,
        seconds: Math.round(seconds * 10) / 10,
        dbBytes,
      };
      fixtures.modifiedWindow = await modifiedWindow(services.db, created.customer.id, 100);
      fixtures.probeCommonName = seeded.probeCommonName;
    }
    await app.listen({ host: '127.0.0.1', port: 0 });
    return {
      port: portOf(app.server.address()),
      credentials,
      fixtures,
      ...(dns === undefined ? {} : { dnsCpuMicros: dns.cpuMicros }),
      close: () => runCleanup(cleanup),
    };
  } catch (e) {
    await runCleanup(cleanup).catch(() => undefined);
    throw e;
  }
}

/** `count` vouchers of the bench customer for the inline-issuance product (free: nothing reserved), made through the RA. */
async function voucherFixture(
  services: Services,
  c: { clientId: string; clientSecret: string },
  count: number,
): Promise<string[]> {
  const token = await services.oauth.token(
    { grantType: 'client_credentials', clientId: c.clientId, clientSecret: c.clientSecret },
    null,
  );
  const principal = await services.oauth.authenticate(token.access_token);
  if (principal === undefined) throw new Error('the bench token does not authenticate');
  const actor = { principal, clientAddress: null };
  const terms = {
    OrderParameters: { ProductCode: ORDER_INLINE_PRODUCT.code, ValidityPeriod: ORDER_INLINE_PRODUCT.validityPeriod },
  };
  const codes: string[] = [];
  for (let i = 0; i < count; i++) codes.push((await services.vouchers.create(actor, terms)).code);
  return codes;
}

function benchCsr(): string {
  const pem = process.env.BENCH_CSR_PEM;
  if (pem === undefined || !pem.includes('CERTIFICATE REQUEST'))
    throw new Error('BENCH_CSR_PEM is not set (bench/run.ts passes the bench CSR)');
  return pem;
}

/**
 * The bench customer's DNS proof for the bench CSR (POST /DNSData, as a client would ask for it)
 * published in the loopback DNS server, the free product's price checked (0: the credit limit
 * does not matter), and one order placed: it must be issued inline. Returns its id.
 */
async function orderFixture(
  app: App,
  services: Services,
  dns: DnsChild,
  c: { clientId: string; clientSecret: string },
  customerId: number,
): Promise<number> {
  const csrPem = benchCsr();
  const call = async (method: 'GET' | 'POST', url: string, token?: string, payload?: object) => {
    const res = await app.inject({
      method,
      url,
      ...(token === undefined ? {} : { headers: { authorization: `Bearer ${token}` } }),
      ...(payload === undefined ? {} : { payload }),
    });
    if (res.statusCode !== 200) throw new Error(`${method} ${url}: HTTP ${res.statusCode} ${res.body}`);
    return res.json() as Record<string, unknown>;
  };
  const token = (
    await call('POST', '/oauth2/token', undefined, {
      grant_type: 'client_credentials',
      client_id: c.clientId,
      client_secret: c.clientSecret,
    })
  ).access_token as string;
  const dnsData = await call('POST', '/rest/v1/DNSData', token, {
    CSR: csrPem,
    ProductCode: ORDER_INLINE_PRODUCT.code,
  });
  const details = dnsData.DNSAuthDetails as { PointerType: string; DNSValue: string; FQDNs: string[] };
  if (details.PointerType !== 'TXT')
    throw new Error(`expected a TXT proof for ${ORDER_INLINE_PRODUCT.code}, got ${JSON.stringify(details)}`);
  for (const name of details.FQDNs) await dns.set(name, [{ type: 'TXT', data: details.DNSValue }]);

  const quote = await call(
    'GET',
    `/rest/v1/Quote?ProductCode=${ORDER_INLINE_PRODUCT.code}&ValidityPeriod=${ORDER_INLINE_PRODUCT.validityPeriod}`,
    token,
  );
  if (typeof quote.Price !== 'number') throw new Error(`GET /Quote: no Price in ${JSON.stringify(quote)}`);
  if (quote.Price > 0) {
    // Not free (a changed catalog): a limit no bench run can reach.
    await services.db.kysely
      .updateTable('customers')
      .set({ credit_limit_minor: 1e15 })
      .where('id', '=', customerId)
      .execute();
  }

  const placed = await call('POST', '/rest/v1/Order', token, JSON.parse(orderInlineBody(csrPem)) as object);
  if ((placed.Fulfillment as { Certificate?: unknown } | undefined)?.Certificate === undefined) {
    throw new Error(`the first order was not issued inline: ${JSON.stringify(placed).slice(0, 500)}`);
  }
  return placed.ServiceOrderID as number;
}

/**
 * A fresh database on the server of CERTDESK_BENCH_DATABASE_URL (or CERTDESK_TEST_DATABASE_URL),
 * dropped by `drop` (as test/support/databases.ts does: wait for the pool's connections to go).
 */
async function createPgDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  const url = benchDatabaseUrl();
  if (url === undefined)
    throw new Error('setup ordersPg needs CERTDESK_BENCH_DATABASE_URL or CERTDESK_TEST_DATABASE_URL');
  return scratchPostgresDatabase(url, 'certdesk_bench');
}

/** Makes the CA (small RSA keys: only the OCSP answer is measured), issues one leaf and returns its OCSP GET path. */
async function ocspFixture(services: Services): Promise<string> {
  await services.ca.init({ rsaRootBits: 2048, rsaIntermediateBits: 2048 });
  const { csrPem } = await generateKeyAndCsr('ocsp.certdesk-bench.com');
  const leaf = await services.ca.issue({
    csr: checkCsr(csrPem),
    product: { code: 'TrustPoint.DV', brand: 'TrustPoint', type: 'SSL', validationLevel: 'DV' },
    dnsNames: ['ocsp.certdesk-bench.com'],
  });
  const issuer = new X509Certificate(leaf.intermediate);
  const certId = certIdFor(
    subjectDer(issuer.raw),
    issuer.publicKey.export({ type: 'spki', format: 'der' }),
    Buffer.from(leaf.serial, 'hex'),
  );
  // OCSPRequest { TBSRequest { requestList { Request { CertID } } } }
  const request = seq(seq(seq(seq(certId))));
  return `/ocsp/${encodeURIComponent(Buffer.from(request).toString('base64'))}`;
}

/** The subject Name (DER) of a certificate. */
function subjectDer(der: Uint8Array): Uint8Array {
  const [tbs] = children(der, readTlv(der, 0));
  const fields = children(der, tbs!);
  const subject = fields[fields[0]!.tag === 0xa0 ? 5 : 4]!;
  return der.subarray(subject.start, subject.end);
}

function portOf(address: AddressInfo | string | null): number {
  if (address === null || typeof address === 'string') throw new Error(`unexpected listen address: ${String(address)}`);
  return address.port;
}

function send(message: ChildMessage): void {
  if (process.connected) process.send?.(message);
}

async function main(): Promise<void> {
  const kind = process.argv[2] as ServerKind | undefined;
  const setup = (process.argv[3] ?? 'plain') as ServerSetup;
  if ((kind !== 'baseline' && kind !== 'certdesk') || !SETUPS.includes(setup)) {
    throw new Error(
      `usage: server.ts <baseline|certdesk> [${SETUPS.join('|')}] (got ${process.argv.slice(2).join(' ')})`,
    );
  }
  if (process.send === undefined) throw new Error('server.ts is started by bench/run.ts (it needs an IPC channel)');

  // Stop requests may come while the server is still starting: they wait for the start.
  const starting = kind === 'baseline' ? startBaseline() : startCertdesk(setup);
  let profiler: Session | undefined;
  let stopping: Promise<void> | undefined;
  const stop = (code: number) => {
    stopping ??= (async () => {
      try {
        profiler?.disconnect();
        await (await starting).close();
      } catch (e) {
        process.stderr.write(`bench server: stop failed: ${(e as Error).stack ?? String(e)}\n`);
        code = 1;
      } finally {
        process.exit(code);
      }
    })();
    return stopping;
  };
  process.once('SIGTERM', () => void stop(0));
  process.once('SIGINT', () => void stop(0));
  process.once('disconnect', () => void stop(0));

  process.on('message', (message: ParentMessage) => {
    void (async () => {
      try {
        switch (message.type) {
          case 'usage': {
            const cpu = process.cpuUsage();
            const elu = performance.eventLoopUtilization();
            const dnsCpuMicros = (await (await starting).dnsCpuMicros?.()) ?? 0;
            send({
              type: 'usage',
              id: message.id,
              cpuMicros: cpu.user + cpu.system,
              dnsCpuMicros,
              eluActive: elu.active,
              eluIdle: elu.idle,
            });
            break;
          }
          case 'profile-start':
            profiler = new Session();
            profiler.connect();
            await profiler.post('Profiler.enable');
            await profiler.post('Profiler.setSamplingInterval', { interval: 200 });
            await profiler.post('Profiler.start');
            send({ type: 'ack', id: message.id });
            break;
          case 'profile-stop': {
            if (profiler === undefined) throw new Error('the profiler was not started');
            const { profile } = await profiler.post('Profiler.stop');
            writeFileSync(message.file, JSON.stringify(profile));
            profiler.disconnect();
            profiler = undefined;
            send({ type: 'ack', id: message.id });
            break;
          }
        }
      } catch (e) {
        send({ type: 'error', id: 'id' in message ? message.id : undefined, message: (e as Error).stack ?? String(e) });
      }
    })();
  });

  const running = await starting;
  if (stopping === undefined) {
    send({
      type: 'ready',
      port: running.port,
      ...(running.credentials === undefined ? {} : { credentials: running.credentials }),
      fixtures: running.fixtures,
    });
  }
}

main().catch((e: unknown) => {
  process.stderr.write(`bench server failed: ${(e as Error).stack ?? String(e)}\n`);
  process.exit(1);
});
