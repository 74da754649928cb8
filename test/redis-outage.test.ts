// Redis going away while the service runs: the rate limits' counters and the broadcast live there,
// and neither may take the API down with it. Redis is reached through a relay on loopback that the
// test can cut silently (bytes dropped, no connection closed: a NAT that forgot the flow, a
// network partition) or loudly (every connection closed and new ones refused).
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { sqliteFile } from './support/databases.js';
import { createTestContext, type TestContext } from './support/app.js';

const REDIS = process.env.CERTDESK_TEST_REDIS_URL;
if (REDIS === undefined || REDIS === '')
  console.warn('Redis outage tests not run: they need a Redis server (CERTDESK_TEST_REDIS_URL is not set)');

/** A TCP relay to `target` that can drop every byte without closing anything, or close everything. */
async function relayTo(target: URL): Promise<{ url: string; cutSilently(): void; cutLoudly(): void; close(): void }> {
  const sockets = new Set<Socket>();
  let mode: 'pass' | 'silent' | 'loud' = 'pass';
  const server: Server = createServer((client) => {
    if (mode === 'loud') return void client.destroy();
    const upstream = createConnection(Number(target.port || 6379), target.hostname);
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      sockets.add(from);
      from.on('data', (chunk) => {
        if (mode === 'pass') to.write(chunk);
      });
      from.on('error', () => to.destroy());
      from.on('close', () => {
        sockets.delete(from);
        to.destroy();
      });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `redis://127.0.0.1:${port}`,
    cutSilently: () => void (mode = 'silent'),
    cutLoudly: () => {
      mode = 'loud';
      for (const s of sockets) s.destroy();
    },
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
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
    relay?.close();
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
    const revoked = await within(
      BOUND_MS,
      t.app.inject({
        method: 'POST',
        url: '/oauth2/revoke',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: new URLSearchParams({
          token: victim,
          client_id: customer.clientId,
          client_secret: customer.clientSecret,
        }).toString(),
      }),
    );
    expect(revoked === 'no answer' ? revoked : revoked.statusCode).toBe(200);
    expect((await t.call(victim, { method: 'GET', url: '/rest/v1/Profile' })).statusCode).toBe(401);
  });
});
