import { createServer } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock, type CustomerId } from '../src/core/index.js';
import { HashStore } from '../src/ra/hash-store/hash-store.js';
import { AuditRepo, CustomersRepo, type Db } from '../src/storage/index.js';
import { KvRepo } from '../src/storage/kv-repo.js';
import { buildKvApp, type KvApp, type KvAppDeps } from '../src/web/kv/server.js';
import { testDialects } from './support/databases.js';

interface RawResponse {
  readonly statusLine: string;
  readonly headers: Record<string, string>;
  readonly body: string;
}

/** Sends `bytes` as-is on a fresh TCP connection and reads until the server closes it. */
function raw(port: number, bytes: string): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.setTimeout(5000, () => socket.destroy(new Error('server did not close the connection')));
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('end', () => {
      const text = Buffer.concat(chunks).toString('latin1');
      const split = text.indexOf('\r\n\r\n');
      const [statusLine = '', ...lines] = text.slice(0, split).split('\r\n');
      const headers = Object.fromEntries(
        lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
      );
      resolve({ statusLine, headers, body: text.slice(split + 4) });
    });
    socket.write(bytes, 'latin1');
  });
}

const statusOf = (res: RawResponse) => Number(res.statusLine.split(' ')[1]);

/** Exactly what the original Apache module sends: bare LF line endings and Connection: close. */
const apacheGet = (name: string, key: string) =>
  `GET /${name} HTTP/1.1\nHost: kv.certdesk.test\nx-api-key: ${key}\nConnection: close\n\n`;

async function listen(deps: KvAppDeps): Promise<{ app: KvApp; url: string; port: number }> {
  const app = await buildKvApp(deps);
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as AddressInfo;
  return { app, url: `http://127.0.0.1:${port}`, port };
}

describe('Node’s default HTTP parser', () => {
  it('refuses the Apache module’s bare-LF request (why the kv listener uses the lenient parser)', async () => {
    const server = createServer((_req, res) => res.end('ok'));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const res = await raw((server.address() as AddressInfo).port, apacheGet('www.example.org', 'k'));
      expect(res.statusLine).toBe('HTTP/1.1 400 Bad Request');
    } finally {
      server.close();
    }
  });
});

