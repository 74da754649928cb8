// The first start of `certdesk serve` on a fresh data directory, as `npm start` does it: how long
// until /healthz and /readyz answer 200, and until a first order comes back issued.
//   node --import tsx bench/first-start.ts [runs]      (default 5 runs; prints each run and the medians)
// Each run: a new empty data directory, `bin/certdesk serve` spawned with a clean CERTDESK_*
// environment (defaults: SQLite, RSA-4096 roots), polled every 25 ms from the moment of the spawn.
// Once /readyz says 200, a customer is registered in this process (on the same SQLite file, as
// `certdesk customer create` would), and a free DV order is placed over HTTP with its DNS proof
// published on a loopback DNS server: it must come back with its certificate (issued inline).
// See bench/README.md.
import { spawn, type ChildProcess } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../src/config/index.js';
import { createServices } from '../src/main.js';
import { testCsr } from '../test/support/csr.js';
import { startDnsServer, type TestDnsServer } from '../test/support/dns-server.js';
import { median } from './stats.js';
import { ORDER_INLINE_PRODUCT, orderInlineBody } from './targets.js';

const BIN = fileURLToPath(new URL('../bin/certdesk', import.meta.url));
/** A hung start, not a slow one: the run is reported broken after this long. */
const GIVE_UP_MS = 300_000;
const POLL_MS = 25;

interface Run {
  readonly healthzSeconds: number;
  readonly readySeconds: number;
  readonly issuedSeconds: number;
  /** CPU time (user + system, all threads) the server had used when it was ready; NaN off Linux. */
  readonly readyCpuSeconds: number;
  readonly rootBits: number;
}

/** CPU seconds a process has used so far (Linux /proc), NaN where that cannot be read. */
function cpuSeconds(pid: number | undefined): number {
  try {
    // Fields 14 and 15 of /proc/<pid>/stat (after the parenthesised name): utime and stime in clock ticks (100/s).
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8')
      .replace(/^.*\) /, '')
      .split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return Number.NaN;
  }
}

async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function status(url: string): Promise<number> {
  try {
    return (await fetch(url, { signal: AbortSignal.timeout(2_000) })).status;
  } catch {
    return 0;
  }
}

