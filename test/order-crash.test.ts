// Crash: a worker killed during issuance → after restart the order completes once, one
// certificate, one charge. The test places a DV order (DNS proof already published on the test
// DNS server) against a real database file or PostgreSQL database; a worker in a child process
// validates it, signs the certificate and is SIGKILLed right after the certificate is recorded,
// before the order is completed. A second worker process then takes the job and the issuance claim
// over (their holder is a dead process on this host), and must complete the order with the
// certificate already signed.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../src/config/index.js';
import { createServices, createWebApp, type Services } from '../src/main.js';
import { openDatabase, type Db } from '../src/storage/index.js';
import { testCaKeys } from './support/ca-fixture.js';
import { testCsr } from './support/csr.js';
import { scratchPostgresDatabase } from './support/databases.js';
import { startDnsServer } from './support/dns-server.js';

const CHILD = fileURLToPath(new URL('./support/order-worker-child.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const contact = { FirstName: 'Ada', LastName: 'Lovelace', Phone: '+49 30 1234567', Email: 'ada@certdesk-test.com' };

/** A database the test and its child processes share, by URL; `drop` removes it. */
interface SharedDatabase {
  readonly url: string;
  drop(): Promise<void>;
}

interface Target {
  readonly dialect: 'sqlite' | 'postgres';
  create(dir: string): Promise<SharedDatabase>;
}

const sqlite: Target = {
  dialect: 'sqlite',
  // A file (not :memory:) so that the child processes see the same database; the temp dir goes with it.
  create: async (dir) => ({ url: join(dir, 'certdesk.db'), drop: async () => undefined }),
};

/** A fresh PostgreSQL database per test, as test/support/databases.ts makes them (migrated by createServices). */
function postgres(adminUrl: string): Target {
  return { dialect: 'postgres', create: () => scratchPostgresDatabase(adminUrl) };
}

function targets(): Target[] {
  const url = process.env.CERTDESK_TEST_DATABASE_URL;
  return url !== undefined && url !== '' ? [sqlite, postgres(url)] : [sqlite];
}

/** A worker child process and the lines it has written to stdout. */
interface Child {
  readonly process: ChildProcess;
  readonly lines: string[];
  /** The first line starting with `prefix` (without it); rejects after `ms` or when the child exits first. */
  line(prefix: string, ms: number): Promise<string>;
  kill(): Promise<void>;
}

function startChild(env: Record<string, string>, crashAfterSigning: boolean): Child {
  // Only the test's CERTDESK_* settings reach the child: loadConfig refuses unknown ones.
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CERTDESK_')));
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD], {
    cwd: ROOT,
    env: { ...inherited, ...env, CRASH_AFTER_SIGNING: crashAfterSigning ? '1' : '0' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines: string[] = [];
  const waiters = new Set<() => void>();
  createInterface({ input: child.stdout! }).on('line', (l) => {
    lines.push(l);
    for (const w of waiters) w();
  });
  const exited = () => child.exitCode !== null || child.signalCode !== null;
  child.on('exit', () => {
    for (const w of waiters) w();
  });
  return {
    process: child,
    lines,
    line(prefix, ms) {
      return new Promise<string>((resolve, reject) => {
        const check = () => {
          const found = lines.find((l) => l.startsWith(prefix));
          if (found !== undefined) done(() => resolve(found.slice(prefix.length)));
          else if (exited())
            done(() =>
              reject(
                new Error(
                  `the child exited (${child.exitCode ?? child.signalCode}) before writing "${prefix}…"; it wrote ${JSON.stringify(lines)}`,
                ),
              ),
            );
        };
        const timer = setTimeout(
          () =>
            done(() =>
              reject(new Error(`no "${prefix}…" from the child in ${ms} ms; it wrote ${JSON.stringify(lines)}`)),
            ),
          ms,
        );
        const done = (settle: () => void) => {
          clearTimeout(timer);
          waiters.delete(check);
          settle();
        };
        waiters.add(check);
        check();
      });
    },
    async kill() {
      if (exited()) return;
      const gone = once(child, 'exit');
      child.kill('SIGKILL');
      await gone;
    },
  };
}

/** `close` made idempotent: called by the test and again by the cleanup, it runs once. */
function closeOnce<T extends { close(): Promise<unknown> }>(resource: T): () => Promise<void> {
  let closing: Promise<unknown> | undefined;
  return async () => void (await (closing ??= resource.close()));
}

/** openssl verify of a leaf against its intermediates and root; the tool's output. */
function opensslVerify(dir: string, leaf: string, intermediates: string, root: string): string {
  writeFileSync(join(dir, 'leaf.pem'), leaf);
  writeFileSync(join(dir, 'int.pem'), intermediates);
  writeFileSync(join(dir, 'root.pem'), root);
  const r = spawnSync(
    'openssl',
    ['verify', '-CAfile', join(dir, 'root.pem'), '-untrusted', join(dir, 'int.pem'), join(dir, 'leaf.pem')],
    { encoding: 'utf8' },
  );
  return `${r.stdout}${r.stderr}`;
}

describe.each(targets())('a worker killed during issuance, on $dialect (two worker processes)', (target) => {
  const cleanup: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const step of cleanup.splice(0).reverse()) {
      try {
        await step();
      } catch (err) {
        console.error('cleanup step failed', err);
      }
    }
  });

  it('after restart the order completes once: one certificate (the one signed before the crash), one charge, one order.issued', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'certdesk-order-crash-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const database = await target.create(dir);
    cleanup.push(() => database.drop());
    const dns = await startDnsServer();
    cleanup.push(() => dns.close());
    const env = {
      CERTDESK_DATABASE_URL: database.url,
      CERTDESK_CA_KEY_FILE: join(dir, 'ca-keys.secret'),
      CERTDESK_DNS_SERVERS: dns.address,
      CERTDESK_DATA_DIR: join(dir, 'data'),
    };

    // Step 1, here: migrate, create the CA, a customer and a DV order by DNS whose TXT record is already published.
    let services: Services | undefined = await createServices(loadConfig(env));
    cleanup.push(() => services?.close());
    await services.ca.init({ keyPairs: testCaKeys() });
    const created = await services.accounts.createCustomer({
      name: 'Crash',
      email: 'ops@customer.example',
      currency: 'EUR',
      creditLimit: 100000,
      country: 'DE',
      locale: 'de_DE',
      timezone: 'Europe/Berlin',
    });
    const app = await createWebApp(services, false);
    const closeApp = closeOnce(app);
    cleanup.push(closeApp);
    const tokenRes = await app.inject({
      method: 'POST',
      url: '/oauth2/token',
      payload: {
        grant_type: 'client_credentials',
        client_id: created.application.clientId,
        client_secret: created.clientSecret,
      },
    });
    expect(tokenRes.statusCode, tokenRes.body).toBe(200);
    const placed = await app.inject({
      method: 'POST',
      url: '/rest/v1/Order',
      headers: { authorization: `Bearer ${(tokenRes.json() as { access_token: string }).access_token}` },
      payload: {
        OrderParameters: { ProductCode: 'TrustPoint.DV', ValidityPeriod: 12, CSR: testCsr().pem, DVAuthMethod: 'DNS' },
        AdminContact: contact,
        TechContact: contact,
      },
    });
    expect(placed.statusCode, placed.body).toBe(200);
    const body = placed.json() as { ServiceOrderID: number; OrderParameters: { DNSAuthDetails: { DNSValue: string } } };
    const orderId = body.ServiceOrderID;
    dns.set('certdesk-test.com', [
      { type: 'A', address: '127.0.0.1' },
      { type: 'TXT', data: body.OrderParameters.DNSAuthDetails.DNSValue },
    ]);
    dns.set('www.certdesk-test.com', [{ type: 'A', address: '127.0.0.1' }]);
    await closeApp();
    await services.close();
    services = undefined;

    const db: Db = await openDatabase({ url: database.url, poolSize: 2 });
    const closeDb = closeOnce(db);
    cleanup.push(closeDb);
    const order = () => db.kysely.selectFrom('orders').selectAll().where('id', '=', orderId).executeTakeFirstOrThrow();
    const certificates = () =>
      db.kysely.selectFrom('certificates').select(['serial', 'pem']).where('order_id', '=', orderId).execute();
    const job = () =>
      db.kysely.selectFrom('jobs').selectAll().where('name', '=', 'order.validate').executeTakeFirstOrThrow();
    expect(await order()).toMatchObject({
      major_status: 'PENDING',
      minor_status: 'WF_DNS_AUTH',
      billing_status: 'uncleared',
    });

    // Step 2: a worker process validates the order, signs, and is killed once the certificate is recorded.
    const first = startChild(env, true);
    cleanup.push(() => first.kill());
    const serial = await first.line('signed ', 60_000);
    await first.kill();
    const held = await job();
    expect(held).toMatchObject({ status: 'running', attempts: 1 });
    expect(held.lease_owner).toContain(`:${first.process.pid}:`);
    expect(await order()).toMatchObject({
      major_status: 'PENDING',
      minor_status: 'WF_ISSUANCE',
      billing_status: 'uncleared',
      issued_at: null,
    });
    expect((await certificates()).map((c) => c.serial)).toEqual([serial]);

    // Step 3: a second worker process takes the job and the claim of the dead one over and completes the order.
    const second = startChild(env, false);
    cleanup.push(() => second.kill());
    await vi.waitFor(async () => expect((await order()).major_status).toBe('COMPLETE'), {
      timeout: 30_000,
      interval: 200,
    });
    await vi.waitFor(async () => expect((await job()).status).toBe('done'), { timeout: 10_000, interval: 100 });
    await second.kill();
    // The second worker did not sign anything.
    expect(second.lines.filter((l) => l.startsWith('signed '))).toEqual([]);

    // Once: the order, its certificate, its charge, its audit trail.
    const final = await order();
    expect(final).toMatchObject({ major_status: 'COMPLETE', minor_status: 'COMPLETED', billing_status: 'cleared' });
    expect(final.issued_at).not.toBeNull();
    const done = await job();
    expect(done).toMatchObject({ status: 'done', attempts: 2 });
    expect(done.lease_owner).not.toContain(`:${first.process.pid}:`);
    const certs = await certificates();
    expect(certs.map((c) => c.serial)).toEqual([serial]);
    const ledger = await db.kysely
      .selectFrom('ledger')
      .select(['kind', 'amount_minor'])
      .where('order_id', '=', orderId)
      .execute();
    expect(ledger).toEqual([{ kind: 'charge', amount_minor: final.price_minor }]);
    const customer = await db.kysely
      .selectFrom('customers')
      .select('used_minor')
      .where('id', '=', final.customer_id)
      .executeTakeFirstOrThrow();
    expect(final.price_minor).toBeGreaterThan(0);
    expect(customer.used_minor).toBe(final.price_minor);
    const events = await db.kysely
      .selectFrom('audit_events')
      .select(['action', 'subject', 'details'])
      .orderBy('id')
      .execute();
    const issued = events.filter((e) => e.action === 'order.issued' && e.subject === String(orderId));
    expect(issued).toHaveLength(1);
    expect(JSON.parse(issued[0]!.details ?? '{}')).toMatchObject({ serial });
    expect(events.filter((e) => e.action === 'order.failed')).toEqual([]);
    // The CA was asked to sign exactly once in this database (a second signing, even if its record were lost, would show here).
    expect(events.filter((e) => e.action === 'ca.sign.begin').map((e) => e.subject)).toEqual([serial]);
    expect(events.filter((e) => e.action === 'ca.sign.done').map((e) => e.subject)).toEqual([serial]);
    await closeDb();

    // The certificate verifies against its chain (read back through a fresh set of services).
    services = await createServices(loadConfig(env));
    const fulfillment = await services.ca.fulfillment(serial);
    expect(fulfillment?.certificate).toBe(certs[0]!.pem);
    const root = services.ca.chain('TrustPoint', 'SHA256-FULL-CHAIN').root;
    expect(opensslVerify(dir, fulfillment!.certificate, fulfillment!.intermediate, root)).toContain(': OK');
    await services.close();
    services = undefined;
  }, 120_000);
});