describe.each(testDialects())('hash store listener on $dialect', (dialect) => {
  let db: Db;
  let store: HashStore;
  let srv: { app: KvApp; url: string; port: number };
  let keyA: string;
  let keyB: string;
  let a: CustomerId;
  beforeAll(async () => {
    db = await dialect.open();
    store = new HashStore({ kv: new KvRepo(db), audit: new AuditRepo(db), clock: new FixedClock(1_800_000_000) });
    const customers = new CustomersRepo(db);
    const base = {
      email: 'ops@acme.test',
      currency: 'EUR',
      creditLimitMinor: 0,
      country: 'DE',
      locale: 'de_DE',
      timezone: 'UTC',
    };
    a = (await customers.create({ ...base, name: 'A' }, 1)).id;
    const b = (await customers.create({ ...base, name: 'B' }, 1)).id;
    keyA = (await store.createKey(a)).key;
    keyB = (await store.createKey(b)).key;
    srv = await listen({ hashStore: store, logger: false, rateLimitPerKey: 1_000_000, rateLimitFailedAuth: 1_000_000 });
  });
  afterAll(async () => {
    await srv.app.close();
    await db.close();
  });

  const post = (name: string, body: string, headers: Record<string, string> = {}) =>
    fetch(`${srv.url}/${name}`, {
      method: 'POST',
      body,
      headers: { 'x-api-key': keyA, 'content-type': 'application/json', ...headers },
    });

  describe('POST /<name>', () => {
    it('ok/files a hash: 200 {"message":"success"} with Content-Length', async () => {
      const res = await post('www.example.org', JSON.stringify({ hash: 'hash-of-www' }));
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      const text = await res.text();
      expect(JSON.parse(text)).toEqual({ message: 'success' });
      expect(res.headers.get('content-length')).toBe(String(Buffer.byteLength(text)));
    });

    it.each([
      [
        'ok/JSON labelled as a form',
        { 'content-type': 'application/x-www-form-urlencoded' },
        '{"hash":"h-form-label"}',
        'h-form-label',
      ],
      ['ok/JSON labelled text/plain', { 'content-type': 'text/plain' }, '{"hash":"h-text"}', 'h-text'],
      [
        'ok/charset=utf8 (not a valid charset name)',
        { 'content-type': 'application/json; charset=utf8' },
        '{"hash":"h-utf8"}',
        'h-utf8',
      ],
      ['ok/a genuine form body', { 'content-type': 'application/x-www-form-urlencoded' }, 'hash=h%2Dform', 'h-form'],
    ])('%s', async (_case, headers, body, expected) => {
      const name = `${expected}.example.org`;
      expect((await post(name, body, headers)).status).toBe(200);
      expect(await store.lookup(keyA, name)).toBe(expected);
    });

    it('ok/a request without Content-Type, over a raw bare-LF socket', async () => {
      const body = '{"hash":"h-raw"}';
      const res = await raw(
        srv.port,
        `POST /raw.example.org HTTP/1.1\nHost: kv\nx-api-key: ${keyA}\nContent-Length: ${body.length}\nConnection: close\n\n${body}`,
      );
      expect(res.statusLine).toBe('HTTP/1.1 200 OK');
      expect(JSON.parse(res.body)).toEqual({ message: 'success' });
      expect(await store.lookup(keyA, 'raw.example.org')).toBe('h-raw');
    });

    it.each([
      ['fail/bad JSON', 'www.example.org', '{"hash": '],
      ['fail/no hash member', 'www.example.org', '{"other":"x"}'],
      ['fail/hash not a string', 'www.example.org', '{"hash":42}'],
      ['fail/hash with a line break', 'www.example.org', '{"hash":"a\\nb"}'],
      ['fail/hash too long', 'www.example.org', JSON.stringify({ hash: 'a'.repeat(513) })],
      ['fail/empty body', 'www.example.org', ''],
      ['fail/wildcard name', '*.example.org', '{"hash":"x"}'],
      ['fail/IP address', '192.0.2.1', '{"hash":"x"}'],
    ])('%s → 400 {"message"}', async (_case, name, body) => {
      const res = await post(name, body);
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual({ message: expect.any(String) });
      expect(await store.lookup(keyA, 'www.example.org')).toBe('hash-of-www');
    });

    it('fail/a wrong or missing key → 401 {"message"}', async () => {
      for (const headers of [{ 'x-api-key': 'cdk_wrong' }, { 'x-api-key': '' }]) {
        const res = await post('www.example.org', '{"hash":"evil"}', headers);
        expect(res.status).toBe(401);
        expect(await res.json()).toEqual({ message: expect.stringMatching(/key/) });
      }
      expect(await store.lookup(keyA, 'www.example.org')).toBe('hash-of-www');
    });

    it('fail/a body over the limit → 413', async () => {
      expect((await post('big.example.org', JSON.stringify({ hash: 'a'.repeat(20_000) }))).status).toBe(413);
    });
  });

  describe('GET /<name>', () => {
    it('ok/the Apache module’s exact request: 200, text/plain, last body line is the hash, connection closed', async () => {
      await store.file(keyA, 'apache.example.org', 'apache-hash-1', null);
      const res = await raw(srv.port, apacheGet('apache.example.org', keyA));
      expect(res.statusLine).toBe('HTTP/1.1 200 OK');
      expect(res.headers['content-type']).toBe('text/plain; charset=utf-8');
      expect(res.headers['content-length']).toBe(String(Buffer.byteLength(res.body)));
      expect(res.headers.connection).toBe('close');
      expect(res.body.split('\n').filter(Boolean).at(-1)).toBe('apache-hash-1');
      expect(res.body).toBe('apache-hash-1\n');
    });

    it('ok/fetch reads the hash case-insensitively by name', async () => {
      const res = await fetch(`${srv.url}/WWW.EXAMPLE.ORG`, { headers: { 'x-api-key': keyA } });
      expect(res.status).toBe(200);
      expect(await res.text()).toBe('hash-of-www\n');
    });

    it('fail/customer B’s key never gets A’s hash: 404 {"message":"not found"}', async () => {
      const res = await raw(srv.port, apacheGet('apache.example.org', keyB));
      expect(res.statusLine).toBe('HTTP/1.1 404 Not Found');
      expect(JSON.parse(res.body)).toEqual({ message: 'not found' });
      expect(res.headers['content-length']).toBe(String(Buffer.byteLength(res.body)));
    });

    it('fail/an unknown name → 404; a wrong or missing key → 401; a bad name → 400', async () => {
      expect((await raw(srv.port, apacheGet('nothing.example.org', keyA))).statusLine).toBe('HTTP/1.1 404 Not Found');
      const wrong = await raw(srv.port, apacheGet('apache.example.org', 'cdk_wrong'));
      expect(wrong.statusLine).toBe('HTTP/1.1 401 Unauthorized');
      expect(JSON.parse(wrong.body)).toEqual({ message: expect.any(String) });
      const missing = await fetch(`${srv.url}/apache.example.org`);
      expect(missing.status).toBe(401);
      expect((await fetch(`${srv.url}/bad_name.example.org`, { headers: { 'x-api-key': keyA } })).status).toBe(400);
      expect((await fetch(`${srv.url}/${'a'.repeat(300)}.org`, { headers: { 'x-api-key': keyA } })).status).toBe(400);
    });

    it('fail/ambiguous framing (Transfer-Encoding with Content-Length) → 400 and the connection closes', async () => {
      const res = await raw(
        srv.port,
        `POST /x.example.org HTTP/1.1\nHost: kv\nx-api-key: ${keyA}\nContent-Length: 5\nTransfer-Encoding: chunked\n\n0\n\n`,
      );
      expect(res.statusLine).toBe('HTTP/1.1 400 Bad Request');
    });
  });

  describe('GET /healthz and /readyz', () => {
    it('ok/answered without a key: the process is up; ready with the parts it was given', async () => {
      const health = await fetch(`${srv.url}/healthz`);
      expect([health.status, await health.json()]).toEqual([200, { status: 'ok' }]);
      const ready = await fetch(`${srv.url}/readyz`);
      expect([ready.status, await ready.json()]).toEqual([200, { status: 'ready', checks: {} }]);
    });

    it('fail/a part not ok: 503 with Retry-After, naming it; the store itself still answers its keys', async () => {
      const down = await listen({
        hashStore: store,
        logger: false,
        ready: async () => ({ database: 'unreachable' }),
      });
      try {
        const ready = await fetch(`${down.url}/readyz`);
        expect(ready.status).toBe(503);
        expect(ready.headers.get('retry-after')).toBe('5');
        expect(await ready.json()).toEqual({
          message: 'The hash store is not ready: database: unreachable.',
          checks: { database: 'unreachable' },
        });
        expect((await fetch(`${down.url}/healthz`)).status).toBe(200);
      } finally {
        await down.app.close();
      }
    });

    it('fail/a key in the query is refused there too, unused (400)', async () => {
      const res = await fetch(`${srv.url}/readyz?api_key=${keyA}`);
      expect(res.status).toBe(400);
    });
  });

  describe('rate limits', () => {
    it('fail/wrong keys from one address get 429 with Retry-After once the budget is spent; valid keys still pass', async () => {
      const limited = await listen({ hashStore: store, logger: false, rateLimitFailedAuth: 3 });
      try {
        const statuses: number[] = [];
        for (let i = 0; i < 5; i++)
          statuses.push(statusOf(await raw(limited.port, apacheGet('apache.example.org', `cdk_guess${i}`))));
        expect(statuses).toEqual([401, 401, 401, 429, 429]);
        const res = await fetch(`${limited.url}/apache.example.org`, { headers: { 'x-api-key': 'cdk_again' } });
        expect(res.status).toBe(429);
        expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
        expect(await res.json()).toEqual({ message: expect.stringMatching(/retry/) });
        expect((await fetch(`${limited.url}/apache.example.org`, { headers: { 'x-api-key': keyA } })).status).toBe(200);
      } finally {
        await limited.app.close();
      }
    });

    it('fail/a valid key over its per-minute budget → 429', async () => {
      const limited = await listen({ hashStore: store, logger: false, rateLimitPerKey: 2 });
      try {
        const statuses = [];
        for (let i = 0; i < 3; i++)
          statuses.push((await fetch(`${limited.url}/apache.example.org`, { headers: { 'x-api-key': keyA } })).status);
        expect(statuses).toEqual([200, 200, 429]);
        expect((await fetch(`${limited.url}/apache.example.org`, { headers: { 'x-api-key': keyB } })).status).toBe(404);
      } finally {
        await limited.app.close();
      }
    });
  });

  describe('fuzz', () => {
    it('2,000 random and malformed bodies, names and keys never produce a 5xx', async () => {
      const rnd = mulberry32(dialect.dialect === 'sqlite' ? 1 : 2);
      const seen = new Map<number, number>();
      for (let batch = 0; batch < 100; batch++) {
        const results = await Promise.all(Array.from({ length: 20 }, () => fuzzOnce(rnd, srv, keyA)));
        for (const { status, contentLength, bodyLength, what } of results) {
          seen.set(status, (seen.get(status) ?? 0) + 1);
          expect(status, what).toBeLessThan(500);
          expect(contentLength, what).toBe(bodyLength);
        }
      }
      expect([...seen.values()].reduce((x, y) => x + y, 0)).toBe(2000);
      expect(seen.get(400)).toBeGreaterThan(0);
      // The store still answers correctly afterwards.
      expect(await (await fetch(`${srv.url}/apache.example.org`, { headers: { 'x-api-key': keyA } })).text()).toBe(
        'apache-hash-1\n',
      );
    });
  });
});

