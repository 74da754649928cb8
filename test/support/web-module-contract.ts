// What every web-server module must do against certdesk's hash store (spec 4.35, DESIGN §5.8),
// run once per module and form of use: the same requests, the same answers.
import { request } from 'node:http';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorker } from '../../src/main.js';
import { testCsr } from './csr.js';
import { BAD_STORES, startBadStores, startHashStorePeers, type HashStorePeers } from './hash-store-peers.js';
import { freePorts } from './ports.js';
import { readableTempDir, type SiteSpec } from './web-servers.js';

export interface ModuleUnderTest {
  readonly name: string;
  /** Starts a web server for the sites; undefined when it is not installed (the reason is printed). */
  readonly start: ((sites: readonly SiteSpec[]) => Promise<StartedServer>) | undefined;
  /** Whether HEAD of a validation path is answered like GET (Apache proxies GET only). */
  readonly servesHead: boolean;
  /** Whether the site's rewrites leave all of /.well-known/ alone (a Node app routes the rest itself). */
  readonly guardsWellKnown: boolean;
}

interface StartedServer {
  stop(): Promise<void>;
  /** The server's own log, when it keeps one: a crashed worker shows there. */
  log?(): string;
}

export interface Exchange {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
  readonly ms: number;
}

const FILEAUTH = '/.well-known/pki-validation/fileauth.txt';
const GSTEXT = '/.well-known/globalsign/domain-validation/gstext.html';
const FAILURES = [...BAD_STORES, 'wrong key'] as const;
const contact = { FirstName: 'Ada', LastName: 'Lovelace', Phone: '+49 30 1234567', Email: 'ada@certdesk-test.com' };

/** One request with the given Host header on a fresh connection. */
export function exchange(port: number, path: string, host: string, method = 'GET'): Promise<Exchange> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const body = method === 'POST' ? 'hash=x' : undefined;
    const headers = body === undefined ? { host } : { host, 'content-type': 'text/plain' };
    const req = request({ host: '127.0.0.1', port, path, method, setHost: false, headers, agent: false });
    req.setTimeout(15_000, () => req.destroy(new Error(`no answer to ${method} ${path} within 15 s`)));
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const body = Buffer.concat(chunks).toString('latin1');
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body, ms: performance.now() - started });
      });
    });
    req.end(body);
  });
}

/** The sites every module serves: A on the validation port, B with the other customer's key, … */
function siteRoots(): Record<string, string> {
  const names = ['a', 'b', 'disk', 'leaky', ...FAILURES];
  const roots = Object.fromEntries(names.map((n) => [n, readableTempDir('certdesk-site-')]));
  for (const root of Object.values(roots)) writeFileSync(join(root, 'index.html'), 'front controller\n');
  const onDisk = (path: string, text: string) => {
    mkdirSync(join(roots.disk!, dirname(path)), { recursive: true, mode: 0o755 });
    writeFileSync(join(roots.disk!, path), text);
  };
  onDisk(FILEAUTH, 'on-disk\n');
  onDisk(GSTEXT, 'on-disk-gs\n');
  return roots;
}

