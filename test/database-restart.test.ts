// PostgreSQL restarting under a running deployment: a `certdesk api` and a `certdesk worker`
// process reach the server through a real TCP relay on loopback, which closes every connection and
// refuses new ones for a while, as a restart or a failover does. While it is gone the API answers
// 503 with Retry-After (never a 500) and /readyz says so; both processes live on, log it as an
// outage (warnings, the worker once), and when it is back they carry on by themselves: the API is
// ready again, the order sent again is placed once, and the worker runs every job queued. And a
// path that goes silent instead (a NAT that forgot the flows: nothing closed, nothing answered):
// the API answers 503 within its bound on an answer, not when TCP gives up.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { openDatabase, type Db } from '../src/storage/index.js';
import { deploymentEnv, prepareDeployment, publishDnsProof } from './support/deployment.js';
import { dnsOrderBody } from './support/issuing-context.js';
import { scratchPostgresDatabase } from './support/databases.js';
import { startDnsServer, type TestDnsServer } from './support/dns-server.js';
import { freePorts } from './support/ports.js';
import { certdesk, kill, sleep } from './support/processes.js';
import { startTcpRelay, type TcpRelay } from './support/tcp-relay.js';

const PG = process.env.CERTDESK_TEST_DATABASE_URL;
if (PG === undefined || PG === '')
  console.warn('database restart test not run: it needs PostgreSQL (CERTDESK_TEST_DATABASE_URL is not set)');

