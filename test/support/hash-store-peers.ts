// What the web-server modules talk to in the tests: certdesk's own hash store (the kv listener of
// src/web/kv over a full test context, two customers with a store key each, the API and a real DNS
// server for FILE orders), and stores that misbehave in each way a module must survive.
import { createServer as createHttpServer } from 'node:http';
import { createServer as createTcpServer, type AddressInfo, type Server, type Socket } from 'node:net';
import type { CustomerId } from '../../src/core/index.js';
import { buildKvApp, type KvApp } from '../../src/web/kv/server.js';
import { createTestContext, type TestContext, type TestCustomer } from './app.js';
import { testDialects } from './databases.js';
import { startDnsServer, type TestDnsServer } from './dns-server.js';
import { refusedTcpPort } from './refused-ports.js';

export interface HashStorePeers {
  /** The API (FILE orders), with CERTDESK_VALIDATION_HTTP_PORT = the port given to start. */
  readonly t: TestContext;
  readonly dns: TestDnsServer;
  /** The hash store's base URL, `http://127.0.0.1:<port>`. */
  readonly storeUrl: string;
  readonly a: TestCustomer & { readonly key: string };
  readonly b: TestCustomer & { readonly key: string };
  /** Paths the store was asked for, in order. */
  readonly asked: string[];
  /** Files a hash under a key, as a customer's tooling does (POST /<name>). */
  file(key: string, name: string, hash: string): Promise<void>;
  close(): Promise<void>;
}

/** Starts the store, API and DNS; certdesk's FILE checks go to `validationPort` on loopback. */
export async function startHashStorePeers(validationPort: number): Promise<HashStorePeers> {
  const dns = await startDnsServer();
  const sqlite = testDialects().find((d) => d.dialect === 'sqlite')!;
  const t = await createTestContext(sqlite, {
    CERTDESK_DNS_SERVERS: dns.address,
    CERTDESK_VALIDATION_ALLOW_PRIVATE: 'true',
    CERTDESK_VALIDATION_HTTP_PORT: String(validationPort),
    CERTDESK_RATE_LIMIT: '1000000',
  });
  const kv: KvApp = await buildKvApp({ hashStore: t.services.hashStore, logger: false });
  const asked: string[] = [];
  kv.addHook('onRequest', async (request) => void asked.push(request.url));
  await kv.listen({ host: '127.0.0.1', port: 0 });
  const storeUrl = `http://127.0.0.1:${(kv.server.address() as AddressInfo).port}`;
  const withKey = async (name: string) => {
    const customer = await t.customer({ name });
    return { ...customer, key: (await t.services.hashStore.createKey(customer.customerId as CustomerId)).key };
  };
  const a = await withKey('Customer A');
  const b = await withKey('Customer B');
  return {
    t,
    dns,
    storeUrl,
    a,
    b,
    asked,
    async file(key, name, hash) {
      const res = await fetch(`${storeUrl}/${name}`, {
        method: 'POST',
        headers: { 'x-api-key': key, 'content-type': 'application/json' },
        body: JSON.stringify({ hash }),
      });
      if (res.status !== 200) throw new Error(`filing ${name} failed: ${res.status} ${await res.text()}`);
    },
    async close() {
      await kv.close();
      await t.close();
      await dns.close();
    },
  };
}

/** The ways a store misbehaves; each answer ends in a line that looks like a hash. */
export const BAD_STORES = ['down', 'slow', 'silent', 'garbage', 'html', 'oversize', 'server error'] as const;
export type BadStore = (typeof BAD_STORES)[number];

/**
 * One store per kind, on loopback: `down` refuses connections; `slow` answers a good hash after
 * 10 s; `silent` accepts and says nothing; `garbage` sends bytes that are not HTTP; `html` a 200
 * text/html page; `oversize` a 200 text/plain of 100 KiB; `server error` a 500 text/plain. And
 * `leaky`, a good answer with the key it was sent echoed in headers and a cookie.
 */
export async function startBadStores(): Promise<{
  urls: Record<BadStore | 'leaky', string>;
  close(): Promise<void>;
}> {
  const servers: Server[] = [];
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  const track = (server: Server): Server => {
    server.on('connection', (s: Socket) => {
      sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => sockets.delete(s));
    });
    servers.push(server);
    return server;
  };
  const answer = (status: number, type: string, body: string, delayMs = 0) =>
    track(
      createHttpServer((_req, res) => {
        const timer = setTimeout(() => {
          timers.delete(timer);
          res.writeHead(status, { 'content-type': type }).end(body);
        }, delayMs);
        timers.add(timer);
      }),
    );
  const listening = async (server: Server): Promise<string> => {
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  };
  // `down`: a port that refuses connections, held (`refused-ports.ts`): a port listened on and
  // closed again could be handed to the next server that starts, whose answer then reached the
  // module as the store's.
  const down = await refusedTcpPort();
  const downUrl = `http://127.0.0.1:${down.port}`;
  const leaky = createHttpServer((req, res) => {
    const key = String(req.headers['x-api-key']);
    res.writeHead(200, { 'content-type': 'text/plain', 'x-echo-key': key, 'set-cookie': `k=${key}` });
    res.end('leaky-hash\n');
  });
  const urls: Record<BadStore | 'leaky', string> = {
    leaky: await listening(track(leaky)),
    down: downUrl,
    slow: await listening(answer(200, 'text/plain', 'slow-hash\n', 10_000)),
    silent: await listening(track(createTcpServer(() => undefined))),
    garbage: await listening(track(createTcpServer((s) => s.end('\u0000\u0001 not HTTP at all\ngarbage-hash\n')))),
    html: await listening(answer(200, 'text/html', '<html><body>a portal</body></html>\nhtml-hash\n')),
    oversize: await listening(answer(200, 'text/plain', `${'x'.repeat(100 * 1024)}\noversize-hash\n`)),
    'server error': await listening(answer(500, 'text/plain', 'error-hash\n')),
  };
  return {
    urls,
    async close() {
      for (const timer of timers) clearTimeout(timer);
      for (const socket of sockets) socket.destroy();
      await Promise.all([down.close(), ...servers.map((s) => new Promise((r) => s.close(r)))]);
    },
  };
}
