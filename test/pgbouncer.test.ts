// certdesk behind PgBouncer in transaction mode, as docs/operations.md tells: statements unnamed
// (CERTDESK_DATABASE_PREPARED=false) and the news between processes through Redis, since a LISTEN
// through such a pooler hears (almost) nothing. Without Redis a process refuses to start and says
// why, instead of serving revoked tokens until its cache time. A real PgBouncer (Debian's package)
// in front of the test PostgreSQL server.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config/index.js';
import { createServices } from '../src/main.js';
import { migrateToLatest, openDatabase, type Db } from '../src/storage/index.js';
import { createTestContext, type TestContext } from './support/app.js';
import { testCsr } from './support/csr.js';
import { scratchPostgresDatabase, type TestDialect } from './support/databases.js';
import { ORDER_CONTACT } from './support/issuing-context.js';
import { expectOverdueWritesCancelled } from './support/overdue.js';
import { freePort } from './support/ports.js';
import { kill, sleep } from './support/processes.js';

const PG = process.env.CERTDESK_TEST_DATABASE_URL;
const REDIS = process.env.CERTDESK_TEST_REDIS_URL;
const PGBOUNCER = '/usr/sbin/pgbouncer';
const missing =
  PG === undefined || PG === ''
    ? 'CERTDESK_TEST_DATABASE_URL is not set'
    : REDIS === undefined || REDIS === ''
      ? 'CERTDESK_TEST_REDIS_URL is not set'
      : !existsSync(PGBOUNCER)
        ? `${PGBOUNCER} is not installed (Debian package pgbouncer)`
        : undefined;
if (missing !== undefined) console.warn(`PgBouncer tests not run: ${missing}`);

/** PgBouncer in transaction mode on a free loopback port, in front of `target`'s server (trust, as the test server). */
async function startPgBouncer(target: URL): Promise<{ port: number; stop(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'certdesk-pgbouncer-'));
  const port = await freePort();
  writeFileSync(join(dir, 'users.txt'), `"${decodeURIComponent(target.username || 'postgres')}" ""\n`);
  writeFileSync(
    join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `* = host=${target.hostname} port=${target.port || '5432'}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${join(dir, 'users.txt')}`,
      'pool_mode = transaction',
      'max_client_conn = 200',
      'default_pool_size = 20',
      'ignore_startup_parameters = extra_float_digits',
      '',
    ].join('\n'),
  );
  // PgBouncer refuses to run as root: it switches to nobody, who must read its files.
  chmodSync(dir, 0o755);
  const root = process.getuid?.() === 0;
  const child: ChildProcess = spawn(PGBOUNCER, [...(root ? ['-u', 'nobody'] : []), join(dir, 'pgbouncer.ini')], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const stop = async () => {
    await kill(child);
    rmSync(dir, { recursive: true, force: true });
  };
  for (let i = 0; ; i++) {
    const probe = new pg.Client({ host: '127.0.0.1', port, user: target.username || 'postgres', database: 'postgres' });
    try {
      await probe.connect();
      await probe.query('SELECT 1');
      await probe.end();
      return { port, stop };
    } catch {
      await probe.end().catch(() => undefined);
      if (i >= 100 || child.exitCode !== null) {
        await stop();
        throw new Error(`PgBouncer did not start: ${stderr}`);
      }
      await sleep(100);
    }
  }
}