describe.skipIf(PG === undefined || PG === '')('PostgreSQL restarting under an api and a worker process', () => {
  const cleanup: (() => Promise<void> | void)[] = [];
  let relay: TcpRelay;
  let dns: TestDnsServer;
  let probe: Db;
  let env: Record<string, string>;
  let token: string;

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'certdesk-restart-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const database = await scratchPostgresDatabase(PG!);
    cleanup.push(() => database.drop());
    relay = await startTcpRelay(new URL(PG!), 5432);
    cleanup.push(() => relay.close());
    dns = await startDnsServer();
    cleanup.push(() => dns.close());
    const through = new URL(database.url);
    through.host = relay.host;
    env = deploymentEnv(dir, through.toString(), dns.address, 'info');
    // Set up directly (not through the relay): the CA, a customer, a token, the DCV proof.
    const prepared = await prepareDeployment({ ...env, CERTDESK_DATABASE_URL: database.url }, 'Restart');
    token = await prepared.token();
    await prepared.services.close();
    probe = await openDatabase({ url: database.url, poolSize: 1 });
    cleanup.push(() => probe.close());
  }, 120_000);
  afterAll(async () => {
    for (const step of cleanup.splice(0).reverse()) await step();
  });

  it('503 with Retry-After while it is gone, never a 500; both live on and carry on once it is back: the order sent again placed once, every job run', async () => {
    const [port] = await freePorts(1);
    const base = `http://127.0.0.1:${port!}`;
    const api = certdesk('api', { ...env, CERTDESK_PORT: String(port), CERTDESK_PUBLIC_URL: base }, `${base}/readyz`, {
      logs: true,
    });
    cleanup.push(() => kill(api.child));
    const worker = certdesk('worker', env, undefined, { logs: true });
    cleanup.push(() => kill(worker.child));
    await api.ready;

    const bearer = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    await publishDnsProof(base, token, dns);
    const order = (partnerOrderId: string) =>
      fetch(`${base}/rest/v1/Order`, {
        method: 'POST',
        headers: bearer,
        body: JSON.stringify(dnsOrderBody({ PartnerOrderID: partnerOrderId })),
      });
    expect((await order('before')).status).toBe(200);

    // Gone: every connection closed, new ones refused.
    relay.refuseNew = true;
    relay.closeAll();
    const ready = () => fetch(`${base}/readyz`);
    await vi.waitFor(async () => expect((await ready()).status).toBe(503), { timeout: 30_000, interval: 200 });
    const notReady = (await (await ready()).json()) as { ErrorId: number; checks: Record<string, string> };
    expect(notReady.ErrorId).toBe(-1503);
    expect(notReady.checks.database).not.toBe('ok');
    for (let i = 0; i < 3; i++) {
      const refused = await order('during');
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toBe('5');
      expect(await refused.json()).toMatchObject({
        success: false,
        ErrorId: -1503,
        Message: 'The database cannot be reached. Try again shortly.',
      });
    }
    // Long enough for the worker's polls (every second) to fail a few times.
    await vi.waitFor(
      () => expect(worker.logs().map((l) => l.msg)).toContain('job poll failed: database unavailable; polling on'),
      { timeout: 30_000, interval: 200 },
    );
    await sleep(2_000);
    expect([api.child.exitCode, worker.child.exitCode]).toEqual([null, null]);

    // Back: both carry on by themselves.
    relay.refuseNew = false;
    await vi.waitFor(async () => expect((await ready()).status).toBe(200), { timeout: 30_000, interval: 200 });
    expect((await order('during')).status).toBe(200);
    expect((await order('after')).status).toBe(200);
    await vi.waitFor(
      async () => {
        const open = await probe.kysely
          .selectFrom('jobs')
          .select(['name', 'status'])
          .where('name', '=', 'order.validate')
          .where('status', '!=', 'done')
          .execute();
        expect(open).toEqual([]);
      },
      { timeout: 60_000, interval: 250 },
    );
    const orders = await probe.kysely.selectFrom('orders').select(['partner_order_id', 'major_status']).execute();
    expect(orders.map((o) => o.partner_order_id).sort()).toEqual(['after', 'before', 'during']);
    expect(orders.every((o) => o.major_status === 'COMPLETE')).toBe(true);
    const dead = await probe.kysely.selectFrom('jobs').select('name').where('status', '=', 'dead').execute();
    expect(dead).toEqual([]);

    // Logged as an outage: warnings (the worker's once, and that it is back), no error.
    await vi.waitFor(() => expect(worker.logs().map((l) => l.msg)).toContain('job poll: the database is back'));
    const messages = (logs: { level: number; msg: string }[], level: number) =>
      logs.filter((l) => l.level === level).map((l) => l.msg);
    expect(messages(api.logs(), 50)).toEqual([]);
    expect(messages(worker.logs(), 50)).toEqual([]);
    expect(messages(api.logs(), 40)).toContain('request failed: database unavailable');
    expect(messages(worker.logs(), 40).filter((m) => /poll failed/.test(m))).toEqual([
      'job poll failed: database unavailable; polling on',
    ]);
  }, 240_000);

  it('a path gone silent (no FIN, no RST): /readyz says so within its probe bound and an order gets 503 within the bounds (on an answer, or on a new connection), never a 500; once it carries again, the order sent again is placed once', async () => {
    const [port] = await freePorts(1);
    const base = `http://127.0.0.1:${port!}`;
    const api = certdesk(
      'api',
      { ...env, CERTDESK_DATABASE_QUERY_TIMEOUT_MS: '2000', CERTDESK_PORT: String(port), CERTDESK_PUBLIC_URL: base },
      `${base}/readyz`,
      { logs: true },
    );
    try {
      await api.ready;
      await publishDnsProof(base, token, dns);
      const order = () =>
        fetch(`${base}/rest/v1/Order`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify(dnsOrderBody({ PartnerOrderID: 'silent' })),
          // Without the bounds the answer would take until TCP gave up: the test fails here instead.
          signal: AbortSignal.timeout(60_000),
        });
      const ready = () => fetch(`${base}/readyz`, { signal: AbortSignal.timeout(60_000) });
      expect((await ready()).status).toBe(200);
      // Connections idle in the pool, as a process that has served for a while holds them: the
      // requests below are given those first, not new ones (which the connect timeout bounds).
      const warm = await Promise.all(
        Array.from({ length: 10 }, () =>
          fetch(`${base}/rest/v1/Orders`, { headers: { authorization: `Bearer ${token}` } }),
        ),
      );
      expect(warm.map((r) => r.status)).toEqual(Array.from({ length: 10 }, () => 200));

      // A NAT or load balancer forgets every flow: what either end sends is dropped, nothing closed.
      relay.forgetFlows();
      relay.blackholeNew = true;
      const notReady = await ready();
      expect(notReady.status).toBe(503);
      expect(((await notReady.json()) as { checks: Record<string, string> }).checks.database).toBe('unreachable');
      const refused = await order();
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toBe('5');
      // On a pooled connection the answer is overdue; once one was (the probe's, most likely), the
      // pool closes the rest idle since and opens new ones, which the connect timeout bounds.
      const body = (await refused.json()) as { success: boolean; ErrorId: number; Message: string };
      expect(body).toMatchObject({ success: false, ErrorId: -1503 });
      expect(body.Message).toMatch(/^The database (did not answer in time|cannot be reached)\. Try again shortly\.$/);

      // It carries again: a client sends again, as Retry-After says, until it is placed.
      relay.blackholeNew = false;
      const statuses: number[] = [];
      await vi.waitFor(
        async () => {
          const res = await order();
          statuses.push(res.status);
          expect(res.status).toBe(200);
        },
        { timeout: 120_000, interval: 500 },
      );
      expect(statuses.filter((s) => s !== 503 && s !== 200)).toEqual([]);
      await vi.waitFor(async () => expect((await ready()).status).toBe(200), { timeout: 60_000, interval: 200 });
      const placed = await probe.kysely
        .selectFrom('orders')
        .select('id')
        .where('partner_order_id', '=', 'silent')
        .execute();
      expect(placed).toHaveLength(1);
      expect(api.logs().filter((l) => l.level >= 50)).toEqual([]);
      expect(api.child.exitCode).toBe(null);
    } finally {
      relay.blackholeNew = false;
      await kill(api.child);
    }
  }, 240_000);
});