export function describeWebModule(m: ModuleUnderTest): void {
  describe.skipIf(m.start === undefined)(`${m.name} with certdesk's hash store`, () => {
    let peers: HashStorePeers;
    let bad: Awaited<ReturnType<typeof startBadStores>>;
    let server: StartedServer | undefined;
    const port: Record<string, number> = {};
    const timings: string[] = [];
    const get = (site: string, path: string, host: string, method?: string) =>
      exchange(port[site]!, path, host, method);

    beforeAll(async () => {
      bad = await startBadStores();
      const roots = siteRoots();
      // A port found free can be taken before the server binds it (another test file's listener):
      // then every site gets new ports (the store's FILE checks go to site A's) and all start again.
      for (let attempt = 1; ; attempt++) {
        const picked = await freePorts(Object.keys(roots).length);
        for (const [i, site] of Object.keys(roots).entries()) port[site] = picked[i]!;
        peers = await startHashStorePeers(port.a!);
        const store = (site: string) => (site in bad.urls ? bad.urls[site as keyof typeof bad.urls] : peers.storeUrl);
        const key = (site: string) => (site === 'b' ? peers.b.key : site === 'wrong key' ? 'cdk_wrong' : peers.a.key);
        const sites: SiteSpec[] = [];
        for (const [site, root] of Object.entries(roots)) {
          sites.push({ port: port[site]!, root, storeUrl: store(site), key: key(site) });
        }
        try {
          server = await m.start!(sites);
          break;
        } catch (e) {
          await peers.close();
          if (attempt >= 5 || !/EADDRINUSE|Address already in use/i.test(String((e as Error).message ?? e))) throw e;
        }
      }
      await peers.file(peers.a.key, 'shop.example.org', 'hash-a-shop');
    }, 120_000);
    afterAll(async () => {
      if (timings.length > 0) console.info(`${m.name}: 404 for a failing store after ${timings.join(', ')}`);
      // nginx and httpd replace a crashed worker silently: its trace in the log fails the suite.
      const log = server?.log?.() ?? '';
      await server?.stop();
      expect(log).not.toMatch(/exited on signal|exit signal|segmentation fault/i);
      await bad?.close();
      await peers?.close();
    });

    it('ok/serves the hash filed for the Host at fileauth.txt and at the CA path, as plain text', async () => {
      for (const path of [FILEAUTH, GSTEXT, `${FILEAUTH}?cache=1`]) {
        for (const host of ['shop.example.org', `SHOP.Example.ORG:${port.a}`, 'shop.example.org.']) {
          const res = await get('a', path, host);
          expect([res.status, res.body], `${path} ${host}`).toEqual([200, 'hash-a-shop\n']);
          expect(res.headers['content-type']).toMatch(/^text\/plain\b/);
        }
      }
      expect(peers.asked).toContain('/shop.example.org');
      const head = await get('a', FILEAUTH, 'shop.example.org', 'HEAD');
      if (m.servesHead) expect([head.status, head.headers['content-length'], head.body]).toEqual([200, '12', '']);
      else expect(head.status).toBe(404);
    });

    it('ok/a file on disk wins over the store', async () => {
      expect((await get('disk', FILEAUTH, 'shop.example.org')).body).toBe('on-disk\n');
      expect((await get('disk', GSTEXT, 'shop.example.org')).body).toBe('on-disk-gs\n');
    });

    it("ok/other paths and methods are left to the site's own rules, and the store is not asked", async () => {
      const before = peers.asked.length;
      for (const method of ['GET', 'POST']) {
        const res = await get('a', '/some/page', 'shop.example.org', method);
        expect([res.status, res.body]).toEqual([200, 'front controller\n']);
      }
      for (const [method, path] of [
        ['POST', FILEAUTH],
        ['PUT', GSTEXT],
        ['GET', '/.well-known/pki-validation/other.txt'],
        ['GET', '/.well-known/pki-validation/fileauth.txt.bak'],
      ] as const)
        expect((await get('a', path, 'shop.example.org', method)).body, `${method} ${path}`).not.toContain('hash-a');
      expect(peers.asked.length).toBe(before);
      if (!m.guardsWellKnown) return;
      for (const path of ['/.well-known/pki-validation/other.txt', '/.well-known/acme-challenge/token'])
        expect((await get('a', path, 'shop.example.org')).status, path).toBe(404);
    });

    it("ok/rewrite rules never take a validation path: no hash is a plain 404, not the site's front controller", async () => {
      for (const path of [FILEAUTH, GSTEXT]) {
        const res = await get('a', path, 'nothing-filed.example.org');
        expect([res.status, res.body]).toEqual([404, 'Not Found\n']);
        expect(res.headers['content-type']).toMatch(/^text\/plain\b/);
      }
    });

    it('fail/a name filed by another customer is not served (two customers, two keys)', async () => {
      await peers.file(peers.a.key, 'a-only.example.org', 'hash-a-only');
      await peers.file(peers.b.key, 'b-only.example.org', 'hash-b-only');
      expect((await get('a', FILEAUTH, 'a-only.example.org')).body).toBe('hash-a-only\n');
      expect((await get('b', FILEAUTH, 'a-only.example.org')).status).toBe(404);
      expect((await get('b', FILEAUTH, 'b-only.example.org')).body).toBe('hash-b-only\n');
      expect((await get('a', FILEAUTH, 'b-only.example.org')).status).toBe(404);
    });

    it('fail/a Host that is not a DNS name gets a 404 and never reaches the store', async () => {
      const before = peers.asked.length;
      const hosts = ['127.0.0.1', '[::1]:80', 'localhost', 'a_b.example.org', '-x.example.org', 'shop.example.org/..'];
      for (const host of [...hosts, `${'a'.repeat(64)}.org`, `${'a.'.repeat(127)}org`, 'shop.example.org%2F..']) {
        const res = await get('a', FILEAUTH, host);
        expect([400, 404], host).toContain(res.status);
        expect(res.body).not.toContain('hash-a');
      }
      expect(peers.asked.slice(before)).toEqual([]);
    });

    it('fail/the store key never reaches the client, in headers or body', async () => {
      const seen: Exchange[] = [
        await get('a', FILEAUTH, 'shop.example.org'),
        await get('a', FILEAUTH, 'shop.example.org', 'HEAD'),
        await get('a', GSTEXT, 'nothing-filed.example.org'),
        await get('b', FILEAUTH, 'shop.example.org'),
        await get('wrong key', FILEAUTH, 'shop.example.org'),
        await get('leaky', FILEAUTH, 'shop.example.org'),
        await get('a', '/some/page', 'shop.example.org'),
      ];
      expect(seen.at(-2)!.body).toBe('leaky-hash\n');
      for (const res of seen) {
        const text = `${JSON.stringify(res.headers)}\n${res.body}`;
        for (const key of [peers.a.key, peers.b.key, 'cdk_wrong']) expect(text).not.toContain(key);
        expect(text.toLowerCase()).not.toContain('x-api-key');
      }
    });

    it.each(FAILURES)('fail/a store that is %s: a plain 404 within 2 s, and the server keeps serving', async (kind) => {
      const res = await get(kind, FILEAUTH, 'shop.example.org');
      timings.push(`${kind} ${Math.round(res.ms)} ms`);
      expect([res.status, res.body]).toEqual([404, 'Not Found\n']);
      expect(res.headers['content-type']).toMatch(/^text\/plain\b/);
      // The store holds its answer 10 s when slow: 2 s is a clear bound above the 1 s timeouts.
      expect(res.ms).toBeLessThan(2000);
      expect((await get(kind, '/some/page', 'shop.example.org')).body).toBe('front controller\n');
      expect((await get('a', FILEAUTH, 'shop.example.org')).body).toBe('hash-a-shop\n');
    });

    it('ok/a FILE order placed through the API is validated by certdesk fetching the hash through the module', async () => {
      const { t, a } = peers;
      const csr = testCsr().pem;
      const data = await t.call(a.token, {
        method: 'POST',
        url: '/rest/v1/FileData',
        payload: { CSR: csr, ProductCode: 'TrustPoint.DV' },
      });
      const f = data.json().FileAuthDetails as { FileName: string; FileContents: string; FQDNs: string[] };
      expect(f.FileName).toBe('fileauth.txt');
      for (const name of f.FQDNs) {
        peers.dns.set(name, [{ type: 'A', address: '127.0.0.1' }]);
        await peers.file(a.key, name, f.FileContents);
      }
      const placed = await t.call(a.token, {
        method: 'POST',
        url: '/rest/v1/Order',
        payload: {
          OrderParameters: { ProductCode: 'TrustPoint.DV', ValidityPeriod: 12, CSR: csr, DVAuthMethod: 'FILE' },
          AdminContact: contact,
          TechContact: contact,
        },
      });
      expect(placed.statusCode, placed.body).toBe(200);
      const worker = createWorker(t.services, pino({ level: 'silent' }));
      for (let i = 0; i < 5 && (await worker.runOnce()) > 0; i++);
      const id = placed.json().ServiceOrderID as number;
      const order = (await t.call(a.token, { method: 'GET', url: `/rest/v1/Order/${id}?includeDCVStatus=true` })).json()
        .OrderInfo as { OrderStatus: { MajorStatus: string }; DCVStatus: { Status: string }[] };
      expect(order.OrderStatus.MajorStatus).toBe('COMPLETE');
      expect(order.DCVStatus.map((d) => d.Status)).toEqual(f.FQDNs.map(() => 'VALIDATED'));
      for (const name of f.FQDNs) expect(peers.asked).toContain(`/${name}`);
    });
  });
}
