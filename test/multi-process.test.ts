// Several processes, one PostgreSQL database (docs/operations.md, "Several processes"): two
// `certdesk api` and two `certdesk worker` processes under load, one of each SIGKILLed mid-load;
// rate limits shared through Redis (and per process without it); a revoked token or a changed
// role refused by every process at once, through Redis pub/sub or PostgreSQL LISTEN/NOTIFY,
// long before the principal cache's time is up; CRL and OCSP agreeing across processes.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../src/storage/index.js';
import { accountingOf } from './support/accounting.js';
import { testCsr } from './support/csr.js';
import { deploymentEnv, prepareDeployment, publishDnsProof } from './support/deployment.js';
import { dnsOrderBody } from './support/issuing-context.js';
import { scratchPostgresDatabase } from './support/databases.js';
import { startDnsServer } from './support/dns-server.js';
import { freePorts } from './support/ports.js';
import { certdesk, kill, sleep } from './support/processes.js';

const PG = process.env.CERTDESK_TEST_DATABASE_URL;
const REDIS = process.env.CERTDESK_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
if (PG === undefined || PG === '')
  console.warn('multi-process tests not run: they need PostgreSQL (CERTDESK_TEST_DATABASE_URL is not set)');
const contact = { FirstName: 'Ada', LastName: 'Lovelace', Phone: '+49 30 1234567', Email: 'ada@certdesk-test.com' };