/** A small seeded PRNG (mulberry32) so a failing fuzz case can be replayed. */
function mulberry32(seed: number): () => number {
  let t = seed;
  return () => {
    t = (t + 0x6d2b79f5) | 0;
    let r = Math.imul(t ^ (t >>> 15), 1 | t);
    r = (r + Math.imul(r ^ (r >>> 7), 61 | r)) ^ r;
    return ((r ^ (r >>> 14)) >>> 0) / 4294967296;
  };
}

const CONTENT_TYPES = [
  undefined,
  'application/json',
  'application/json; charset=utf8',
  'application/x-www-form-urlencoded',
  'text/plain',
  'multipart/form-data; boundary=x',
  ';;;',
  'application/json; charset=utf-16',
  '*/*',
];

async function fuzzOnce(
  rnd: () => number,
  srv: { port: number },
  key: string,
): Promise<{ status: number; contentLength: number; bodyLength: number; what: string }> {
  const pick = <T>(list: readonly T[]): T => list[Math.floor(rnd() * list.length)] as T;
  const bytes = (n: number) => Buffer.from(Array.from({ length: n }, () => Math.floor(rnd() * 256)));
  const printable = (n: number) =>
    Array.from({ length: n }, () => String.fromCharCode(32 + Math.floor(rnd() * 95))).join('');
  const names = [
    () => encodeURIComponent(printable(Math.floor(rnd() * 80))),
    () => [...bytes(1 + Math.floor(rnd() * 40))].map((b) => `%${b.toString(16).padStart(2, '0')}`).join(''),
    () => `${'a'.repeat(Math.floor(rnd() * 400))}.example.org`,
    () =>
      pick([
        'www.example.org',
        '*.example.org',
        '..',
        '%',
        '%zz',
        'a%00b.org',
        'xn--.org',
        'a.b.c.d.e.f.example',
        '%E2%82%AC.example',
      ]),
  ];
  const bodies = [
    () => bytes(Math.floor(rnd() * 200)).toString('latin1'),
    () => printable(Math.floor(rnd() * 200)),
    () => JSON.stringify({ hash: pick([printable(Math.floor(rnd() * 600)), 1, null, [], {}, true]) }),
    () => `{"hash":"${printable(Math.floor(rnd() * 50))}`,
    () => '['.repeat(Math.floor(rnd() * 8000)),
    () => `hash=${encodeURIComponent(printable(Math.floor(rnd() * 100)))}&hash=x`,
    () =>
      pick(['', 'null', '"hash"', '{"__proto__":{"hash":"x"}}', '{"hash":"\\ud800"}', '{"hash":"a\u0000b"}', '1e999']),
  ];
  const method = pick(['POST', 'POST', 'GET', 'PUT', 'HEAD']);
  const name = pick(names)();
  const body = method === 'GET' || method === 'HEAD' ? '' : pick(bodies)();
  const contentType = pick(CONTENT_TYPES);
  const apiKey = rnd() < 0.9 ? key : pick(['', 'cdk_x', printable(60)]);
  const eol = rnd() < 0.5 ? '\n' : '\r\n';
  const head = [
    `${method} /${name} HTTP/1.1`,
    'Host: kv',
    `x-api-key: ${apiKey}`,
    'Connection: close',
    ...(contentType === undefined ? [] : [`Content-Type: ${contentType}`]),
    ...(body === '' ? [] : [`Content-Length: ${Buffer.byteLength(body, 'latin1')}`]),
  ].join(eol);
  const res = await raw(srv.port, `${head}${eol}${eol}${body}`);
  const status = statusOf(res);
  const bodyLength = method === 'HEAD' ? Number(res.headers['content-length']) : Buffer.byteLength(res.body, 'latin1');
  return {
    status,
    contentLength: Number(res.headers['content-length']),
    bodyLength,
    what: `${method} /${name} ${JSON.stringify(body.slice(0, 80))} → ${res.statusLine}`,
  };
}
