import { connect, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildKvApp } from '../src/web/kv/server.js';
import { DEFAULT_REQUEST_TIMEOUT_MS } from '../src/web/server-timeouts.js';
import { createTestContext, type TestContext } from './support/app.js';
import { testDialects } from './support/databases.js';
import { rawExchange } from './support/raw-http.js';

/** CERTDESK_REQUEST_TIMEOUT_MS in these tests: short, so a slow client is cut in about a second. */
const TIMEOUT_MS = 1000;
/** Generous: the machines' speed varies a lot; what matters is "closed, not after minutes". */
const UPPER_MS = TIMEOUT_MS + 10_000;
const GIVE_UP_MS = TIMEOUT_MS + 20_000;

/** A POST that announces 100 bytes of body, per listener, on a route that reads its body. */
const slowPost = {
  api: 'POST /oauth2/token HTTP/1.1\r\nHost: certdesk.test\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n',
  kv: 'POST /www.certdesk-test.com HTTP/1.1\r\nHost: kv.certdesk.test\r\nx-api-key: cdk_unknown\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n',
};
const body100 = `{"hash":"${'a'.repeat(89)}"}`;

/** Sends two requests on one keep-alive connection, `pauseMs` apart; resolves with both answers' status lines. */
function twoRequestsOneConnection(port: number, request: string, pauseMs: number): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    let secondSent = false;
    const statuses = () => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => m[1]!);
    socket.setTimeout(GIVE_UP_MS, () => socket.destroy(new Error('no answer')));
    socket.on('error', reject);
    socket.on('close', () => resolve(statuses()));
    socket.on('data', (c: Buffer) => {
      text += c.toString('latin1');
      if (statuses().length === 1 && !secondSent) {
        secondSent = true;
        setTimeout(() => socket.write(request.replace('keep-alive', 'close')), pauseMs);
      }
    });
    socket.write(request);
  });
}

describe('slow clients', () => {
  let t: TestContext;
  const ports: Record<'api' | 'kv', number> = { api: 0, kv: 0 };
  let closeKv: () => Promise<void>;

  beforeAll(async () => {
    // The database plays no part in how a listener treats a slow client: one dialect is enough.
    t = await createTestContext(testDialects()[0]!, { CERTDESK_REQUEST_TIMEOUT_MS: String(TIMEOUT_MS) });
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    ports.api = (t.app.server.address() as AddressInfo).port;
    const kv = await buildKvApp({
      hashStore: t.services.hashStore,
      logger: false,
      requestTimeout: t.services.config.requestTimeoutMs,
    });
    await kv.listen({ host: '127.0.0.1', port: 0 });
    ports.kv = (kv.server.address() as AddressInfo).port;
    closeKv = () => kv.close();
  });
  afterAll(async () => {
    await closeKv?.();
    await t?.close();
  });

  describe.each(['api', 'kv'] as const)('on the %s listener', (listener) => {
    it('a body that trickles a byte every 200 ms gets 408 and is closed at the configured timeout', async () => {
      const res = await rawExchange(ports[listener], {
        head: slowPost[listener],
        trickle: body100,
        intervalMs: 200,
        giveUpMs: GIVE_UP_MS,
      });
      expect(res.status, res.text).toBe(408);
      expect(res.closedAfterMs).toBeGreaterThanOrEqual(TIMEOUT_MS);
      expect(res.closedAfterMs).toBeLessThan(UPPER_MS);
    });

    it('a body that stalls after its headers gets 408 and is closed', async () => {
      const res = await rawExchange(ports[listener], { head: `${slowPost[listener]}{"hash":`, giveUpMs: GIVE_UP_MS });
      expect(res.status, res.text).toBe(408);
      expect(res.closedAfterMs).toBeGreaterThanOrEqual(TIMEOUT_MS);
      expect(res.closedAfterMs).toBeLessThan(UPPER_MS);
    });

    it('headers that stall half-way get 408 and are closed', async () => {
      const res = await rawExchange(ports[listener], {
        head: 'GET /healthz HTTP/1.1\r\nHost: certdesk.test\r\nX-Partial: ',
        giveUpMs: GIVE_UP_MS,
      });
      expect(res.status, res.text).toBe(408);
      expect(res.closedAfterMs).toBeGreaterThanOrEqual(TIMEOUT_MS);
      expect(res.closedAfterMs).toBeLessThan(UPPER_MS);
    });

    it('headers that trickle forever (slowloris) get 408 and are closed', async () => {
      const res = await rawExchange(ports[listener], {
        head: 'GET /healthz HTTP/1.1\r\n',
        trickle: `X-Slow: ${'a'.repeat(200)}`,
        intervalMs: 100,
        giveUpMs: GIVE_UP_MS,
      });
      expect(res.status, res.text).toBe(408);
      expect(res.closedAfterMs).toBeGreaterThanOrEqual(TIMEOUT_MS);
      expect(res.closedAfterMs).toBeLessThan(UPPER_MS);
    });

    it('an idle keep-alive connection outlives the request timeout and serves its next request', async () => {
      const request = 'GET /healthz HTTP/1.1\r\nHost: certdesk.test\r\nConnection: keep-alive\r\n\r\n';
      // Both listeners answer /healthz without a key.
      expect(await twoRequestsOneConnection(ports[listener], request, TIMEOUT_MS * 2.5)).toEqual(['200', '200']);
    });
  });

  it('both listeners default to the documented 30 s for headers and whole requests', async () => {
    expect(DEFAULT_REQUEST_TIMEOUT_MS).toBe(30_000);
    expect(t.services.config.requestTimeoutMs).toBe(TIMEOUT_MS);
    const kv = await buildKvApp({ hashStore: t.services.hashStore, logger: false });
    try {
      await kv.ready();
      expect({ request: kv.server.requestTimeout, headers: kv.server.headersTimeout }).toEqual({
        request: 30_000,
        headers: 30_000,
      });
    } finally {
      await kv.close();
    }
    expect({ request: t.app.server.requestTimeout, headers: t.app.server.headersTimeout }).toEqual({
      request: TIMEOUT_MS,
      headers: TIMEOUT_MS,
    });
  });
});