describe.skipIf(PG === undefined || PG === '')('several processes on one PostgreSQL database', () => {
  const cleanup: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const step of cleanup.splice(0).reverse()) await step();
  });

  /** A fresh database with the CA and one customer; the environment its processes share. */
  const deployment = async (extra: Record<string, string> = {}) => {
    const dir = mkdtempSync(join(tmpdir(), 'certdesk-multi-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const database = await scratchPostgresDatabase(PG!);
    cleanup.push(() => database.drop());
    const dns = await startDnsServer();
    cleanup.push(() => dns.close());
    const env = { ...deploymentEnv(dir, database.url, dns.address), ...extra };
    const prepared = await prepareDeployment(env, 'Multi');
    const first = await prepared.token();
    const second = await prepared.token();
    await prepared.services.close();
    /** `count` API processes, ready. */
    const apis = async (count: number, more: Record<string, string> = {}) => {
      const ports = await freePorts(count);
      const started = ports.map((port) => {
        const base = `http://127.0.0.1:${port}`;
        const p = certdesk(
          'api',
          { ...env, ...more, CERTDESK_PORT: String(port), CERTDESK_PUBLIC_URL: base },
          `${base}/readyz`,
        );
        cleanup.push(() => kill(p.child));
        return { ...p, base };
      });
      await Promise.all(started.map((s) => s.ready));
      return started;
    };
    const workers = (count: number) =>
      Array.from({ length: count }, () => {
        const p = certdesk('worker', env);
        cleanup.push(() => kill(p.child));
        return p;
      });
    return { env, dns, database, prepared, customerId: prepared.customerId, tokens: [first, second], apis, workers };
  };

  it('2 api + 2 worker processes under load, one of each SIGKILLed: every accepted order once, one live certificate, exact credit, no dead job', async () => {
    const d = await deployment();
    const [a, b] = await d.apis(2);
    const workers = d.workers(2);
    const bearer = { authorization: `Bearer ${d.tokens[0]!}`, 'content-type': 'application/json' };
    await publishDnsProof(a!.base, d.tokens[0]!, d.dns);

    // 12 clients; each sends its next order to the API it has not used last; a request that dies
    // with its process goes to the other one, unchanged (same PartnerOrderID and body).
    const ORDERS = 120;
    const accepted = new Map<string, number>();
    const dead = new Set<string>();
    let next = 0;
    let failure: Error | undefined;
    const client = async (n: number) => {
      let turn = n;
      while (next < ORDERS && failure === undefined) {
        const index = next++;
        const partnerOrderId = `multi-${index}`;
        const body = JSON.stringify(dnsOrderBody({ PartnerOrderID: partnerOrderId }));
        for (let attempt = 1; ; attempt++) {
          const live = [a!, b!].filter((s) => !dead.has(s.base));
          const api = live[turn++ % live.length]!;
          let res: Response | undefined;
          try {
            res = await fetch(`${api.base}/rest/v1/Order`, { method: 'POST', headers: bearer, body });
          } catch {
            // That process died under the request: the next attempt goes to the other one.
          }
          if (res?.status === 200) {
            accepted.set(partnerOrderId, ((await res.json()) as { ServiceOrderID: number }).ServiceOrderID);
            break;
          }
          if (res !== undefined && (res.status < 500 || attempt > 100)) {
            failure ??= new Error(`POST /Order answered ${res.status} on attempt ${attempt}: ${await res.text()}`);
            return;
          }
          await sleep(50);
        }
      }
    };
    // The workers are up (each has leased a job: the recurring ones are due at once) before the load starts.
    const probe = await openDatabase({ url: d.database.url, poolSize: 1 });
    cleanup.push(() => probe.close());
    const owners = async () =>
      (await probe.kysely.selectFrom('jobs').select('lease_owner').where('lease_owner', 'is not', null).execute()).map(
        (r) => r.lease_owner!.split(':')[1],
      );
    const started = Date.now();
    const pids = workers.map((w) => String(w.child.pid));
    for (;;) {
      const seen = await owners();
      // Both, or one of them and ten seconds (the recurring jobs may all go to the first one up).
      if (pids.every((p) => seen.includes(p)) || (seen.length > 0 && Date.now() - started > 10_000)) break;
      if (Date.now() - started > 60_000) throw new Error('the workers did not start within 60 s');
      await sleep(100);
    }
    const load = Promise.all(Array.from({ length: 12 }, (_, n) => client(n)));
    // A third of the way: one worker dies; two thirds: one API process dies (with requests in flight).
    while (accepted.size < ORDERS / 3 && failure === undefined) await sleep(5);
    // The worker that is doing the work dies (the one holding the latest lease of an order's job).
    // On a loaded machine the workers may not have taken an order's job yet: wait for one (the
    // load goes on meanwhile), so the victim is always a worker with order work in hand or done.
    const latestLease = () =>
      probe.kysely
        .selectFrom('jobs')
        .select('lease_owner')
        .where('lease_owner', 'is not', null)
        .where('name', '=', 'order.validate')
        .orderBy('updated_at', 'desc')
        .orderBy('id', 'desc')
        .limit(1)
        .executeTakeFirst();
    let latest = await latestLease();
    for (const waitingSince = Date.now(); latest === undefined && failure === undefined; latest = await latestLease()) {
      if (Date.now() - waitingSince > 60_000) throw new Error('no worker took an order.validate job within 60 s');
      await sleep(20);
    }
    if (failure !== undefined) throw failure;
    const busy = workers.findIndex((w) => latest?.lease_owner?.split(':')[1] === String(w.child.pid));
    expect(busy, `the latest lease ${latest?.lease_owner} is held by neither worker`).not.toBe(-1);
    const victim = workers[busy === -1 ? 0 : busy]!;
    const survivor = workers[busy === -1 ? 1 : 1 - busy]!;
    // Both workers are running (a worker has no listener to ask: its process must still be there).
    expect(workers.map((w) => w.child.exitCode ?? w.child.signalCode)).toEqual([null, null]);
    console.log(
      `multi-process: latest lease ${latest?.lease_owner ?? 'none'}; workers ${workers.map((w) => w.child.pid).join(', ')}`,
    );
    await kill(victim.child);
    while (accepted.size < (2 * ORDERS) / 3 && failure === undefined) await sleep(5);
    dead.add(a!.base);
    await kill(a!.child);
    await load;
    if (failure !== undefined) throw failure;
    expect(accepted.size).toBe(ORDERS);

    // The survivors finish what the dead left (their jobs and issuance claims are taken over).
    const db = await openDatabase({ url: d.database.url, poolSize: 2 });
    cleanup.push(() => db.close());
    const deadline = Date.now() + 120_000;
    for (;;) {
      const open = await db.kysely.selectFrom('orders').select('id').where('major_status', '!=', 'COMPLETE').execute();
      const busy = await db.kysely
        .selectFrom('jobs')
        .select('id')
        .where('name', '=', 'order.validate')
        .where('status', '!=', 'done')
        .execute();
      if (open.length === 0 && busy.length === 0) break;
      if (Date.now() > deadline) throw new Error(`still open: ${open.length} orders, ${busy.length} jobs`);
      await sleep(250);
    }
    const orders = await db.kysely.selectFrom('orders').select(['id', 'partner_order_id']).execute();
    expect(orders).toHaveLength(ORDERS);
    expect(new Set(orders.map((o) => o.partner_order_id))).toEqual(new Set(accepted.keys()));
    expect(new Set(orders.map((o) => Number(o.id)))).toEqual(new Set(accepted.values()));
    // Signed once per order: one issuance event each, whichever process signed.
    const issued = await db.kysely
      .selectFrom('audit_events')
      .select(['subject', (e) => e.fn.countAll<number>().as('n')])
      .where('action', '=', 'order.issued')
      .groupBy('subject')
      .execute();
    expect(issued).toHaveLength(ORDERS);
    expect(issued.filter((r) => Number(r.n) !== 1)).toEqual([]);
    const deadJobs = await db.kysely
      .selectFrom('jobs')
      .select(['name', 'last_error'])
      .where('status', '=', 'dead')
      .execute();
    expect(deadJobs).toEqual([]);
    const books = await accountingOf(db, d.customerId);
    expect(books.liveCertificatesPerOrder.filter((n) => n !== 1)).toEqual([]);
    expect(books.orphans).toEqual([]);
    expect(books.used).toBe(books.liveCharges);
    // Who ran which jobs (a job's lease owner, host:pid:…, stays on it when it is done).
    const byOwner = await db.kysely
      .selectFrom('jobs')
      .select(['name', 'lease_owner', (e) => e.fn.countAll<number>().as('n')])
      .where('lease_owner', 'is not', null)
      .groupBy(['name', 'lease_owner'])
      .execute();
    const pidOf = (owner: string | null) => owner?.split(':')[1];
    const who = (owner: string | null) =>
      pidOf(owner) === String(victim.child.pid)
        ? 'killed worker'
        : pidOf(owner) === String(survivor.child.pid)
          ? 'surviving worker'
          : 'an api process';
    console.log(
      `multi-process: ${ORDERS} orders; jobs run: ${byOwner.map((r) => `${r.name} by ${who(r.lease_owner)} ${r.n}`).join(', ')}`,
    );
    // The survivor ran jobs after the kill, and none is left to the dead one (every job is done).
    expect(byOwner.some((r) => pidOf(r.lease_owner) === String(survivor.child.pid))).toBe(true);
  }, 300_000);

  /** 40 requests with one application's token, alternating between two processes: how many were let through. */
  const admitted = async (bases: string[], token: string) => {
    let ok = 0;
    for (let i = 0; i < 40; i++) {
      const res = await fetch(`${bases[i % 2]!}/rest/v1/Profile`, { headers: { authorization: `Bearer ${token}` } });
      if (res.status === 200) ok++;
      else expect(res.status).toBe(429);
    }
    return ok;
  };

  it('rate limits: with Redis two processes share one allowance; without, each counts alone', async () => {
    const prefix = `cdt-${randomBytes(4).toString('hex')}`;
    const d = await deployment();
    const shared = await d.apis(2, {
      CERTDESK_RATE_LIMIT: '20',
      CERTDESK_REDIS_URL: REDIS,
      CERTDESK_REDIS_PREFIX: prefix,
    });
    expect(
      await admitted(
        shared.map((s) => s.base),
        d.tokens[0]!,
      ),
    ).toBe(20);
    const ready = (await (await fetch(`${shared[0]!.base}/readyz`)).json()) as { checks: Record<string, string> };
    expect(ready.checks).toEqual({ database: 'ok', redis: 'ok', broadcast: 'ok', caKeys: 'ok' });
    for (const s of shared) await kill(s.child);
    const alone = await d.apis(2, { CERTDESK_RATE_LIMIT: '20' });
    expect(
      await admitted(
        alone.map((s) => s.base),
        d.tokens[1]!,
      ),
    ).toBe(40);
  }, 120_000);

  describe.each([
    ['PostgreSQL LISTEN/NOTIFY', {}],
    ['Redis pub/sub', { CERTDESK_REDIS_URL: REDIS }],
  ] as const)('revocations reach every process at once, through %s', (_name, transport) => {
    it('a revoked token, a deactivated user and a changed role are refused by the other process within a second, not the cache time (300 s)', async () => {
      const d = await deployment();
      const [a, b] = await d.apis(2, {
        ...transport,
        CERTDESK_REDIS_PREFIX: `cdt-${randomBytes(4).toString('hex')}`,
        CERTDESK_AUTH_CACHE_SECONDS: '300',
      });
      const call = (base: string, token: string, path = '/rest/v1/Profile', init: RequestInit = {}) =>
        fetch(`${base}${path}`, {
          ...init,
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        });
      /** Polls `base` until `token` gets `status` (at most a second): the news travels, the cache's 300 s do not matter. */
      const refusedWithin = async (base: string, token: string, status: number, path = '/rest/v1/Profile') => {
        const start = Date.now();
        while ((await call(base, token, path)).status !== status) {
          if (Date.now() - start > 1000)
            throw new Error(`${base} still accepts the token after ${Date.now() - start} ms`);
          await sleep(20);
        }
        return Date.now() - start;
      };

      // A token revoked through A (RFC 7009): refused by B, which had it cached.
      const [token] = d.tokens;
      expect((await call(b!.base, token!)).status).toBe(200);
      const revoked = await fetch(`${a!.base}/oauth2/revoke`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({
          token: token!,
          client_id: d.prepared.clientId,
          client_secret: d.prepared.clientSecret,
        }).toString(),
      });
      expect(revoked.status).toBe(200);
      await refusedWithin(b!.base, token!, 401);

      // A second ADMIN with an application of its own; its token is cached by B, then the
      // person is made READONLY through A: B refuses the ADMIN-only call at once, then deactivated: 401.
      const admin = d.tokens[1]!;
      const user = await call(a!.base, admin, '/rest/v1/User', {
        method: 'POST',
        body: JSON.stringify({
          FullName: 'Bo',
          Email: 'bo@customer.example',
          Username: `bo-${randomBytes(3).toString('hex')}`,
          Password: 'Saturn-vanilla-42-drift',
          Roles: ['ADMIN'],
        }),
      });
      expect(user.status).toBe(200);
      const userId = ((await user.json()) as { Id: number }).Id;
      const app = await call(a!.base, admin, '/rest/v1/Application', {
        method: 'POST',
        body: JSON.stringify({ Name: 'bo', Scopes: ['read', 'write'], UserId: userId }),
      });
      expect(app.status).toBe(200);
      const { ClientId, ClientSecret } = (await app.json()) as { ClientId: string; ClientSecret: string };
      const grant = await fetch(`${b!.base}/oauth2/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({
          grant_type: 'client_credentials',
          client_id: ClientId,
          client_secret: ClientSecret,
        }).toString(),
      });
      const bo = ((await grant.json()) as { access_token: string }).access_token;
      expect((await call(b!.base, bo, '/rest/v1/User')).status).toBe(200);
      const demoted = await call(a!.base, admin, `/rest/v1/User/${userId}`, {
        method: 'POST',
        body: JSON.stringify({ Roles: ['READONLY'] }),
      });
      expect(demoted.status).toBe(200);
      await refusedWithin(b!.base, bo, 403, '/rest/v1/User');
      const deactivated = await call(a!.base, admin, `/rest/v1/User/${userId}`, {
        method: 'POST',
        body: JSON.stringify({ Active: false }),
      });
      expect(deactivated.status).toBe(200);
      await refusedWithin(b!.base, bo, 401);
    }, 120_000);
  });

  it('CRL and OCSP agree across processes right after a revocation made through one of them', async () => {
    const d = await deployment();
    const [a, b] = await d.apis(2);
    d.workers(1);
    const bearer = { authorization: `Bearer ${d.tokens[0]!}`, 'content-type': 'application/json' };
    const csr = testCsr();
    const dnsData = await fetch(`${a!.base}/rest/v1/DNSData`, {
      method: 'POST',
      headers: bearer,
      body: JSON.stringify({ ProductCode: 'TrustPoint.DV', CSR: csr.pem }),
    });
    d.dns.set('certdesk-test.com', [
      { type: 'A', address: '127.0.0.1' },
      {
        type: 'TXT',
        data: ((await dnsData.json()) as { DNSAuthDetails: { DNSValue: string } }).DNSAuthDetails.DNSValue,
      },
    ]);
    const placed = await fetch(`${a!.base}/rest/v1/Order`, {
      method: 'POST',
      headers: bearer,
      body: JSON.stringify({
        OrderParameters: { ProductCode: 'TrustPoint.DV', ValidityPeriod: 12, CSR: csr.pem, DVAuthMethod: 'DNS' },
        AdminContact: contact,
        TechContact: contact,
      }),
    });
    expect(placed.status).toBe(200);
    const order = (await placed.json()) as {
      ServiceOrderID: number;
      Fulfillment: { Certificate: string; Intermediate: string };
    };
    const certificate = order.Fulfillment.Certificate;
    // Both processes answer "good" first (each has now cached an OCSP response).
    const dir = mkdtempSync(join(tmpdir(), 'certdesk-ocsp-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, 'cert.pem'), certificate);
    writeFileSync(
      join(dir, 'issuer.pem'),
      order.Fulfillment.Intermediate.split(/(?<=-----END CERTIFICATE-----)/)[0]!.trim() + '\n',
    );
    const ocsp = (base: string) =>
      execFileSync(
        'openssl',
        [
          'ocsp',
          '-issuer',
          join(dir, 'issuer.pem'),
          '-cert',
          join(dir, 'cert.pem'),
          '-url',
          `${base}/ocsp`,
          '-noverify',
        ],
        { encoding: 'utf8' },
      );
    expect(ocsp(a!.base)).toMatch(/cert\.pem: good/);
    expect(ocsp(b!.base)).toMatch(/cert\.pem: good/);
    // Revoked through B: A's OCSP answer and CRL say so at once.
    const revoke = await fetch(`${b!.base}/rest/v1/Revoke/${order.ServiceOrderID}`, {
      method: 'DELETE',
      headers: bearer,
      body: JSON.stringify({ RevokeReason: 'keyCompromise', Certificate: certificate }),
    });
    expect(revoke.status, await revoke.text()).toBe(200);
    expect(ocsp(a!.base)).toMatch(/cert\.pem: revoked/);
    expect(ocsp(b!.base)).toMatch(/cert\.pem: revoked/);
    const serial = execFileSync('openssl', ['x509', '-noout', '-serial', '-in', join(dir, 'cert.pem')], {
      encoding: 'utf8',
    })
      .trim()
      .split('=')[1]!;
    for (const base of [a!.base, b!.base]) {
      const crlUrl = execFileSync(
        'openssl',
        ['x509', '-noout', '-ext', 'crlDistributionPoints', '-in', join(dir, 'cert.pem')],
        {
          encoding: 'utf8',
        },
      ).match(/URI:(\S+)/)![1]!;
      const path = new URL(crlUrl).pathname;
      const crl = Buffer.from(await (await fetch(`${base}${path}`)).arrayBuffer());
      writeFileSync(join(dir, 'crl.der'), crl);
      const text = execFileSync('openssl', ['crl', '-inform', 'DER', '-noout', '-text', '-in', join(dir, 'crl.der')], {
        encoding: 'utf8',
      });
      expect(text.replace(/\s/g, '')).toContain(`SerialNumber:${serial}`);
    }
  }, 120_000);
});
