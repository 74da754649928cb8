// Redis going away while the service runs: the rate limits' counters and the broadcast live there,
// and neither may take the API down with it. Redis is reached through a relay on loopback that the
// test can cut silently (bytes dropped, no connection closed: a NAT that forgot the flow, a
// network partition) or loudly (every connection closed and new ones refused).
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { sqliteFile } from './support/databases.js';
import { loadConfig } from '../src/config/index.js';
import { createServices } from '../src/main.js';
import { redisBroadcast } from '../src/storage/index.js';
import { createTestContext, type TestContext } from './support/app.js';
import { sleep } from './support/processes.js';
import { startTcpRelay } from './support/tcp-relay.js';

const REDIS = process.env.CERTDESK_TEST_REDIS_URL;
if (REDIS === undefined || REDIS === '')
  console.warn('Redis outage tests not run: they need a Redis server (CERTDESK_TEST_REDIS_URL is not set)');

/** A relay to Redis that can drop every byte without closing anything, close everything, or forget the connections it carries. */
async function relayTo(
  target: URL,
): Promise<{ url: string; cutSilently(): void; cutLoudly(): void; forgetFlows(): void; close(): Promise<void> }> {
  const tcp = await startTcpRelay(target, 6379);
  return {
    url: `redis://${tcp.host}`,
    cutSilently: () => {
      tcp.forgetFlows();
      tcp.blackholeNew = true;
    },
    cutLoudly: () => {
      tcp.refuseNew = true;
      tcp.closeAll();
    },
    forgetFlows: () => tcp.forgetFlows(),
    close: () => tcp.close(),
  };
}

/** `p`, or 'no answer' once `ms` have passed: a hang is a failure, not a test timeout. */
const within = <T>(ms: number, p: Promise<T>): Promise<T | 'no answer'> =>
  Promise.race([p, new Promise<'no answer'>((resolve) => setTimeout(() => resolve('no answer'), ms).unref())]);