async function json(url: string, init: RequestInit = {}): Promise<Record<string, unknown>> {
  const res = await fetch(url, { ...init, headers: { 'content-type': 'application/json', ...(init.headers ?? {}) } });
  const body = (await res.json()) as Record<string, unknown>;
  if (res.status !== 200)
    throw new Error(`${init.method ?? 'GET'} ${url}: HTTP ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
  return body;
}

/** Places one free DV order with its DNS proof in place; resolves when it came back issued. */
async function issueOne(base: string, dataDir: string, dns: TestDnsServer, csrPem: string): Promise<void> {
  const services = await createServices(loadConfig({ CERTDESK_DATA_DIR: dataDir }));
  let c: { clientId: string; clientSecret: string };
  try {
    const created = await services.accounts.createCustomer({
      name: 'First Start',
      email: 'ops@first-start.example',
      currency: 'EUR',
      creditLimit: 5000,
      country: 'DE',
      locale: 'de_DE',
      timezone: 'Europe/Berlin',
    });
    c = { clientId: created.application.clientId, clientSecret: created.clientSecret };
  } finally {
    await services.close();
  }
  const token = (
    await json(`${base}/oauth2/token`, {
      method: 'POST',
      body: JSON.stringify({ grant_type: 'client_credentials', client_id: c.clientId, client_secret: c.clientSecret }),
    })
  ).access_token as string;
  const auth = { authorization: `Bearer ${token}` };
  const dnsData = await json(`${base}/rest/v1/DNSData`, {
    method: 'POST',
    headers: auth,
    body: JSON.stringify({ CSR: csrPem, ProductCode: ORDER_INLINE_PRODUCT.code }),
  });
  const details = dnsData.DNSAuthDetails as { DNSValue: string; FQDNs: string[] };
  for (const name of details.FQDNs) dns.set(name, [{ type: 'TXT', data: details.DNSValue }]);
  const placed = await json(`${base}/rest/v1/Order`, { method: 'POST', headers: auth, body: orderInlineBody(csrPem) });
  const certificate = (placed.Fulfillment as { Certificate?: string } | undefined)?.Certificate;
  if (certificate === undefined || !certificate.startsWith('-----BEGIN CERTIFICATE-----'))
    throw new Error(`the order was not issued inline: ${JSON.stringify(placed).slice(0, 300)}`);
}

async function oneRun(dns: TestDnsServer, csrPem: string): Promise<Run> {
  const dataDir = mkdtempSync(join(tmpdir(), 'certdesk-first-start-'));
  const [port, kvPort] = [await freePort(), await freePort()];
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CERTDESK_')));
  const env = {
    ...clean,
    CERTDESK_DATA_DIR: dataDir,
    CERTDESK_PORT: String(port),
    CERTDESK_KV_PORT: String(kvPort),
    CERTDESK_DNS_SERVERS: dns.address,
  };
  const base = `http://127.0.0.1:${port}`;
  let output = '';
  const t0 = performance.now();
  const child: ChildProcess = spawn(BIN, ['serve'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.on('data', (d: Buffer) => (output = (output + d.toString()).slice(-20_000)));
  child.stderr!.on('data', (d: Buffer) => (output = (output + d.toString()).slice(-20_000)));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const seconds = () => (performance.now() - t0) / 1000;
  try {
    let healthz: number | undefined;
    let ready: number | undefined;
    let readyCpu = Number.NaN;
    while (ready === undefined) {
      if (child.exitCode !== null) throw new Error(`certdesk serve exited with ${child.exitCode}:\n${output}`);
      if (performance.now() - t0 > GIVE_UP_MS) throw new Error(`not ready after ${GIVE_UP_MS / 1000} s:\n${output}`);
      if (healthz === undefined && (await status(`${base}/healthz`)) === 200) healthz = seconds();
      if (healthz !== undefined && (await status(`${base}/readyz`)) === 200) {
        ready = seconds();
        readyCpu = cpuSeconds(child.pid);
      } else await new Promise((r) => setTimeout(r, POLL_MS));
    }
    await issueOne(base, dataDir, dns, csrPem);
    const issued = seconds();
    // The measured start is the real default: RSA-4096 roots.
    const root = new X509Certificate(
      Buffer.from(await (await fetch(`${base}/pki/trustpoint-rsa-root-1.crt`)).arrayBuffer()),
    );
    return {
      healthzSeconds: healthz!,
      readySeconds: ready,
      issuedSeconds: issued,
      readyCpuSeconds: readyCpu,
      rootBits: root.publicKey.asymmetricKeyDetails?.modulusLength ?? 0,
    };
  } finally {
    child.kill('SIGTERM');
    await Promise.race([exited, new Promise((r) => setTimeout(r, 45_000))]);
    child.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const runs = Number(process.argv[2] ?? '5');
  if (!Number.isInteger(runs) || runs < 1)
    throw new Error(`usage: bench/first-start.ts [runs] (got ${process.argv[2]})`);
  const dns = await startDnsServer();
  const csrPem = testCsr().pem;
  const results: Run[] = [];
  const load = loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
  process.stdout.write(`certdesk serve, first start on a fresh data directory (load average at start: ${load})\n`);
  process.stdout.write('run  /healthz 200  /readyz 200  order issued  CPU at ready  RSA root  load\n');
  try {
    for (let i = 1; i <= runs; i++) {
      const r = await oneRun(dns, csrPem);
      results.push(r);
      const cols = [r.healthzSeconds, r.readySeconds, r.issuedSeconds, r.readyCpuSeconds].map(
        (v, k) => `${v.toFixed(2).padStart([10, 9, 10, 10][k]!)} s`,
      );
      process.stdout.write(
        `${String(i).padStart(3)}  ${cols.join('  ')}  ${String(r.rootBits).padStart(8)}  ${loadavg()[0]!.toFixed(2)}\n`,
      );
    }
  } finally {
    await dns.close();
  }
  const m = (f: (r: Run) => number, width: number) => `${median(results.map(f)).toFixed(2).padStart(width)} s`;
  process.stdout.write(
    `med  ${m((r) => r.healthzSeconds, 10)}  ${m((r) => r.readySeconds, 9)}  ${m((r) => r.issuedSeconds, 10)}  ${m((r) => r.readyCpuSeconds, 10)}\n`,
  );
  process.stdout.write(
    `load average at end: ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}\n`,
  );
}

main().catch((e: unknown) => {
  process.stderr.write(`first-start bench broken: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exitCode = 1;
});