describe.skipIf(missing !== undefined)('behind PgBouncer in transaction mode', () => {
  let bouncer: Awaited<ReturnType<typeof startPgBouncer>>;
  let scratch: Awaited<ReturnType<typeof scratchPostgresDatabase>>;
  /** The scratch database through PgBouncer. */
  let url: string;
  const contexts: TestContext[] = [];
  /** The CA key file of every process here: they share the database's CA keys. */
  const keyFile = join(mkdtempSync(join(tmpdir(), 'certdesk-kek-')), 'ca-keys.secret');
  beforeAll(async () => {
    bouncer = await startPgBouncer(new URL(PG!));
    scratch = await scratchPostgresDatabase(PG!);
    const through = new URL(scratch.url);
    through.hostname = '127.0.0.1';
    through.port = String(bouncer.port);
    url = through.toString();
    // Migrated through the pooler too (its advisory lock and DDL each in a transaction).
    const db = await openDatabase({ url, prepared: false });
    try {
      await migrateToLatest(db);
    } finally {
      await db.close();
    }
  }, 60_000);
  afterAll(async () => {
    for (const t of contexts) await t.close();
    await bouncer?.stop();
    await scratch?.drop();
  });

  /** The same database for every call: each is a process of its own. */
  const throughBouncer: TestDialect = {
    dialect: 'postgres',
    open: () => openDatabase({ url, prepared: false, poolSize: 5 }),
  };
  const startProcess = async (env: Record<string, string> = {}) => {
    const t = await createTestContext(throughBouncer, {
      CERTDESK_DATABASE_PREPARED: 'false',
      CERTDESK_REDIS_URL: REDIS!,
      CERTDESK_REDIS_PREFIX: `pgbouncer-${randomBytes(4).toString('hex')}`,
      CERTDESK_RATE_LIMIT: '1000000',
      CERTDESK_CA_KEY_FILE: keyFile,
      ...env,
    });
    contexts.push(t);
    return t;
  };

  it('ok/two processes place orders at once and hear each other: a revoked token is refused by the other at once', async () => {
    const prefix = `pgbouncer-${randomBytes(4).toString('hex')}`;
    // A cache time far longer than the test: a refusal in time came by the broadcast.
    const env = { CERTDESK_REDIS_PREFIX: prefix, CERTDESK_AUTH_CACHE_SECONDS: '300' };
    const a = await startProcess(env);
    const b = await startProcess(env);
    const customer = await a.customer({ creditLimit: 100_000 });
    const order = {
      OrderParameters: {
        ProductCode: 'TrustPoint.DV',
        ValidityPeriod: 12,
        CSR: testCsr().pem,
        DVAuthMethod: 'DNS',
      },
      AdminContact: ORDER_CONTACT,
      TechContact: ORDER_CONTACT,
    };
    const post = (t: TestContext) => t.call(customer.token, { method: 'POST', url: '/rest/v1/Order', payload: order });
    const used = async () =>
      (await b.call(customer.token, { method: 'GET', url: '/rest/v1/Limit' })).json().LimitInfo.Used as number;
    expect((await post(a)).statusCode).toBe(200);
    const price = await used();
    expect(price).toBeGreaterThan(0);
    const placed = await Promise.all(Array.from({ length: 20 }, (_, i) => post(i % 2 === 0 ? a : b)));
    expect(placed.map((r) => r.statusCode)).toEqual(Array.from({ length: 20 }, () => 200));
    expect(new Set(placed.map((r) => r.json().ServiceOrderID as number)).size).toBe(20);
    // Each charged once: 21 orders in all.
    expect(await used()).toBeCloseTo(21 * price, 2);

    const victim = await a.token(customer);
    expect((await b.call(victim, { method: 'GET', url: '/rest/v1/Profile' })).statusCode).toBe(200);
    const revoked = await a.revoke(customer, victim);
    expect(revoked.statusCode).toBe(200);
    expect((await b.call(victim, { method: 'GET', url: '/rest/v1/Profile' })).statusCode).toBe(401);
    expect((await b.app.inject({ method: 'GET', url: '/readyz' })).json()).toMatchObject({
      checks: { database: 'ok', redis: 'ok', broadcast: 'ok' },
    });
  }, 120_000);

  it('fail/without Redis a process does not start: its LISTEN through the pooler hears nothing, and it says so', async () => {
    const db: Db = await openDatabase({ url, prepared: false, poolSize: 2 });
    try {
      const config = loadConfig({
        CERTDESK_DATABASE_URL: url,
        CERTDESK_DATABASE_PREPARED: 'false',
        CERTDESK_DATA_DIR: '/nonexistent-test-data',
        CERTDESK_DNS_SERVERS: '127.0.0.1:9',
        CERTDESK_CA_KEY_FILE: keyFile,
      });
      await expect(createServices(config, { db })).rejects.toThrow(/hears no notifications.*CERTDESK_REDIS_URL/);
    } finally {
      await db.close();
    }
  }, 60_000);

  it('fail/statements overdue behind a lock: the cancel reaches the backend through the pooler; each answered 503 "did not answer in time", none left waiting, none landing later', async () => {
    const db: Db = await openDatabase({ url, prepared: false, poolSize: 2, queryTimeoutMs: 300 });
    try {
      await expectOverdueWritesCancelled(db, scratch.url);
    } finally {
      await db.close();
    }
  });
  it('ok/migrations through the pooler while its server connections are busy with other clients: no migration lock is left held, and a process starting after is not kept waiting', async () => {
    const direct = new pg.Client({ connectionString: scratch.url });
    await direct.connect();
    const others = await Promise.all(
      Array.from({ length: 8 }, async () => {
        const c = new pg.Client({ connectionString: url });
        await c.connect();
        return c;
      }),
    );
    let busy = true;
    try {
      // The last migration taken back, so that there is one to apply.
      await direct.query(`DELETE FROM kysely_migration WHERE name = '0024-expiry-indexes'`);
      for (const index of ['dcv_values_expiry', 'oauth_codes_expiry', 'web_sessions_expiry'])
        await direct.query(`DROP INDEX ${index}`);
      for (const index of ['operator_sessions_expiry', 'sign_in_failures_updated'])
        await direct.query(`DROP INDEX ${index}`);
      // Other processes' traffic: each transaction may land on any server connection.
      const traffic = others.map(async (c) => {
        while (busy) await c.query('BEGIN; SELECT pg_sleep(0.002); COMMIT');
      });
      const migrating = await openDatabase({ url, prepared: false, migrating: true, poolSize: 3 });
      try {
        expect(await migrateToLatest(migrating)).toEqual(['0024-expiry-indexes']);
      } finally {
        await migrating.close();
      }
      busy = false;
      await Promise.all(traffic);
      const { rows } = await direct.query<{ pid: number }>(
        `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
      );
      expect(rows).toEqual([]);
      // A second process finds nothing to do, at once (a lock left held would keep it up to an hour).
      const next = await openDatabase({ url, prepared: false, migrating: true, poolSize: 3 });
      try {
        expect(await migrateToLatest(next)).toEqual([]);
      } finally {
        await next.close();
      }
    } finally {
      busy = false;
      for (const c of others) await c.end();
      await direct.end();
    }
  }, 60_000);
});