describe.skipIf(REDIS === undefined || REDIS === '')('Redis going away while the service runs', () => {
  let t: TestContext | undefined;
  let relay: Awaited<ReturnType<typeof relayTo>> | undefined;
  afterEach(async () => {
    await t?.close();
    await relay?.close();
    t = undefined;
    relay = undefined;
  });

  const start = async () => {
    relay = await relayTo(new URL(REDIS!));
    t = await createTestContext(sqliteFile(), {
      CERTDESK_REDIS_URL: relay.url,
      CERTDESK_REDIS_PREFIX: `outage-${randomBytes(4).toString('hex')}`,
      CERTDESK_RATE_LIMIT: '1000',
    });
    return { t, relay, customer: await t.customer() };
  };

  // The command timeout is a second; ten leave room for a loaded machine, and a hang never ends.
  const BOUND_MS = 10_000;

  it('a Redis that stops answering without closing the connection: requests are answered, /readyz says so', async () => {
    const { t, relay, customer } = await start();
    expect((await t.call(customer.token, { method: 'GET', url: '/rest/v1/Profile' })).statusCode).toBe(200);
    relay.cutSilently();
    const profile = await within(BOUND_MS, t.call(customer.token, { method: 'GET', url: '/rest/v1/Profile' }));
    expect(profile === 'no answer' ? profile : profile.statusCode).toBe(200);
    const ready = await within(BOUND_MS, t.app.inject({ method: 'GET', url: '/readyz' }));
    expect(ready === 'no answer' ? ready : ready.statusCode).toBe(503);
    if (ready !== 'no answer') expect(ready.json()).toMatchObject({ checks: { redis: 'unreachable' } });
  });

  it('a revocation made while Redis is down is answered, not failed after its commit', async () => {
    const { t, relay, customer } = await start();
    const victim = await t.token(customer);
    expect((await t.call(victim, { method: 'GET', url: '/rest/v1/Profile' })).statusCode).toBe(200);
    relay.cutLoudly();
    const revoked = await within(BOUND_MS, t.revoke(customer, victim));
    expect(revoked === 'no answer' ? revoked : revoked.statusCode).toBe(200);
    expect((await t.call(victim, { method: 'GET', url: '/rest/v1/Profile' })).statusCode).toBe(401);
  });

  it('ok/a path dropped without a word (a NAT that forgot the flows): both connections are opened again, the others are heard, /readyz is ready again', async () => {
    const prefix = `outage-${randomBytes(4).toString('hex')}`;
    relay = await relayTo(new URL(REDIS!));
    t = await createTestContext(sqliteFile(), {
      CERTDESK_REDIS_URL: relay.url,
      CERTDESK_REDIS_PREFIX: prefix,
      CERTDESK_RATE_LIMIT: '1000',
    });
    const { services, app } = t;
    expect(services.broadcast.transport).toBe('redis');
    expect((await app.inject({ method: 'GET', url: '/readyz' })).json()).toMatchObject({
      checks: { redis: 'ok', broadcast: 'ok' },
    });
    let heard = 0;
    services.broadcast.subscribe('probe', () => heard++);
    // Another process, announcing on the same Redis directly (not through the relay).
    const other = new Redis(REDIS!);
    try {
      const announce = (n: number) => other.publish(`${prefix}:broadcast`, `probe other.${n}`);
      await announce(0);
      await expect.poll(() => heard, { timeout: BOUND_MS }).toBeGreaterThan(0);

      relay.forgetFlows();
      const before = heard;
      // Until the subscriber is on a new connection, nothing it is sent arrives. A heartbeat every
      // 5 s answered within 5 s, then a reconnection: about 10 s; the bound leaves room for a loaded machine.
      let n = 1;
      await expect
        .poll(
          async () => {
            await announce(n++);
            return heard;
          },
          { timeout: 4 * BOUND_MS, interval: 500 },
        )
        .toBeGreaterThan(before);
      // The commands' connection is new too: Redis answers the readiness probe again.
      await expect
        .poll(async () => (await app.inject({ method: 'GET', url: '/readyz' })).statusCode, {
          timeout: 4 * BOUND_MS,
          interval: 500,
        })
        .toBe(200);
      expect((await app.inject({ method: 'GET', url: '/readyz' })).json()).toMatchObject({
        checks: { redis: 'ok', broadcast: 'ok' },
      });
    } finally {
      other.disconnect();
    }
  }, 120_000);

  it('fail/a reconnection whose commands go unanswered: nothing crashes, it is not listening meanwhile, and listens once the path is back', async () => {
    const tcp = await startTcpRelay(new URL(REDIS!), 6379);
    const publisher = new Redis(`redis://${tcp.host}`, { commandTimeout: 1000, maxRetriesPerRequest: 1 });
    publisher.on('error', () => undefined);
    const other = new Redis(REDIS!);
    const channel = `outage-${randomBytes(4).toString('hex')}`;
    const errors: string[] = [];
    const broadcast = await redisBroadcast(publisher, channel, {
      heartbeatMs: 1000,
      onError: (err) => errors.push(err.message),
    });
    try {
      let heard = 0;
      broadcast.subscribe('probe', () => heard++);
      expect(broadcast.listening()).toBe(true);
      // The old path dies, and new connections are accepted and then answered nothing (their
      // SUBSCRIBE, under the publisher's 1 s command timeout, once ended the process unhandled).
      tcp.forgetFlows();
      tcp.blackholeNew = true;
      await expect.poll(() => broadcast.listening(), { timeout: BOUND_MS }).toBe(false);
      await expect.poll(() => errors.some((e) => /first command/.test(e)), { timeout: 3 * BOUND_MS }).toBe(true);
      tcp.blackholeNew = false;
      let n = 0;
      await expect
        .poll(
          async () => {
            await other.publish(channel, `probe other.${n++}`);
            return heard;
          },
          { timeout: 3 * BOUND_MS, interval: 200 },
        )
        .toBeGreaterThan(0);
      expect(broadcast.listening()).toBe(true);
    } finally {
      await broadcast.close();
      publisher.disconnect();
      other.disconnect();
      await tcp.close();
    }
  }, 120_000);

  it('fail/a Redis that accepts connections and answers nothing at the start: the start fails and leaves no connection open', async () => {
    const tcp = await startTcpRelay(new URL(REDIS!), 6379);
    tcp.blackholeNew = true;
    const dialect = sqliteFile();
    const db = await dialect.open();
    try {
      const config = loadConfig({
        CERTDESK_REDIS_URL: `redis://${tcp.host}`,
        CERTDESK_REDIS_PREFIX: `outage-${randomBytes(4).toString('hex')}`,
        CERTDESK_DATA_DIR: '/nonexistent-test-data',
        CERTDESK_DNS_SERVERS: '127.0.0.1:9',
      });
      await expect(createServices(config, { db })).rejects.toThrow(/subscribing to the Redis broadcast/);
      expect(tcp.connections.length).toBeGreaterThan(0);
      // The commands' connection and the subscriber's, both closed by the failed start, and not
      // opened again (a client left behind reconnects for good).
      await expect.poll(() => tcp.connections.filter((c) => c.open).length, { timeout: BOUND_MS }).toBe(0);
      const made = tcp.connections.length;
      await sleep(5_000);
      expect(tcp.connections.length).toBe(made);
    } finally {
      await db.close();
      await tcp.close();
    }
  }, 60_000);
});
